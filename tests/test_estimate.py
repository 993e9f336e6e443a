"""`smallville estimate`: the cost of a window worked out offline, checked against what the
same window really sends to the local test server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from smallville.brain import LLMConfig
from smallville.estimate import estimate
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT
from llmserver import LLMServer

CLI = [sys.executable, "-c", "from smallville.cli import main; raise SystemExit(main())"]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with LLMServer(seed=load_scenario(CAFE_TRIO).seed) as s:
        yield s


def settings(server=None, **more) -> LLMConfig:
    """The one place tests send `echo_request` prompts: the estimate assumes the offline
    brain's behaviour, so it is held to what a model that behaves as the offline brain
    would be sent, and only a server told the request can answer as the offline brain
    (the estimate renders the same prompts, REQUEST_JSON line included). Against models
    that act otherwise, see test_estimate_pilot.py."""
    return LLMConfig(
        model="openai/test-model",
        api_base=server.api_base if server else None,
        echo_request=True,
        preflight=False,
        **more,
    )


def test_the_estimate_of_a_window_lands_near_what_the_window_sends(tmp_path, server):
    scenario = load_scenario(CAFE_TRIO)
    est = estimate(scenario, settings(), duration=3 * 3600, embedder="lexical").to_dict()
    actual = run_scenario(
        scenario, runs_dir=tmp_path, duration=3 * 3600, brain=settings(server, lookahead=0), embedder="lexical"
    )
    sent_prompt = sum(u["prompt_tokens"] for u in server.usages)
    assert est["requests"] == pytest.approx(server.chats, rel=0.01)  # the README: within 1%
    assert est["prompt_tokens"] == pytest.approx(sent_prompt, rel=0.01)
    lo, hi = est["range"]["requests"]
    assert lo <= server.chats <= hi
    assert set(est["by_kind"]) == {k for k, v in actual.manifest.usage["by_kind"].items() if v["calls"]}
    # with the recorded run's completion sizes, completions are expected at its averages
    again = estimate(scenario, settings(), duration=3 * 3600, embedder="lexical", from_run=actual.path).to_dict()
    sent_completion = sum(u["completion_tokens"] for u in server.usages)
    assert again["completion_tokens"] == pytest.approx(sent_completion, rel=0.3)
    assert again["completion_from"].startswith("averages of")


def test_prices_come_from_the_settings_and_the_wall_time_from_latency(tmp_path):
    scenario = load_scenario(CAFE_TRIO)
    est = estimate(
        scenario,
        settings(price_prompt=1e-6, price_completion=4e-6),
        duration=3600,
        embedder="lexical",
        latency=1.5,
        concurrency=4,
    ).to_dict()
    assert est["cost_usd"] == pytest.approx(est["prompt_tokens"] * 1e-6 + est["completion_tokens"] * 4e-6)
    assert est["range"]["cost_usd"][0] < est["cost_usd"] < est["range"]["cost_usd"][1]
    assert est["rounds"] > 0 and est["wall_s"] >= est["rounds"] * 1.5
    unknown = estimate(scenario, settings(), duration=3600, embedder="lexical").to_dict()
    assert unknown["cost_usd"] is None and unknown["range"]["cost_usd"] is None


def test_the_command_line_prints_json_and_a_table(tmp_path):
    out = subprocess.run(
        CLI
        + [
            "estimate",
            str(CAFE_TRIO),
            "--brain",
            "openai/gpt-4o-mini",
            "--for",
            "1h",
            "--embedder",
            "lexical",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"requests", "prompt_tokens", "completion_tokens", "cost_usd", "by_kind"} <= set(data)
    assert data["cost_usd"] > 0 and data["requests"] == sum(r["requests"] for r in data["by_kind"].values())
    table = subprocess.run(
        CLI + ["estimate", str(CAFE_TRIO), "--brain", "openai/gpt-4o-mini", "--for", "1h", "--embedder", "lexical"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert table.returncode == 0 and "rate_importance" in table.stdout and "range" in table.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--brain", "offline"], "needs a model"),
        (["--brain", "nosuchprovider/x"], "unknown brain"),
        (["--brain", "openai/gpt-4o-mini", "--from", "."], "not a run on a model"),
        (["--brain", "openai/gpt-4o-mini", "--for", "soon"], "--for"),
    ],
)
def test_bad_input_gets_one_line(argv, message):
    out = subprocess.run(CLI + ["estimate", str(CAFE_TRIO), *argv], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr
