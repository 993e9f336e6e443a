"""The test server behaves as the providers users have do (tests/llmserver.py's modes): a
strict provider refuses a schema outside OpenAI's strict subset, a capable model answers at
its size and is cut at max_tokens, a reasoning model reasons first. These are the server's
own tests; what the brain makes of it is in test_reasoning.py and test_check_model.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import jsonschema
import pytest

from smallville.brain import requests as rq
from smallville.brain.prompts import load_templates

from conftest import CAFE_TRIO
from llmserver import LLMServer
from strictschema import problem

OBJ = {"type": "object", "additionalProperties": False}


def obj(**props) -> dict:
    return {**OBJ, "properties": props, "required": list(props)}


def nested(levels: int) -> dict:
    """Objects `levels` deep, the root included."""
    schema: dict = {"type": "string"}
    for level in range(levels):
        schema = obj(**{f"p{level}": schema})
    return schema


def post(server, body: dict) -> tuple[int, dict]:
    """One chat completion, as raw JSON: what a provider's client gets."""
    request = urllib.request.Request(
        server.api_base + "/chat/completions",
        json.dumps({"model": "gpt-4o-mini", **body}).encode(),
        {"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def strict(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@pytest.fixture(scope="module")
def moment():
    """A request of every kind from a real moment of cafe_trio, as check-model builds it."""
    from smallville.checkmodel import moment
    from smallville.scenario import load_scenario

    scenario = load_scenario(CAFE_TRIO)
    asked, missing = moment(scenario, scenario.seed, "lexical")
    assert not missing
    return {request.kind: request for request, _ in asked}


def narrowed(request: rq.Message) -> dict:
    return load_templates()[request.kind].schema_for(request)


BIG = [f"place number {i} " + "x" * 60 for i in range(251)]
REFUSED = {
    "no additionalProperties": (
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        "In context=(), 'additionalProperties' is required to be supplied and to be false.",
    ),
    "optional field": (
        {**OBJ, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]},
        "'required' is required to be supplied and to be an array including every key in properties. Missing 'b'.",
    ),
    "stray keyword": (
        obj(who={"type": ["string", "null"], "description": "a name", "or null": None}),
        "In context=('properties', 'who'), 'or null' is not permitted.",
    ),
    "allOf": (obj(a={"allOf": [{"type": "string"}]}), "'allOf' is not permitted."),
    "if": (obj(a={"type": "string", "if": {"const": "x"}}), "'if' is not permitted."),
    "not": (obj(a={"not": {"type": "string"}}), "'not' is not permitted."),
    "nested object": (
        obj(a=obj(b={"type": "integer"}) | {"additionalProperties": True}),
        "In context=('properties', 'a'), 'additionalProperties' is required",
    ),
    "array root": (
        {"type": "array", "items": {"type": "string"}},
        "schema must be a JSON Schema of 'type: \"object\"'",
    ),
    "eleven levels": (nested(11), "nested more than 10 levels"),
    "5,001 properties": (
        obj(**{f"p{i}": {"type": "integer"} for i in range(5001)}),
        "Expected at most 5000 object properties in total",
    ),
    "1,001 enum values": (
        obj(
            **{f"s{i}": {"type": "integer", "enum": list(range(1, 11))} for i in range(100)},
            extra={"type": "string", "enum": ["x"]},
        ),
        "Expected at most 1000 enum values in total within a single schema",
    ),
    "a long string enum": (obj(where={"type": "string", "enum": BIG}), "Expected at most 15000 characters"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_strict_refuses_each_schema_outside_the_subset_with_the_providers_message(case):
    schema, message = REFUSED[case]
    found = problem(schema, "probe")
    assert found is not None and found.startswith("Invalid schema for response_format 'probe': ") and message in found


def test_strict_takes_what_the_subset_allows():
    nullable = {"type": ["string", "null"], "enum": ["ann", None], "description": "whom"}
    bounded = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 3}
    assert (
        problem(obj(who=nullable, n=bounded, deep=obj(x={"anyOf": [{"type": "string"}, {"type": "null"}]})), "ok")
        is None
    )
    assert problem(obj(where={"type": "string", "enum": BIG[:250]}), "ok") is None  # 250 values: no length limit
    assert problem(nested(10), "ok") is None


def test_a_strict_server_answers_a_refused_schema_with_http_400_and_serves_the_rest():
    with LLMServer(modes={"strict"}) as server:
        status, body = post(
            server,
            {
                "messages": [{"role": "user", "content": "hi"}],
                "response_format": strict("react", REFUSED["stray keyword"][0]),
            },
        )
        assert status == 400
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == "response_format"
        assert "'or null' is not permitted" in body["error"]["message"] and server.refusals
        status, body = post(
            server,
            {
                "messages": [{"role": "user", "content": "hi"}],
                "response_format": strict("ok", obj(a={"type": "string"})),
            },
        )
        assert status == 200 and "a" in json.loads(body["choices"][0]["message"]["content"])
        lax = {"type": "json_schema", "json_schema": {"name": "x", "schema": REFUSED["allOf"][0], "strict": False}}
        assert post(server, {"messages": [{"role": "user", "content": "hi"}], "response_format": lax})[0] == 200


@pytest.mark.parametrize(
    "kind",
    [
        k
        for k in (
            "after_talk",
            "decompose",
            "insights",
            "interview",
            "judge",
            "plan_day",
            "rate_importance",
            "react",
            "reflect_questions",
            "speak",
            "summarize",
        )
    ],
)
def test_strict_takes_the_projects_narrowed_schema_of_each_kind(moment, kind):
    assert problem(narrowed(moment[kind]), kind) is None


def chat(server, request: rq.Message, max_tokens: int = 4000, echo: bool = True) -> dict:
    template = load_templates()[request.kind]
    messages = template.render(request, "json_schema", echo=echo)
    status, body = post(
        server,
        {
            "messages": messages,
            "max_tokens": max_tokens,
            "response_format": template.response_format("json_schema", request),
        },
    )
    assert status == 200, body
    return body


def words(text: str) -> int:
    return len(text.split())


def test_a_capable_model_answers_every_kind_at_its_size_and_within_its_schema(moment):
    with LLMServer(modes={"capable"}) as server:
        for _kind, request in moment.items():
            for echo in (True, False):  # from the request the prompt carries, or from the schema alone
                body = chat(server, request, echo=echo)
                answer = json.loads(body["choices"][0]["message"]["content"])
                jsonschema.validate(answer, narrowed(request))
                assert body["choices"][0]["finish_reason"] == "stop"
        plan = json.loads(chat(server, moment["plan_day"])["choices"][0]["message"]["content"])
        blocks = plan["blocks"]
        assert blocks[0]["start"] >= moment["plan_day"].start and 5 <= len(plan["broad"]) <= 8
        assert all(a["end"] == b["start"] for a, b in zip(blocks, blocks[1:]))  # the whole day, no gaps
        assert blocks[-1]["end"] - blocks[0]["start"] >= 20 * 60 and len(blocks) >= 15
        assert all(b["end"] - b["start"] <= 60 for b in blocks if "sleep" not in b["activity"])
        assert all(6 <= words(b["activity"]) <= 15 for b in blocks)
        line = json.loads(chat(server, moment["speak"])["choices"][0]["message"]["content"])["text"]
        assert 1 <= line.count(".") + line.count("?") + line.count("!") <= 4 and words(line) >= 8
        notes = json.loads(chat(server, moment["after_talk"])["choices"][0]["message"]["content"])
        assert all(words(notes[k]) >= 8 for k in ("summary", "thought", "memo", "view"))
        assert chat(server, moment["plan_day"]) == chat(server, moment["plan_day"])  # the same prompt, the same


def test_a_capable_answer_is_cut_at_max_tokens_as_a_model_is(moment):
    import litellm

    with LLMServer(modes={"capable"}) as server:
        whole = chat(server, moment["plan_day"])
        assert (
            whole["usage"]["completion_tokens"]
            == len(litellm.encode(model="gpt-4o-mini", text=whole["choices"][0]["message"]["content"]))
            > 500
        )  # a real tokenizer's count
        cut = chat(server, moment["plan_day"], max_tokens=300)
        assert cut["choices"][0]["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 300
        content = cut["choices"][0]["message"]["content"]
        assert whole["choices"][0]["message"]["content"].startswith(content)
        with pytest.raises(json.JSONDecodeError):
            json.loads(content)


@pytest.mark.parametrize("style", ["think", "field", "only"])
def test_a_reasoning_model_reasons_first_and_its_reasoning_counts(moment, style):
    with LLMServer(modes={"capable", "reasoning"}, reasoning=style) as server:
        body = chat(server, moment["speak"])
        message, usage = body["choices"][0]["message"], body["usage"]
        reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
        assert 150 <= reasoning < usage["completion_tokens"] and body["choices"][0]["finish_reason"] == "stop"
        if style == "think":
            thought, _, answer = message["content"].partition("</think>")
            assert thought.startswith("<think>") and "text" in json.loads(answer)
        elif style == "field":
            assert message["reasoning_content"] and "text" in json.loads(message["content"])
        else:
            assert message["content"] is None and message["reasoning_content"].rstrip().endswith("}")
        starved = chat(server, moment["speak"], max_tokens=100)  # reasoning counts against max_tokens
        message = starved["choices"][0]["message"]
        assert starved["choices"][0]["finish_reason"] == "length" and starved["usage"]["completion_tokens"] == 100
        if style == "think":  # cut off still thinking: no answer
            assert message["content"].startswith("<think>") and "</think>" not in message["content"]
        else:
            assert message["content"] is None and not message["reasoning_content"].rstrip().endswith("}")


def test_an_echoed_request_is_answered_as_the_offline_brain_would_at_a_capable_models_size(moment):
    """With the request in the prompt (benchmarks' `echo_request`), a capable answer keeps
    the offline brain's choices: the town goes on as it would, only in more words."""
    from smallville.brain.offline import OfflineBrain
    from smallville.brain.prompts import to_model_json

    request = moment["react"]
    with LLMServer(modes={"capable"}, seed=3) as server:
        offline = to_model_json(OfflineBrain(3).answer([request])[0])
        answer = json.loads(chat(server, request)["choices"][0]["message"]["content"])
    props = narrowed(request)["properties"]
    free = [k for k, v in props.items() if v.get("type") == "string" and "enum" not in v]
    assert free and {k: v for k, v in answer.items() if k not in free} == {
        k: v for k, v in offline.items() if k not in free
    }
    for key in free:  # the offline brain's words, and more
        assert answer[key].startswith(offline[key].rstrip(".")) and words(answer[key]) >= 12
