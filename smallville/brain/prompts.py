"""Prompt templates as data: one YAML file per request kind in `templates/`, holding a
version, the fixed instructions (system), the request's named fields (user), the JSON
schema of the answer and the answer class it parses into. The parser lives here too.

Rendering is generic: each `{field}` of a template is the request's field of that name, a
list rendered one item a line as `[i] a | b`. The fixed part comes first so a provider
can cache it. With `echo=True` a last line `REQUEST_JSON: {...}` carries the request's
canonical JSON (the test server answers from it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from functools import cached_property
from importlib import resources
from typing import Any

import yaml

from smallville.brain import requests as rq

STRUCTURED_MODES = ("json_schema", "json_object", "prompt")
ECHO_MARK = "REQUEST_JSON: "


class AnswerError(ValueError):
    """A model's reply is not a valid answer: `reason` is `bad_json` or `schema`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Template:
    kind: str
    version: int
    answer: str                      # the answer message kind, e.g. "importance"
    system: str
    user: str
    schema: dict
    items: dict                      # list field of the answer -> kind of its items
    one_per: dict = None             # list field of the answer -> the request's list it has one item per

    def render(self, request: rq.Message, structured: str = "json_schema", echo: bool = False) -> list[dict]:
        """Chat messages asking `request`; the schema goes in the prompt unless the
        server enforces it (`json_schema`)."""
        values = {f.name: _text(getattr(request, f.name)) for f in fields(request)}
        system = self.system.strip()
        if structured != "json_schema":
            system += ("\nAnswer with one JSON object, and nothing else, that follows this JSON schema:\n"
                       + json.dumps(self.schema, separators=(",", ":")))
        user = self.user.strip().format_map(values)
        if echo:
            user += "\n" + ECHO_MARK + json.dumps(request.to_dict(), sort_keys=True, separators=(",", ":"),
                                                 ensure_ascii=False)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    @cached_property
    def _validator(self) -> _Validator:
        """The schema, compiled once per template (stored beside the frozen fields)."""
        return _Validator(self.schema)

    def response_format(self, structured: str, request: rq.Message | None = None) -> dict | None:
        """What asks the server for the answer's structure. In `json_object` mode, given
        the request, an answer list with one item per item of a request list (`one_per`)
        gets that exact length, so that a grammar-constrained server (llama.cpp) cannot
        answer with too few or too many. `json_schema` keeps to the subset that strict
        providers accept (no length constraints)."""
        schema = self.schema
        if request is not None and self.one_per and structured == "json_object":
            schema = json.loads(json.dumps(schema))
            for answer_list, request_list in self.one_per.items():
                n = len(getattr(request, request_list))
                schema["properties"][answer_list].update(minItems=n, maxItems=n)
        if structured == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": self.kind, "schema": schema, "strict": True}}
        if structured == "json_object":
            return {"type": "json_object", "schema": schema}
        return None

    def parse(self, request: rq.Message, reply: str | None) -> rq.Message:
        """The answer in a model's reply, validated against the schema, the answer class
        and the request (one score per text)."""
        data = _json_in(reply or "")
        error = self._validator.best_error(data)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "answer"
            raise AnswerError("schema", f"{where}: {error.message}"[:200])
        data = {k: ([{"kind": self.items[k], **item} for item in v] if k in self.items else v)
                for k, v in data.items()}
        try:
            answer = rq.Message.registry[self.answer].from_dict(data)
        except (TypeError, ValueError) as exc:
            raise AnswerError("schema", str(exc)[:200]) from None
        if isinstance(request, rq.RateImportance) and len(answer.scores) != len(request.texts):
            raise AnswerError("schema", f"{len(answer.scores)} scores for {len(request.texts)} memories")
        return answer


class _Validator:
    """A template's schema, checked once and compiled (validating a reply against a raw
    schema re-checks the schema itself every time, which cost more than the rest)."""

    def __init__(self, schema: dict) -> None:
        import jsonschema  # lazy: a dependency of litellm, only needed on the LLM path

        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        self._validator = cls(schema)
        self._best = jsonschema.exceptions.best_match

    def best_error(self, data: Any):
        return self._best(self._validator.iter_errors(data))


def to_model_json(answer: rq.Message) -> dict:
    """An answer as a model following the template's schema would write it."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "kind"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(answer.to_dict())


def load_templates() -> dict[str, Template]:
    """Every template shipped in `smallville/brain/templates`, by request kind."""
    out: dict[str, Template] = {}
    for entry in sorted(resources.files("smallville.brain").joinpath("templates").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            data = yaml.safe_load(entry.read_text(encoding="utf-8"))
            out[data["kind"]] = Template(data["kind"], int(data["version"]), data["answer"], data["system"],
                                         data["user"], data["schema"], dict(data.get("items") or {}),
                                         dict(data.get("one_per") or {}))
    missing = set(rq.REQUEST_KINDS) - set(out)
    if missing:
        raise RuntimeError(f"no prompt template for {sorted(missing)}")
    return out


def _text(value: Any) -> str:
    """A request field as prompt text: lists one item a line, `[i] a | b | c`."""
    if isinstance(value, tuple):
        if not value:
            return "(none)"
        return "\n".join(f"[{i}] " + (" | ".join(map(str, v)) if isinstance(v, tuple) else str(v))
                         for i, v in enumerate(value))
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
