"""A run says how well the model served it: by request kind, the answers valid as given,
repaired, fallen back and cut at max_tokens, in the manifest and at the end of the run, with
one line when a kind's fallbacks pass 5%; and day plans cut at max_tokens stop a town's run
early though its first requests are ratings."""

from __future__ import annotations

import json

import pytest
from test_llm_setup import clean_env, only_run, smallville

from smallville.brain import LLMConfig
from smallville.brain.wrappers import ModelUnusable
from smallville.render import poorly_served
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, THE_VILLE
from llmserver import LLMServer


def test_the_manifest_and_the_summary_say_how_each_kind_was_served(tmp_path):
    (tmp_path / "brain.yaml").write_text("backoff: 0\n")
    with LLMServer(seed=1) as server:  # random valid answers: plans and breakdowns need repairs
        server.fail("schema", 9, match="Usual routine")  # every try of the three day plans
        result = smallville(
            "run",
            CAFE_TRIO,
            "--for",
            "2h",
            "--brain",
            "openai/local",
            "--api-base",
            server.api_base,
            "--brain-config",
            tmp_path / "brain.yaml",
            "--embedder",
            "lexical",
            "--runs-dir",
            tmp_path / "runs",
            env=clean_env(),
        )
    assert result.returncode == 0, result.stderr
    m = only_run(tmp_path / "runs")
    answers = m["answers"]
    assert answers["plan_day"]["fallbacks"] == 3 == answers["plan_day"]["requests"]
    for kind, row in answers.items():
        assert row["valid"] + row["repaired"] + row["fallbacks"] + row["over_ceiling"] == row["requests"]
        assert row["requests"] == m["requests"][kind] and row["cut"] == m["usage"]["by_kind"][kind]["cut"] == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    log = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    repairs = [e["data"]["kind"] for e in log if e["kind"] == "brain_repair"]
    assert answers["decompose"]["repaired"] == repairs.count("decompose") > 0  # (none of them fell back)
    line = (
        "the model's answers fell back to safe defaults for plan_day 3 of 3 (100%); the brain_fallback events say why"
    )
    assert line in result.stderr.splitlines()
    assert "answers" in result.stderr and "repaired" in result.stderr  # the table


def test_cut_day_plans_are_counted_and_the_setting_to_raise_is_named(tmp_path):
    with LLMServer(modes={"capable"}) as server:
        config = LLMConfig(
            model="openai/test-model",
            api_base=server.api_base,
            backoff=0.0,
            echo_request=True,
            kinds={"plan_day": {"max_tokens": 300}},
        )
        result = run_scenario(
            load_scenario(CAFE_TRIO), runs_dir=tmp_path, duration=3600, brain=config, embedder="lexical"
        )
    plan = result.manifest.answers["plan_day"]
    assert (plan["requests"], plan["fallbacks"], plan["cut"]) == (3, 3, 9)  # each plan tried three times
    assert poorly_served(result.manifest).endswith(
        "plan_day 3 of 3 (100%); answers were cut off at max_tokens: raise kinds.plan_day.max_tokens"
    )
    assert poorly_served(result.manifest).count(" of ") == 1  # the other kinds were served


def test_day_plans_cut_at_max_tokens_stop_a_town_whose_first_requests_are_ratings(tmp_path):
    """A town's first 20 requests are its summaries and seed ratings: cut day plans hide
    among them unless each kind is watched on its own."""
    with LLMServer(modes={"capable"}) as server:
        config = LLMConfig(
            model="openai/test-model",
            api_base=server.api_base,
            retries=0,
            echo_request=True,
            kinds={"plan_day": {"max_tokens": 300}},
        )
        with pytest.raises(
            ModelUnusable,
            match=r"11 of the first 11 plan_day requests fell back with the same error "
            r"\(bad_json: .*\(cut off at max_tokens\)\); answers are cut off: raise "
            r"kinds\.plan_day\.max_tokens in the brain settings",
        ):
            run_scenario(load_scenario(THE_VILLE), runs_dir=tmp_path, duration=3600, brain=config, embedder="lexical")
    (run_dir,) = tmp_path.iterdir()
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "failed" and m["answers"]["summarize"]["valid"] == 25
