"""Prompt templates as data: one YAML file per request kind in `templates/`, holding a
version, the fixed instructions (system), the request's named fields (user), the JSON
schema of the answer, one example answer and the answer class it parses into. The parser
lives here too.

Rendering is generic: each `{field}` of a template is the request's field (or property) of
that name; `{field:clock}` shows a minute of the day as `HH:MM`. A list is rendered one
item a line, by the template's `lines:` format for the field (`"- [{0}] {1}"`: the item's
parts by position, `{i}` its index) or else as `[i] a | b`; an empty field is `(none)`, or
the template's `empty:` text for it. The fixed part comes first so a provider can cache it.
Where the server does not hold the model to the schema, the schema ends the prompt, and in
`prompt` mode an example answer too. A request with a frame (`requests.Frame`) is laid out by
the template's `frames:` for its style. With `echo=True` a last line `REQUEST_JSON: {...}` carries the request's
canonical JSON (the test server answers from it).
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any

import yaml

from smallville.brain import requests as rq
from smallville.brain.contract import loosened
from smallville.brain.kinds import REQUEST_KINDS, from_model, narrowed, to_model_json  # noqa: F401 (re-exported)
from smallville.brain.text import plain
from smallville.errors import AnswerError  # noqa: F401 (re-exported: brain/llm.py imports it from here)
from smallville.timefmt import clock_of_day

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
CANNED_WORDS = 3
ECHO_MARK = "REQUEST_JSON: "
FRAME_FIELDS = ("others",)  # a template's fields its request's frame holds


@dataclass(frozen=True)
class Template:
    kind: str
    version: int
    answer: str  # the answer message kind, e.g. "importance"
    system: str
    user: str
    schema: dict
    items: dict  # list field of the answer -> kind of its items
    max_tokens: int | dict = 600  # the answer's room: N, or {base: N, each: M, of: FIELD}
    temperature: float = 0.0
    lines: dict = field(default_factory=dict)  # request field -> the format of one of its items
    empty: dict = field(default_factory=dict)  # request field -> what an empty one reads as
    example: dict | None = None  # one answer of the right form (not for any request)
    frames: dict = field(default_factory=dict)  # a frame's style -> its layout: user, lines, empty

    def max_tokens_for(self, request: rq.Message) -> int:
        """The completion tokens the largest valid answer to `request` needs: the template's
        number, or its base plus so many per item of the answer's field `of`, as many as the
        request's schema allows at most (its `maxItems`, or its required keys: a rating
        batch grows with its memories, a plan with the hours it covers)."""
        if isinstance(self.max_tokens, int):
            return self.max_tokens
        prop = self.schema_for(request)["properties"][self.max_tokens["of"]]
        size = prop.get("maxItems", len(prop.get("required", ())))
        return int(self.max_tokens["base"]) + int(self.max_tokens["each"]) * size

    def render(self, request: rq.Message, structured: str = "json_schema", echo: bool = False) -> list[dict]:
        """Chat messages asking `request`. Unless the server enforces the schema
        (`json_schema`), the request's schema ends the prompt, and where nothing holds the
        model to it (`prompt`) an example answer too (a grammar already does: SmolLM2 under
        one copied the example nearly every time); the fixed part comes first."""
        user = _FORMAT.vformat(*self._layout(request))
        if structured != "json_schema":
            user += "\n\nAnswer with one JSON object, and nothing else, that follows this JSON schema:\n" + json.dumps(
                self.schema_for(request), separators=(",", ":")
            )
        if structured == "prompt" and self.example is not None:
            user += "\nAn answer of that form (its values are only an example, not for this request):\n" + json.dumps(
                self.example, separators=(",", ":"), ensure_ascii=False
            )
        if echo:
            user += (
                "\n"
                + ECHO_MARK
                + json.dumps(request.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            )
        return [{"role": "system", "content": self.system.strip()}, {"role": "user", "content": user}]

    def _layout(self, request: rq.Message) -> tuple[str, tuple, _Values]:
        """The user message's format and its values: the template's own, or its layout for
        the request's frame (`frames:`, seed 003's `four_part`), whose `lines` and `empty`
        go over the template's."""
        frame = rq.frame_of(request)
        if frame is None:
            return self.user.strip(), (), _Values(request, frame, self.lines, self.empty)
        layout = self.frames[frame.style]
        lines = {**self.lines, **(layout.get("lines") or {})}
        empty = {**self.empty, **(layout.get("empty") or {})}
        return layout["user"].strip(), (), _Values(request, frame, lines, empty)

    def schema_for(self, request: rq.Message) -> dict:
        """The schema of `request`'s answer: the contract (see `contract.py`)."""
        return narrowed(self.schema, request)

    @cached_property
    def _validator_class(self):
        """The schema's validator class, the template's schema checked once."""
        import jsonschema  # lazy: a dependency of litellm, only needed on the LLM path

        cls = jsonschema.validators.validator_for(self.schema)
        cls.check_schema(self.schema)
        return cls

    def response_format(self, structured: str, request: rq.Message) -> dict | None:
        """What asks the server for the answer's structure: the request's schema, in
        OpenAI's `json_schema` form, or as `json_object` with the schema beside it (what
        llama.cpp's server and others turn into a grammar); nothing in `prompt` mode."""
        schema = self.schema_for(request)
        if structured == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": self.kind, "schema": schema, "strict": True}}
        if structured == "json_object":
            return {"type": "json_object", "schema": schema}
        return None

    def parse(self, request: rq.Message, reply: str | None) -> rq.Message:
        """The answer in a model's reply, checked against the request's schema and nothing
        else (what the schema cannot say is repaired later, never refused)."""
        data = from_model(request, self.check(request, reply))
        data = {k: ([{"kind": self.items[k], **item} for item in v] if k in self.items else v) for k, v in data.items()}
        try:
            return rq.Message.registry[self.answer].from_dict(data)
        except (TypeError, ValueError) as exc:
            raise AnswerError("schema", str(exc)) from None

    def check(self, request: rq.Message, reply: str | None) -> dict:
        """The JSON object in a reply, valid against the request's schema, or `AnswerError`."""
        return check_reply(loosened(self.schema_for(request)), reply, self._validator_class)

    def canned(self) -> frozenset[str]:
        """The template's own words a model may copy into an answer instead of answering
        (SmolLM2 wrote the activity "what the character does"): each description in the
        schema, the example inside it, and the example answer's texts, normalised
        (`text.plain`); only those of `CANNED_WORDS` words or more, so that a short answer a
        model may well give on its own ("sleeping", a tag's name) is never taken for a copy."""
        found: set[str] = set()
        _canned(self.schema, found)
        _canned(self.example, found)
        return frozenset(p for p in map(plain, found) if len(p.split()) >= CANNED_WORDS)


class _Values:
    """A request's fields and properties as a template shows them (see the module's doc);
    `others` is its frame's."""

    def __init__(self, request: rq.Message, frame: rq.Frame | None, lines: dict, empty: dict) -> None:
        self.request, self.frame, self.lines, self.empty = request, frame, lines, empty

    def __getitem__(self, name: str) -> Any:
        value = getattr(self.frame if name in FRAME_FIELDS else self.request, name)
        if value == "" or value == ():
            empty = self.empty.get(name)
            return _FORMAT.vformat(empty, (), self) if empty is not None else "(none)"
        if isinstance(value, tuple):
            return _lines(value, self.lines.get(name))
        return value


class _Formatter(string.Formatter):
    """`str.format` with one more spec: `{minute:clock}` is that minute of the day, `HH:MM`."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "clock":
            return clock_of_day(int(value))
        return super().format_field(value, format_spec)


_FORMAT = _Formatter()


def _lines(items: tuple, line: str | None) -> str:
    """A list field, one item a line: by `line` (a format of the item's parts), or `[i] a | b`."""
    if line is None:
        return _text(items)
    return "\n".join(
        _FORMAT.format(line, *(item if isinstance(item, tuple) else (item,)), i=i) for i, item in enumerate(items)
    )


def _canned(value: Any, found: set[str]) -> None:
    """Collect the descriptions of a schema (and their examples: "what X does, e.g. 'Y'"),
    or the strings of an example answer, into `found`."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "description" and isinstance(item, str):
                found.add(item)
                found.update(re.split(r",? e\.g\.,? ", item))
                found.update(re.findall(r"'([^']+)'", item))
            else:
                _canned(item, found)
    elif isinstance(value, list):
        for item in value:
            _canned(item, found)
    elif isinstance(value, str):
        found.add(value)


def check_reply(schema: dict, reply: str | None, validator_class=None) -> dict:
    """The JSON object in a reply, valid against `schema`, or `AnswerError` saying where
    it is not. `validator_class` is the schema's, if already known."""
    import jsonschema  # lazy: a dependency of litellm, only needed on the LLM path

    data = _json_in(reply or "")
    cls = validator_class or jsonschema.validators.validator_for(schema)
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "answer"
        message = f"{where}: {error.message}"
        if len(message) > 200:
            message = f"{where}: does not meet the schema's {error.validator!r}"
        raise AnswerError("schema", message)
    return data


def load_templates() -> dict[str, Template]:
    """Every template shipped in `smallville/brain/templates`, by request kind."""
    out: dict[str, Template] = {}
    for entry in sorted(resources.files("smallville.brain").joinpath("templates").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            data = yaml.safe_load(entry.read_text(encoding="utf-8"))
            out[data["kind"]] = Template(
                data["kind"],
                int(data["version"]),
                data["answer"],
                data["system"],
                data["user"],
                data["schema"],
                dict(data.get("items") or {}),
                data.get("max_tokens", 600),
                float(data.get("temperature", 0.0)),
                dict(data.get("lines") or {}),
                dict(data.get("empty") or {}),
                data.get("example"),
                dict(data.get("frames") or {}),
            )
    missing = set(REQUEST_KINDS) - set(out)
    if missing:
        raise RuntimeError(f"no prompt template for {sorted(missing)}")
    return out


def _text(value: Any) -> str:
    """A request field as prompt text: lists one item a line, `[i] a | b | c`."""
    if isinstance(value, tuple):
        if not value:
            return "(none)"
        return "\n".join(
            f"[{i}] " + (" | ".join(map(str, v)) if isinstance(v, tuple) else str(v)) for i, v in enumerate(value)
        )
    return "(none)" if value == "" else str(value)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _json_in(reply: str) -> dict:
    """The JSON object in a reply, fenced or bare, with any chatter around it ignored."""
    text = reply.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    start = text.find("{")
    if start < 0:
        raise AnswerError("bad_json", f"no JSON object in the reply {reply[:60]!r}")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise AnswerError("bad_json", f"invalid JSON ({exc.msg} at char {exc.pos}) in {reply[:60]!r}") from None
    if not isinstance(data, dict):
        raise AnswerError("schema", "the reply's JSON is not an object")
    return data
