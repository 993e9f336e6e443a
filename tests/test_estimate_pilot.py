"""`smallville estimate --from RUN_DIR`: a short pilot on a model that acts unlike the
offline brain predicts a longer window of that model, where the plain estimate cannot."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from smallville.brain import LLMConfig
from smallville.estimate import estimate
from smallville.pilot import Pilot
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT, manifest_of
from llmserver import SOCIABLE, LLMServer

CLI = [sys.executable, "-c", "from smallville.cli import main; raise SystemExit(main())"]
FIGURES = ("requests", "prompt_tokens", "completion_tokens")


def _run(runs, hours: float) -> tuple:
    """A run of cafe_trio on the random-instance test server, as a model that talks to
    whoever it can (in order, so its calls are exactly the same every time), and what the
    server received."""
    with LLMServer(prefer=SOCIABLE) as server:
        config = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0, lookahead=0)
        run = run_scenario(
            load_scenario(CAFE_TRIO), runs_dir=runs, duration=hours * 3600, brain=config, embedder="lexical"
        )
        return run.path, {
            "requests": server.chats,
            "prompt_tokens": sum(u["prompt_tokens"] for u in server.usages),
            "completion_tokens": sum(u["completion_tokens"] for u in server.usages),
        }


@pytest.fixture(scope="module")
def pilot_and_window(tmp_path_factory):
    """A 2-hour pilot and what a 3-hour run of the same model really sent."""
    runs = tmp_path_factory.mktemp("runs")
    pilot, _ = _run(runs, 2)
    _, sent = _run(runs, 3)
    return pilot, sent


def test_a_pilot_predicts_a_longer_window_of_its_model(pilot_and_window):
    pilot, sent = pilot_and_window
    scenario, settings = load_scenario(CAFE_TRIO), LLMConfig(model="openai/test-model")
    plain = estimate(scenario, settings, duration=3 * 3600, embedder="lexical").to_dict()
    piloted = estimate(scenario, settings, duration=3 * 3600, embedder="lexical", from_run=pilot).to_dict()
    for name in FIGURES:
        assert piloted[name] == pytest.approx(sent[name], rel=0.3), name
        lo, hi = piloted["range"][name]
        assert lo <= sent[name] <= hi and (lo, hi) == pytest.approx((piloted[name] * 0.7, piloted[name] * 1.3), abs=1)
    assert any(plain[name] != pytest.approx(sent[name], rel=0.3) for name in FIGURES)  # not the offline brain
    assert plain["basis"] == "offline brain" and "pilot" not in plain
    assert piloted["basis"] == "pilot"
    assert piloted["pilot"] == {"run": str(pilot), "agents": 3, "hours": 2.0, "from_start": True}
    assert piloted["by_kind"]["preflight"]["requests"] == 1  # once a run, as in the pilot
    assert piloted["requests"] == sum(row["requests"] for row in piloted["by_kind"].values())
    # far beyond the pilot's window, the range widens to 0.5x-2x
    day = estimate(scenario, settings, duration=86400, embedder="lexical", from_run=pilot).to_dict()
    assert day["range"]["requests"] == [int(day["requests"] * 0.5), day["requests"] * 2]


def test_the_first_instant_is_counted_once_and_the_rest_per_agent_hour(tmp_path):
    """Day plans and seed ratings happen once per agent per day: the pilot's rates are
    what it sent after them, scaled by agents and hours."""
    manifest = {
        **manifest_of().to_dict(),
        "agents": ["a", "b"],
        "sim_start": "2023-02-13 07:00:00",
        "sim_reached": "2023-02-13 09:00:00",
        "usage": {
            "by_kind": {
                "plan_day": {"calls": 2, "prompt_tokens": 1000, "completion_tokens": 100},
                "rate_importance": {"calls": 14, "prompt_tokens": 1400, "completion_tokens": 140},
                "preflight": {"calls": 1, "prompt_tokens": 40, "completion_tokens": 20},
                "insights": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
            }
        },
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    pilot = Pilot.load(tmp_path)
    assert (pilot.agents, pilot.hours, pilot.from_start) == (2, 2.0, True)
    first = {
        "plan_day": {"requests": 4, "prompt_tokens": 2000, "completion_tokens": 4000},  # offline, 4 agents
        "rate_importance": {"requests": 4, "prompt_tokens": 400, "completion_tokens": 80},
    }
    assert pilot.project(first, agents=4, hours=3) == {
        "plan_day": {"requests": 4, "prompt_tokens": 2000, "completion_tokens": 200},  # completions at the pilot's
        "rate_importance": {"requests": 4 + 36, "prompt_tokens": 400 + 3600, "completion_tokens": 40 + 360},
        "preflight": {"requests": 1, "prompt_tokens": 40, "completion_tokens": 20},
    }
    # a resumed run's usage covers only what it ran since: no first instant in it
    manifest["resumed"] = [{"from": "2023-02-13 08:00:00"}]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    resumed = Pilot.load(tmp_path)
    assert (resumed.hours, resumed.from_start) == (1.0, False)
    assert resumed.project(first, agents=2, hours=1)["rate_importance"]["requests"] == 4 + 14


def test_the_command_line_estimates_from_a_pilot_with_no_key(pilot_and_window):
    pilot, _ = pilot_and_window
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    args = ["estimate", str(CAFE_TRIO), "--brain", "openai/test-model", "--for", "3h", "--embedder", "lexical"]
    out = subprocess.run(
        CLI + args + ["--from", str(pilot), "--json"], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    expected = estimate(
        load_scenario(CAFE_TRIO),
        LLMConfig(model="openai/test-model"),
        duration=3 * 3600,
        embedder="lexical",
        from_run=pilot,
    ).to_dict()
    assert data["basis"] == "pilot" and {n: data[n] for n in FIGURES} == {n: expected[n] for n in FIGURES}
    table = subprocess.run(CLI + args + ["--from", str(pilot)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert table.returncode == 0, table.stderr
    assert "rates of pilot" in " ".join(table.stdout.split())
    plain = subprocess.run(CLI + args, capture_output=True, text=True, cwd=ROOT, env=env)
    assert "assumes the offline brain's behaviour" in " ".join(plain.stdout.split())
