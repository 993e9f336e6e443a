"""Reasoning models and small models' slips, against the test server's modes: the reasoning
is split from the answer wherever the model puts it, counted as completion tokens, and given
room in max_tokens; a raw newline in a JSON string is escaped, not refused; and a 25-agent
hour against a capable reasoning model completes with every answer whole."""

from __future__ import annotations

import json
import os

import pytest

from smallville.brain import LLMConfig
from smallville.brain import requests as rq
from smallville.brain.answertext import escape_controls, last_json, split
from smallville.brain.base import Failed
from smallville.brain.llm import REASONING_TOKENS, LLMBrain
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import THE_VILLE
from llmserver import LLMServer

SPEAK = rq.Speak("ann", "Ann Lee", "bob", "Bob Ray", "a friendly neighbour", (), (), ())
DECOMPOSE = rq.Decompose("ann", "Ann Lee", "baking bread", "Bakery", 480, 540, ("oven", "counter"), ())


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def brain_for(server, **settings) -> LLMBrain:
    return LLMBrain(
        LLMConfig(**{"model": "openai/test-model", "api_base": server.api_base, "backoff": 0.0, **settings})
    )


def room_without_reasoning(server, request) -> int:
    """What the request's own template gives it, from a brain that sets no room for reasoning."""
    brain = brain_for(server, preflight=False, reasoning_tokens=0)
    try:
        return brain.max_tokens_for(request)
    finally:
        brain.close()


@pytest.mark.parametrize(
    "content, reasoning, answer, thought",
    [
        ('<think>\nA {b} c\n</think>\n\n{"a": 1}', None, '{"a": 1}', "A {b} c"),
        ('  \n<think>hmm</think>{"a": 1}', None, '{"a": 1}', "hmm"),  # text before the block
        ('<think>\nstill thinking {"a": 1', None, "", 'still thinking {"a": 1'),  # cut off while thinking
        ('{"a": 1}', "I should answer", '{"a": 1}', "I should answer"),  # reasoning_content beside
        (None, 'It is a {x} so {"a": {"b": 2}} is it.\n{"a": 3}', '{"a": 3}', None),  # the answer ends the reasoning
        ("\n\n", 'nothing whole here {"a": ', "", None),
        ('```json\n{"a": 1}\n```', None, '```json\n{"a": 1}\n```', ""),  # no reasoning: as it was
    ],
)
def test_the_answer_is_split_from_the_reasoning_wherever_the_model_puts_it(content, reasoning, answer, thought):
    found = split(content, reasoning)
    assert found.answer == answer
    assert found.reasoning == (reasoning if thought is None else thought)


def test_the_last_whole_json_object_of_a_text_is_found():
    assert last_json('a {"x": {"y": 1}} b {"z": [1, {"w": 2}]} c') == '{"z": [1, {"w": 2}]}'
    assert last_json("no object { here") == ""


def test_raw_control_characters_are_escaped_only_inside_strings():
    slipped = '{\n"text": "Hello\nthere\tyou",\n"n": 1}'
    mended = escape_controls(slipped)
    assert json.loads(mended) == {"text": "Hello\nthere\tyou", "n": 1}
    assert escape_controls('{\n  "a": "b \\" \\n c"\n}') is None  # valid already: nothing to do
    with pytest.raises(json.JSONDecodeError, match="Invalid control character"):
        json.loads(slipped)


@pytest.mark.parametrize("style", ["think", "field", "only"])
def test_each_way_a_model_reasons_is_read_and_counted_and_given_room(style):
    with LLMServer(modes={"capable", "reasoning"}, reasoning=style) as server:
        room = room_without_reasoning(server, SPEAK) + REASONING_TOKENS
        brain = brain_for(server, price_prompt=1e-6, price_completion=2e-6)
        try:
            brain.preflight()  # the probe sees reasoning and asks again
            assert (brain.reasoning, brain.reasoning_from) == (REASONING_TOKENS, "preflight")
            assert "reasoning_tokens" in brain.describe()["reasoning_check"]["note"]
            tried = brain.attempt(SPEAK)
        finally:
            brain.close()
    assert isinstance(tried.answer, rq.Utterance) and tried.answer.text
    assert not any(thought in tried.answer.text for thought in ("Let me", "schema", "Wait,"))  # never the answer
    assert server.bodies[-1]["max_tokens"] == tried.max_tokens == room
    usage = brain.ledger.to_dict()["by_kind"]["speak"]
    sent = server.usages[-1]
    assert usage["reasoning_tokens"] == sent["completion_tokens_details"]["reasoning_tokens"] > 150
    assert usage["completion_tokens"] == sent["completion_tokens"] > usage["reasoning_tokens"]
    assert usage["cost"] == pytest.approx(sent["prompt_tokens"] * 1e-6 + sent["completion_tokens"] * 2e-6)
    preflight = brain.ledger.to_dict()["by_kind"]["preflight"]
    assert preflight["calls"] == 2 and preflight["cut"] == 1  # cut off reasoning, then with room


def test_room_for_reasoning_comes_from_the_setting_or_litellms_mark():
    with LLMServer() as server:
        plain = {request: room_without_reasoning(server, request) for request in (DECOMPOSE, SPEAK)}
        assert plain[DECOMPOSE] > plain[SPEAK] > 0  # each kind's own room
        for settings, room, source in [
            ({"model": "openai/o3-mini"}, REASONING_TOKENS, "litellm"),
            ({"model": "openai/gpt-4o-mini"}, 0, "none"),
            ({"reasoning_tokens": 500}, 500, "setting"),
            ({"model": "openai/o3-mini", "reasoning_tokens": 0}, 0, "setting"),
        ]:
            brain = brain_for(server, preflight=False, **settings)
            try:
                assert (brain.reasoning, brain.reasoning_from) == (room, source), settings
                assert brain.max_tokens_for(DECOMPOSE) == plain[DECOMPOSE] + room
            finally:
                brain.close()
        brain = brain_for(server, preflight=False, reasoning_tokens=500, kinds={"decompose": {"reasoning_tokens": 0}})
        try:
            assert brain.max_tokens_for(DECOMPOSE) == plain[DECOMPOSE]
            assert brain.max_tokens_for(SPEAK) == plain[SPEAK] + 500
        finally:
            brain.close()


def test_an_answer_cut_off_while_reasoning_names_the_room_for_reasoning():
    from smallville.brain.wrappers import fix_for

    with LLMServer(modes={"capable", "reasoning"}) as server:
        brain = brain_for(server, reasoning_tokens=0, kinds={"decompose": {"max_tokens": 200}})
        try:
            brain.preflight()
            tried = brain.attempt(DECOMPOSE)
        finally:
            brain.close()
    assert isinstance(tried.answer, Failed) and tried.answer.reason == "bad_json"
    assert "(cut off at max_tokens, 200 of 200 tokens on reasoning)" in tried.answer.error
    assert "raise reasoning_tokens" in fix_for(tried.answer, "decompose")
    assert brain.ledger.to_dict()["by_kind"]["decompose"]["cut"] == 1


def test_a_raw_newline_in_a_json_string_is_escaped_not_refused():
    """SmolLM2's grammar on llama.cpp let raw newlines into strings ("Invalid control
    character"): two of three day plans fell back. The text is all there: it is mended."""
    with LLMServer(modes={"capable"}) as server:
        server.raw_newlines = True
        brain = brain_for(server)
        try:
            brain.preflight()
            tried = [brain.attempt(r) for r in (SPEAK, DECOMPOSE)]
        finally:
            brain.close()
    assert all(not isinstance(t.answer, Failed) for t in tried)
    assert all(t.notes == ("raw control characters in JSON strings escaped",) for t in tried)
    assert "\n" in tried[0].answer.text and "\n" in tried[0].reply.content


@pytest.mark.parametrize(
    "modes",
    [
        ("capable", "reasoning"),
        ("strict", "capable", "reasoning"),
    ],
)
def test_a_25_agent_hour_against_a_capable_reasoning_model_gets_every_answer_whole(tmp_path, modes):
    """The_ville's first hour against a model that answers at a capable model's size after a
    few hundred tokens of reasoning, sent as OpenAI would take it: no refused schema, no
    fallback, no answer cut at max_tokens (the preflight's first probe aside: it finds the
    model reasoning and asks again with room for it)."""
    with LLMServer(modes=modes) as server:
        config = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, echo_request=True)
        result = run_scenario(
            load_scenario(THE_VILLE), runs_dir=tmp_path, duration=3600, brain=config, embedder="lexical"
        )
    m = result.manifest
    assert m.status == "completed" and not server.refusals
    assert m.brain["reasoning_check"]["from"] == "preflight" and m.usage["total"]["reasoning_tokens"] > 0
    assert m.usage["total"]["fallbacks"] == 0 and m.usage["total"]["cut"] == m.usage["by_kind"]["preflight"]["cut"]
    assert {"plan_day", "decompose", "speak", "rate_importance"} <= set(m.answers)
    for kind, row in m.answers.items():
        assert row["fallbacks"] == row["cut"] == row["over_ceiling"] == 0, kind
        assert row["valid"] + row["repaired"] == row["requests"] == m.requests[kind]
