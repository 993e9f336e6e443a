"""Models where the work is (issue 35): one model on several local test servers at once
(litellm's Router spreads the calls and moves them off a server that fails), a model per
request kind, and forks and experiments that go on with another brain after a shared,
recorded prefix. Every server is tests/llmserver.py on 127.0.0.1; no API key is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
import yaml

from smallville.brain import LLMConfig
from smallville.errors import BrainError
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT
from llmserver import LLMServer

SEED = load_scenario(CAFE_TRIO).seed


@pytest.fixture
def servers(monkeypatch):
    """Two test servers of one model, with no key in the environment."""
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    with LLMServer(seed=SEED, hang=60) as a, LLMServer(seed=SEED, hang=60) as b:
        yield a, b


def both(a, b, **settings) -> LLMConfig:
    deployments = [{"model": "openai/test-model", "api_base": s.api_base} for s in (a, b)]
    return LLMConfig(model=deployments, backoff=0.0, timeout=60, retries=3, **settings)


def run(tmp_path, brain, hours=1, name="runs", **kw):
    return run_scenario(
        load_scenario(CAFE_TRIO), runs_dir=tmp_path / name, duration=hours * 3600, brain=brain, embedder="lexical", **kw
    )


def events(path) -> list[dict]:
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]


def deployment_of(server, usage) -> dict:
    """A server's row in the usage: by its address (`api_base` read before it stopped)."""
    base = server if isinstance(server, str) else server.api_base
    return next(row for label, row in usage["by_deployment"].items() if label.endswith(base))


def adds_up(usage) -> None:
    """Every call went to one deployment: their figures add up to the run's."""
    rows = usage["by_deployment"].values()
    for figure in ("calls", "prompt_tokens", "completion_tokens"):
        assert sum(row[figure] for row in rows) == usage["total"][figure], figure


def smallville(*args, cwd=ROOT):
    """The CLI as a user runs it: a subprocess with a clean environment and no API key."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


# ---- several deployments of one model -------------------------------------------------


def test_calls_spread_over_two_servers_and_their_usage_adds_up_to_the_run(tmp_path, servers):
    a, b = servers
    result = run(tmp_path, both(a, b))
    m = result.manifest
    assert m.status == "completed" and a.chats > 5 and b.chats > 5
    usage = m.usage
    adds_up(usage)
    assert deployment_of(a, usage)["calls"] == a.chats and deployment_of(b, usage)["calls"] == b.chats
    assert set(usage["concurrency"]["deployments"]) == set(usage["by_deployment"])
    assert not any(e["kind"] == "brain_fallback" for e in events(result.path))


def test_a_server_stopped_mid_run_leaves_the_run_to_the_other_with_no_fallback(tmp_path, servers):
    a, b = servers
    gone = a.api_base
    stopper = threading.Thread(target=lambda: a.wait_for(lambda s: s.chats >= 10, 120) and a.stop())
    stopper.start()
    result = run(tmp_path, both(a, b), hours=2)
    stopper.join()
    assert result.manifest.status == "completed"
    assert not any(e["kind"] == "brain_fallback" for e in events(result.path))
    usage = result.manifest.usage
    adds_up(usage)
    assert deployment_of(gone, usage)["failed"] >= 1  # it went away mid-run
    stopped, other = deployment_of(gone, usage)["calls"], deployment_of(b, usage)["calls"]
    assert stopped >= 10 and other > stopped


def test_a_429_storm_on_one_server_moves_its_calls_to_the_other(tmp_path, servers):
    a, b = servers
    a.fail("429", 40)
    result = run(tmp_path, both(a, b, cooldown=60))
    assert result.manifest.status == "completed"
    assert not any(e["kind"] == "brain_fallback" for e in events(result.path))
    usage = result.manifest.usage
    adds_up(usage)
    stormed = deployment_of(a, usage)
    assert stormed["failed"] == a.injected["429"] >= 1
    assert deployment_of(b, usage)["calls"] > stormed["calls"]  # cooled down: the other took its calls
    cut = usage["concurrency"]["deployments"]
    assert next(v for k, v in cut.items() if k.endswith(a.api_base))["cuts"] >= 1


def test_a_run_recorded_across_two_servers_replays_with_none_byte_for_byte(tmp_path, servers):
    a, b = servers
    recorded = run(tmp_path, both(a, b))
    a.stop()
    b.stop()
    replayed = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path)
    assert replayed.manifest.status == "completed"
    assert (replayed.path / "events.jsonl").read_bytes() == (recorded.path / "events.jsonl").read_bytes()


def test_a_cache_made_across_two_servers_answers_the_same_model_anywhere_else(tmp_path, servers):
    a, b = servers
    first = run(tmp_path, both(a, b), cache=tmp_path / "cache")
    calls = a.chats + b.chats
    moved = LLMConfig(model=[{"model": "openai/test-model", "api_base": b.api_base}], backoff=0.0, retries=2)
    again = run(tmp_path, moved, cache=tmp_path / "cache", name="again")
    assert a.chats + b.chats == calls + 1  # the preflight only
    assert again.manifest.usage["total"]["cached"] == again.manifest.usage["total"]["requests"]
    assert (again.path / "events.jsonl").read_bytes() == (first.path / "events.jsonl").read_bytes()


def test_the_estimate_of_a_deployment_list_is_that_of_its_model(tmp_path):
    settings = tmp_path / "brain.yaml"
    deployments = [{"model": "openai/gpt-4o-mini", "api_base": f"http://127.0.0.1:{port}/v1"} for port in (1, 2)]
    settings.write_text(yaml.safe_dump({"model": deployments}))
    listed = smallville(
        "estimate", CAFE_TRIO, "--brain-config", settings, "--for", "1h", "--embedder", "lexical", "--json"
    )
    alone = smallville(
        "estimate", CAFE_TRIO, "--brain", "openai/gpt-4o-mini", "--for", "1h", "--embedder", "lexical", "--json"
    )
    assert listed.returncode == alone.returncode == 0, listed.stderr + alone.stderr
    listed, alone = json.loads(listed.stdout), json.loads(alone.stdout)
    assert listed["cost_usd"] == alone["cost_usd"] > 0 and listed["by_kind"] == alone["by_kind"]


def test_a_bad_deployment_list_is_named():
    with pytest.raises(BrainError, match=r"model\[1\]\.weight=0: must be a number > 0"):
        LLMConfig(model=[{"model": "openai/a"}, {"model": "openai/a", "weight": 0}])
    with pytest.raises(BrainError, match=r"model\[0\]\.port: unknown"):
        LLMConfig(model=[{"model": "openai/a", "port": 1}])
    with pytest.raises(BrainError, match="an empty list of deployments"):
        LLMConfig(model=[])


# ---- a model per request kind ----------------------------------------------------------


def split_settings(big, small) -> dict:
    return {
        "model": "openai/big-model",
        "api_base": big.api_base,
        "backoff": 0.0,
        "timeout": 60,
        "retries": 2,
        "price": {"prompt": 0.00001, "completion": 0.00003},
        "kinds": {
            "rate_importance": {
                "model": "openai/small-model",
                "api_base": small.api_base,
                "price": {"prompt": 0.000001, "completion": 0.000002},
            }
        },
    }


def test_ratings_on_one_model_and_the_rest_on_another_end_to_end(tmp_path, servers):
    big, small = servers
    settings = tmp_path / "brain.yaml"
    settings.write_text(yaml.safe_dump(split_settings(big, small)))
    done = smallville(
        "run",
        CAFE_TRIO,
        "--brain-config",
        settings,
        "--for",
        "1h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path / "runs",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    asked_small = {p["kind"] for p in small.prompts if p["kind"] != "probe"}
    asked_big = {p["kind"] for p in big.prompts if p["kind"] != "probe"}
    assert asked_small == {"rate_importance"} and "rate_importance" not in asked_big and asked_big
    (path,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((path / "manifest.json").read_text())
    answered = manifest["usage"]["answered_by"]
    assert answered["rate_importance"] == ["openai/small-model"] and answered["plan_day"] == ["openai/big-model"]
    by_model = manifest["usage"]["by_model"]
    assert by_model["openai/small-model"]["calls"] == small.chats and by_model["openai/big-model"]["calls"] == big.chats
    big.stop()
    small.stop()
    replayed = smallville(
        "run",
        CAFE_TRIO,
        "--replay-from",
        path,
        "--for",
        "1h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path / "replay",
        "--quiet",
    )
    assert replayed.returncode == 0, replayed.stderr
    (again,) = (tmp_path / "replay").iterdir()
    assert (again / "events.jsonl").read_bytes() == (path / "events.jsonl").read_bytes()


def test_the_estimate_prices_each_kind_at_its_own_models_price(tmp_path, servers):
    big, small = servers
    settings = tmp_path / "brain.yaml"
    settings.write_text(yaml.safe_dump(split_settings(big, small)))
    done = smallville(
        "estimate", CAFE_TRIO, "--brain-config", settings, "--for", "1h", "--embedder", "lexical", "--json"
    )
    assert done.returncode == 0, done.stderr
    est = json.loads(done.stdout)
    assert est["models"] == {"rate_importance": "openai/small-model"}
    rows = est["by_kind"]
    rating, plan = rows["rate_importance"], rows["plan_day"]
    assert rating["cost_usd"] == pytest.approx(
        rating["prompt_tokens"] * 1e-6 + rating["completion_tokens"] * 2e-6, abs=1e-4
    )
    assert plan["cost_usd"] == pytest.approx(plan["prompt_tokens"] * 1e-5 + plan["completion_tokens"] * 3e-5, abs=1e-4)
    assert big.chats == small.chats == 0  # worked out offline


# ---- forks and experiments onto another brain --------------------------------------------


def test_fork_brain_shares_the_prefix_and_sends_what_follows_only_to_the_new_model(tmp_path, servers):
    old, new = servers
    parent = run(tmp_path, LLMConfig(model="openai/old-model", api_base=old.api_base, backoff=0.0, retries=2), hours=2)
    calls = old.chats
    at = "2023-02-13 08:00"
    done = smallville(
        "fork",
        parent.path,
        "--at",
        at,
        "--brain",
        "openai/new-model",
        "--api-base",
        new.api_base,
        "--runs-dir",
        tmp_path / "forks",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    assert old.chats == calls and new.chats > 1  # the prefix came from the parent's record
    (fork,) = (tmp_path / "forks").iterdir()
    manifest = json.loads((fork / "manifest.json").read_text())
    t = manifest["fork"]["t"]
    assert [b["t"] for b in manifest["brains"]] == [0.0, t]
    assert [b["brain"]["model"] for b in manifest["brains"]] == ["openai/old-model", "openai/new-model"]
    assert manifest["brain"]["model"] == "openai/new-model"
    mine, theirs = events(fork), events(parent.path)
    prefix = [e for e in theirs if e["t"] < t]
    assert mine[: len(prefix)] == prefix and len(prefix) > 10


def test_an_experiment_branch_runs_conditions_that_share_their_prefix(tmp_path, servers):
    model, _ = servers
    spec = {
        "name": "paired",
        "scenario": str(CAFE_TRIO),
        "duration": "2h",
        "seeds": [1, 2],
        "embedder": "lexical",
        "out": str(tmp_path / "out"),
        "branch": {"from": "offline", "at": "1h"},
        "conditions": {
            "offline": None,
            "model": {"brain": {"model": "openai/test-model", "api_base": model.api_base, "backoff": 0.0}},
            "nudged": {"inject": {"klaus_mueller": "I should ask Maria about her research today."}},
        },
    }
    path = tmp_path / "paired.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = smallville("experiment", path, "--quiet")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    for seed in (1, 2):
        base = events(out / f"offline-seed{seed}")
        prefix = [e for e in base if e["t"] < 3600]
        for other in ("model", "nudged"):
            assert events(out / f"{other}-seed{seed}")[: len(prefix)] == prefix
    assert model.chats > 1
    pairs = (out / "pairs.csv").read_text().splitlines()
    assert pairs[0].startswith("a,b,seeds") and len(pairs) == 4


def test_check_model_checks_each_model_and_sends_each_kind_to_its_own(tmp_path, servers):
    big, small = servers
    settings = tmp_path / "brain.yaml"
    settings.write_text(yaml.safe_dump(split_settings(big, small)))
    done = smallville(
        "check-model",
        "openai/big-model",
        "--brain-config",
        settings,
        "--scenario",
        CAFE_TRIO,
        "--embedder",
        "lexical",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    rows = {row["kind"]: row for row in json.loads(done.stdout)["kinds"]}
    assert rows["rate_importance"]["model"] == "openai/small-model" and rows["plan_day"]["model"] == "openai/big-model"
    for server in (big, small):
        assert any(p["kind"] == "probe" for p in server.prompts)  # each model's preflight
    assert [p["kind"] for p in small.prompts if p["kind"] != "probe"] == ["rate_importance"]
    assert "rate_importance" not in {p["kind"] for p in big.prompts}


def test_resume_brain_goes_on_with_another_model_for_the_part_not_yet_run(tmp_path, servers):
    new, _ = servers
    first = run(tmp_path, "offline", hours=1)
    done = smallville(
        "resume", first.path, "--for", "1h", "--brain", "openai/new-model", "--api-base", new.api_base, "--quiet"
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert [(b["t"], b["brain"].get("model", b["brain"]["name"])) for b in manifest["brains"]] == [
        (0.0, "offline"),
        (3600, "openai/new-model"),
    ]
    assert manifest["status"] == "completed" and new.chats > 1
    asked = [p["user"] for p in new.prompts if p["kind"] != "probe"]
    assert asked and all("07:" not in prompt.split("\n", 3)[0] for prompt in asked)


def test_a_fork_onto_an_unreachable_model_is_one_line_and_writes_nothing(tmp_path, servers):
    old, _ = servers
    parent = run(tmp_path, "offline", hours=1)
    old.stop()
    done = smallville(
        "fork",
        parent.path,
        "--at",
        "2023-02-13 07:30",
        "--brain",
        "openai/gone",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--runs-dir",
        tmp_path / "forks",
        "--quiet",
    )
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "openai/gone" in done.stderr and "cannot answer" in done.stderr
    assert not (tmp_path / "forks").exists()


def test_pairs_compare_conditions_run_against_run_of_the_same_seed():
    from smallville.experiment import compare_pairs

    talks = {
        ("base", 1): 10,
        ("base", 2): 20,
        ("strong", 1): 13,
        ("strong", 2): 21,
        ("strong", 3): 99,
    }  # seed 3 has no pair: left out
    rows = [{"condition": c, "seed": seed, "run": f"{c}-{seed}", "talks": n} for (c, seed), n in talks.items()]
    (pair,) = compare_pairs(rows)
    assert (pair["a"], pair["b"], pair["seeds"]) == ("base", "strong", 2)
    assert pair["talks_diff_mean"] == 2.0 and pair["talks_diff_std"] == pytest.approx(1.4142, abs=1e-4)
    assert "run_diff_mean" not in pair and "seed_diff_mean" not in pair
