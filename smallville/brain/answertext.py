"""The answer in a model's reply: its text apart from the reasoning a model may do first,
and the one slip of small models that can be mended without losing a word of the answer.

Reasoning models (DeepSeek-R1 distills, Qwen3, gpt-oss, the o-series through compatible
servers) think before they answer, in one of three ways: a `<think>...</think>` block that
opens the content; a field of its own (`reasoning_content`) beside the answer; or that field
alone, the answer at its end and the content empty. The reasoning is never taken for the
answer; a reply cut off while still reasoning has no answer at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_THINK = re.compile(r"\s*<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.S | re.I)
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


@dataclass(frozen=True)
class Split:
    """A reply's answer text ("" when it holds none) and what the model reasoned ("" when nothing)."""

    answer: str
    reasoning: str


def split(content: str | None, reasoning: str | None = None) -> Split:
    """The answer and the reasoning of a reply whose message has `content` and, from some
    servers, a `reasoning` field. With no answer in the content, the JSON object that ends
    the reasoning is the answer (a server that puts everything there)."""
    text, thought = content or "", reasoning or ""
    opened = _THINK.match(text)
    if opened:
        thought = "\n".join(t for t in (thought, opened.group(2).strip()) if t)
        text = text[opened.end() :]
    if not text.strip() and thought:
        text = last_json(thought)
    return Split(text.strip(), thought)


def last_json(text: str) -> str:
    """The last JSON object written whole in `text` (objects inside it are part of it), or ""."""
    decoder = json.JSONDecoder()
    found, at = "", text.find("{")
    while at >= 0:
        try:
            _, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        found, at = text[at:end], text.find("{", end)
    return found


def escape_controls(text: str) -> str | None:
    """`text` with the raw control characters inside its JSON strings escaped (a raw newline
    becomes `\\n`), or None when there are none. A grammar that lets a newline into a string
    makes JSON that strict parsers refuse ("Invalid control character"); nothing else about
    it is wrong, so it is mended rather than asked again."""
    out: list[str] = []
    inside = escaped = changed = False
    for ch in text:
        if inside and not escaped and ch < " ":
            out.append(_ESCAPES.get(ch, f"\\u{ord(ch):04x}"))
            changed = True
            continue
        if inside and escaped:
            escaped = False
        elif inside and ch == "\\":
            escaped = True
        elif ch == '"':
            inside = not inside
        out.append(ch)
    return "".join(out) if changed else None
