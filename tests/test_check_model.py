"""`smallville check-model` as a user runs it before a paid run: the CLI in a subprocess with
no API key, against the test server in each of its modes, and against servers that refuse a
schema or cut day plans short (exit 1, naming the kind and the setting that mends it)."""

from __future__ import annotations

import json

import pytest
from test_llm_setup import smallville

from smallville.brain.prompts import load_templates

from conftest import CAFE_TRIO
from llmserver import LLMServer

KINDS = {
    "after_talk",
    "decompose",
    "insights",
    "plan_day",
    "rate_importance",
    "react",
    "reflect_questions",
    "speak",
    "summarize",
    "interview",
    "judge",
}


def check(server, tmp_path, *more, settings: str | None = None, as_json: bool = False):
    """check-model on a moment of cafe_trio: its exit code and its output (JSON, or the table)."""
    args = [
        "check-model",
        "openai/local",
        "--api-base",
        server.api_base,
        "--scenario",
        CAFE_TRIO,
        "--embedder",
        "lexical",
        *more,
        *(["--json"] if as_json else []),
    ]
    if settings is not None:
        (tmp_path / "brain.yaml").write_text(settings)
        args += ["--brain-config", tmp_path / "brain.yaml"]
    result = smallville(*args)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout) if as_json else result.stdout


def rows(data: dict) -> dict:
    return {row["kind"]: row for row in data["kinds"]}


def cells(out: str, kind: str) -> list[str]:
    """The table's row of `kind`: request, result, prompt, completion and max tokens, ..."""
    (line,) = [x for x in out.splitlines() if x.startswith(f"│ {kind} ")]
    return [cell.strip() for cell in line.split("│")[1:-1]]


@pytest.mark.parametrize(
    "modes, reasoning", [((), "think"), (("capable",), "think"), (("capable", "reasoning"), "only")]
)
def test_every_kind_comes_back_usable_from_a_server_that_serves(tmp_path, modes, reasoning):
    with LLMServer(seed=1, modes=modes, reasoning=reasoning) as server:
        code, data = check(server, tmp_path, as_json=True)
        asked = [p["kind"] for p in server.prompts if p["kind"] != "probe"]
    assert code == 0 and data["ok"], data
    found = rows(data)
    assert set(found) == KINDS and sorted(asked) == sorted(KINDS)  # each kind sent once, no retry
    assert all(row["result"] in ("valid", "repaired") for row in found.values())
    assert all(row["prompt_tokens"] > 0 and 0 < row["completion_tokens"] <= row["max_tokens"] for row in found.values())
    assert all(row["seconds"] > 0 for row in found.values())
    assert data["day"]["requests"] > 100 and data["day"]["cost_usd"] is None  # no price known for a local model
    if "capable" in modes:
        assert found["plan_day"]["completion_tokens"] > 500  # a whole day, at a capable model's size
    if "reasoning" in modes:
        assert all(row["reasoning_tokens"] > 100 for row in found.values())
        assert any(note.startswith("reasoning: the model reasons") for note in data["notes"])
        assert found["speak"]["max_tokens"] == load_templates()["speak"].max_tokens + 2048


def test_a_strict_provider_takes_every_kinds_schema(tmp_path):
    with LLMServer(seed=1, modes={"strict", "capable"}) as server:
        code, out = check(server, tmp_path)
    assert code == 0, out


def test_a_schema_the_provider_refuses_is_named_with_the_setting_that_mends_it(tmp_path):
    with LLMServer(seed=1, modes={"strict", "capable"}) as server:
        server.max_enum = (
            20  # a provider of a lower limit: a seed rating's 3 memories x 10 scores pass it, no other kind
        )
        code, out = check(server, tmp_path)
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("rate_importance: "))
    assert line.startswith("rate_importance: json_schema refused (") and line.endswith("set structured: json_object")
    assert "Expected at most 20 enum values in total" in line
    assert cells(out, "rate_importance")[1] == "refused" and cells(out, "plan_day")[1] in ("valid", "repaired")
    assert "request kinds are not usable" in out.splitlines()[-1]


def test_day_plans_cut_at_max_tokens_are_named_with_the_setting_to_raise(tmp_path):
    with LLMServer(seed=1, modes={"capable"}) as server:
        code, out = check(server, tmp_path, settings="kinds: {plan_day: {max_tokens: 300}}\n")
    assert code == 1
    lines = out.splitlines()
    assert cells(out, "plan_day")[1:2] + cells(out, "plan_day")[3:5] == ["cut", "300", "300"]
    assert "plan_day: cut at max_tokens 300: raise kinds.plan_day.max_tokens" in lines
    assert lines[-1].startswith("1 of 11 request kinds are not usable")


def test_a_reasoning_model_without_room_to_reason_is_told_to_give_it_some(tmp_path):
    with LLMServer(seed=1, modes={"capable", "reasoning"}) as server:
        code, data = check(server, tmp_path, settings="reasoning_tokens: 0\n", as_json=True)
    assert code == 1 and not data["ok"]
    cut = [row for row in data["kinds"] if row["result"] == "cut"]
    assert cut and all(row["completion_tokens"] == row["max_tokens"] for row in cut)
    mostly = [row for row in cut if 2 * row["reasoning_tokens"] >= row["completion_tokens"]]
    assert mostly and all(
        row["mend"] == f"cut at max_tokens {row['max_tokens']}: raise reasoning_tokens" for row in mostly
    )
    assert all(
        row["mend"] == f"cut at max_tokens {row['max_tokens']}: raise kinds.{row['kind']}.max_tokens"
        for row in cut
        if row not in mostly
    )


def test_the_model_may_come_from_the_settings_file_and_each_kind_is_reported_as_it_comes(tmp_path):
    with LLMServer(seed=1) as server:
        (tmp_path / "brain.yaml").write_text(f"model: openai/local\napi_base: {server.api_base}\n")
        result = smallville(
            "check-model",
            "--brain-config",
            tmp_path / "brain.yaml",
            "--scenario",
            CAFE_TRIO,
            "--embedder",
            "lexical",
            "--json",
        )
    assert result.returncode == 0 and json.loads(result.stdout)["model"] == "openai/local", result.stderr
    answered = [line.split(":")[0].strip() for line in result.stderr.splitlines() if "answered after" in line]
    assert sorted(answered) == sorted(KINDS)  # a line as each kind comes back, before the table
    bare = smallville("check-model", "--scenario", CAFE_TRIO)
    assert bare.returncode == 2 and "check-model needs a model" in bare.stderr and "Traceback" not in bare.stderr


def test_a_kind_that_times_out_among_the_others_is_sent_alone_and_the_calls_in_flight_to_start_at_are_named(tmp_path):
    """A local server answering one call at a time queues what check-model sends at once: a
    kind with no answer in time is sent again alone, and its row says what the model does
    then; a note names the max_concurrency the server kept up with."""
    with LLMServer(seed=1) as server:
        server.fail("hang", 1, match="Their last conversation:")  # speak, the first time only
        server.fail("hang", 1, match="Memories on their core characteristics")  # summarize
        code, data = check(server, tmp_path, settings="timeout: 1\n", as_json=True)
        asked = sorted(p["kind"] for p in server.prompts if p["kind"] != "probe")
    assert code == 0 and data["ok"], data
    assert asked == sorted([*KINDS, "speak", "summarize"])  # the two, and only they, sent again
    found = rows(data)
    for kind in ("speak", "summarize"):
        assert found[kind]["result"] in ("valid", "repaired")
        assert found[kind]["note"].startswith("sent alone after no answer in time among 11")
    (note,) = [n for n in data["notes"] if n.startswith("the server answered")]
    assert note.startswith("the server answered 9 of 11 requests sent at once within the timeout (1 s)")
    assert note.endswith("set max_concurrency: 9 in the brain settings to keep up with it from the start")


def test_a_kind_with_no_answer_even_alone_is_told_to_raise_the_timeout(tmp_path):
    with LLMServer(seed=1) as server:
        server.fail("hang", 2, match="The answers \\(label")  # the judge, at once and alone
        code, out = check(server, tmp_path, settings="timeout: 1\n")
    assert code == 1
    assert cells(out, "judge")[1] == "no answer"
    assert "judge: no answer within 1 s, sent alone: raise timeout (a slow model or server)" in out.splitlines()
    assert out.splitlines()[-1].startswith("1 of 11 request kinds are not usable")
