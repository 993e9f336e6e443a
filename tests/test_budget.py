"""Budgets that hold (brain/budget.py): a run against the local server never sends more
than its limits allow, stops at its last complete tick with exit 3, and goes on with
`resume --max-requests MORE` to the very run it would have been without a limit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from smallville.brain import LLMConfig
from smallville.run import resume_run, run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT
from llmserver import SOCIABLE, LLMServer


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with LLMServer(seed=load_scenario(CAFE_TRIO).seed, prefer={**SOCIABLE, "where": "Hobbs Cafe"}) as s:
        yield s


def brain(server, **settings) -> LLMConfig:
    return LLMConfig(**{"model": "openai/test-model", "api_base": server.api_base, **settings})


def run(tmp_path, server, name, budget=None, hours=3, **settings):
    return run_scenario(
        load_scenario(CAFE_TRIO),
        runs_dir=tmp_path / name,
        duration=hours * 3600,
        brain=brain(server, **settings),
        embedder="lexical",
        budget=budget,
    )


def tokens_billed(server) -> int:
    """What the server billed: prompt and completion tokens of every answer it sent."""
    return sum(u["prompt_tokens"] + u["completion_tokens"] for u in server.usages)


@pytest.mark.parametrize("limit", [1, 17, 60])
def test_a_request_limit_is_never_passed(tmp_path, server, limit):
    result = run(tmp_path, server, "runs", budget={"requests": limit})
    m = result.manifest
    assert m.status == "budget_exhausted"
    assert server.chats <= limit and m.spend["requests"] == server.chats
    assert m.budget_stop == {"limit": "max-requests", "value": limit, "spent": server.chats, "at": m.sim_reached}


@pytest.mark.parametrize("limit", [3000, 12000])
def test_a_token_limit_is_never_passed(tmp_path, server, limit):
    result = run(tmp_path, server, "runs", budget={"tokens": limit})
    assert result.manifest.status == "budget_exhausted"
    assert 0 < tokens_billed(server) <= limit
    assert result.manifest.spend["tokens"] == tokens_billed(server)


def test_a_dollar_budget_is_never_passed_with_a_configured_price(tmp_path, server):
    price = {"price_prompt": 2e-6, "price_completion": 8e-6}
    result = run(tmp_path, server, "runs", budget={"usd": 0.05}, **price)
    billed = sum(u["prompt_tokens"] * 2e-6 + u["completion_tokens"] * 8e-6 for u in server.usages)
    assert result.manifest.status == "budget_exhausted"
    # stopped by a batch whose worst case would pass: each call its prompt and its kind's
    # max_tokens, a day plan's up to 2,000 (a block an hour to the next wake-up), so three plans
    # at once reserve more than $0.05 on their own (3 x 2,000 x 8e-6, and their prompts)
    assert 0.01 < billed <= 0.05
    assert result.manifest.spend["usd"] == pytest.approx(billed)


def test_a_dollar_budget_needs_a_price(tmp_path, server):
    from smallville.errors import BrainError

    with pytest.raises(BrainError, match="no price known"):
        run(tmp_path, server, "runs", budget={"usd": 1.0})
    assert not (tmp_path / "runs").exists()  # stopped before anything was written


def test_a_stopped_run_resumed_with_more_ends_as_if_never_stopped(tmp_path, server):
    whole = run(tmp_path, server, "whole")
    assert whole.manifest.status == "completed"
    stopped = run(tmp_path, server, "stopped", budget={"requests": 25})
    path = stopped.path
    statuses = [stopped.manifest.status]
    while statuses[-1] == "budget_exhausted" and len(statuses) < 10:
        statuses.append(resume_run(path, budget={"requests": 25}).manifest.status)
    assert statuses[0] == "budget_exhausted" and statuses[-1] == "completed" and len(statuses) > 2
    for name in ("events.jsonl", "answers.jsonl"):
        assert (path / name).read_bytes() == (whole.path / name).read_bytes(), name
    # Calls under way when a run stops (the stopping instant's, and any fetched ahead) are
    # paid for and asked again on resume: a stop costs a few calls, never the whole hour.
    # (Run-ahead may also fetch a call the run never uses, in either run, as timing has it.)
    spent = json.loads((path / "manifest.json").read_text())["spend"]["requests"]
    paid = whole.manifest.spend["requests"]
    needed = paid - whole.manifest.usage.get("run_ahead", {}).get("unused", 0)
    assert needed <= spent <= paid + 10 * len(statuses)


def test_the_command_line_stops_with_exit_3_and_says_how_to_go_on(tmp_path, server):
    config = tmp_path / "brain.yaml"
    config.write_text(f"model: openai/test-model\napi_base: {server.api_base}\n")
    cmd = [sys.executable, "-c", "from smallville.cli import main; raise SystemExit(main())"]
    out = subprocess.run(
        cmd
        + [
            "run",
            str(CAFE_TRIO),
            "--brain-config",
            str(config),
            "--for",
            "2h",
            "--quiet",
            "--embedder",
            "lexical",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--max-requests",
            "10",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 3, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("smallville:")]
    run_dir = next((tmp_path / "runs").iterdir())
    assert "--max-requests 10" in line and f"smallville resume {run_dir} --max-requests MORE" in line
    assert "Traceback" not in out.stderr
    again = subprocess.run(
        cmd + ["resume", str(run_dir), "--quiet", "--max-requests", "1000"], capture_output=True, text=True, cwd=ROOT
    )
    assert again.returncode == 0, again.stderr
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


def test_an_experiment_limits_each_run_and_lists_the_stopped_ones(tmp_path, server):
    import shutil

    from smallville.experiment import load_experiment, load_results, run_experiment

    (tmp_path / "agents").mkdir()
    for agent in ("isabella_rodriguez", "maria_lopez", "klaus_mueller"):
        shutil.copy(ROOT / "agents" / f"{agent}.yaml", tmp_path / "agents")
    scenario = (ROOT / "scenarios" / "cafe_trio.yaml").read_text()
    (tmp_path / "cafe.yaml").write_text(scenario + f"\nbrain:\n  api_base: {server.api_base}\n")
    (tmp_path / "exp.yaml").write_text(
        f"name: budgeted\nscenario: {tmp_path / 'cafe.yaml'}\nduration: 2h\n"
        "seeds: [1]\nembedder: lexical\nconditions:\n  model: {brain: openai/test-model}\n"
        "  offline: {}\n"
    )
    exp = load_experiment(tmp_path / "exp.yaml")
    result = run_experiment(exp, out=tmp_path / "out", quiet=True, budget={"requests": 12})
    assert result.ok and not result.failed
    rows = {r["condition"]: r for r in load_results(tmp_path / "out")}
    assert rows["model"]["status"] == "budget_exhausted" and rows["offline"]["status"] == "completed"
    assert server.chats <= 12
    assert [r["condition"] for r in result.summary] == ["offline"]  # a cut-short run is not averaged
    again = run_experiment(exp, out=tmp_path / "out", quiet=True, budget={"requests": 12})
    assert sorted(again.skipped) == ["model-seed1", "offline-seed1"]  # both finished: nothing redone


def test_the_progress_line_shows_the_spend_and_the_cost_by_the_end():
    from types import SimpleNamespace

    from smallville.brain.ledger import Ledger
    from smallville.render import spend_so_far

    ledger = Ledger()
    seen = {"session": SimpleNamespace(ledger=ledger), "free_until": 0.0}
    assert spend_so_far(seen, 1800, 7200) == ""  # re-simulating a record: nothing spent
    ledger.add("plan_day", "amy", calls=10, prompt_tokens=900, completion_tokens=100, cost=0.02)
    line = spend_so_far(seen, 3600, 7200)  # $0.02 in the 30 minutes since spending began, 60 to go
    assert line == "; 10 calls, 1,000 tok, $0.0200 (about $0.0600 by the end)"


def test_the_end_of_a_model_run_shows_spend_by_kind_and_by_agent(tmp_path, server):
    from rich.console import Console

    from smallville.render import agent_usage_table, usage_table

    result = run(tmp_path, server, "runs", hours=1)
    console = Console(record=True, width=160)
    console.print(usage_table(result.manifest))
    console.print(agent_usage_table(result.manifest, top=2))
    text = console.export_text()
    assert "rate_importance" in text and "by agent" in text and "1 others" not in text
    assert sum(name in text for name in ("isabella_rodriguez", "maria_lopez", "klaus_mueller")) == 3
