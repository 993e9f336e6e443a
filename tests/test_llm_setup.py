"""A model server as a new user meets it: the CLI in a subprocess with no API key in its
environment, against the local test server (tests/llmserver.py) or a hosted model's name.
Keys, structured-output modes the server cannot take, and a model that cannot serve the
run are each found at the start and said in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import CAFE_TRIO, ROOT
from llmserver import LLMServer


def clean_env(**extra) -> dict:
    """What a new user's shell has: no key of any provider."""
    keep = ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT")
    return {
        **{k: v for k, v in os.environ.items() if k in keep},
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "200",
        **extra,
    }


def smallville(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env or clean_env(),
    )


@pytest.fixture
def server():
    with LLMServer(seed=1) as s:
        yield s


def only_run(runs) -> dict:
    (run_dir,) = runs.iterdir()
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.parametrize("child", [False, True])
def test_the_readme_line_runs_against_a_local_server_with_no_key(tmp_path, server, child):
    more = []
    if child:  # calls from a child process, as big towns make them
        (tmp_path / "brain.yaml").write_text("call_process: true\n")
        more = ["--brain-config", tmp_path / "brain.yaml"]
    result = smallville(
        "run",
        "scenarios/cafe_trio.yaml",
        "--brain",
        "openai/local",
        "--api-base",
        server.api_base,
        "--for",
        "1h",
        "--runs-dir",
        tmp_path / "runs",
        *more,
    )
    assert result.returncode == 0, result.stderr
    tmp_path = tmp_path / "runs"
    assert "completed: run written to" in result.stderr
    assert {h["authorization"] for h in server.headers} == {"Bearer no-key-needed"}
    m = only_run(tmp_path)
    assert m["usage"]["total"]["fallbacks"] == 0 and m["usage"]["total"]["calls"] == server.chats
    assert m["brain"]["structured"] == "json_schema" and m["brain"]["structured_check"]["mode"] == "json_schema"


@pytest.mark.parametrize(
    "flags, key",
    [
        (["--brain", "openai/gpt-4o-mini"], "OPENAI_API_KEY"),
        (["--brain", "anthropic/claude-3-5-haiku-20241022"], "ANTHROPIC_API_KEY"),
        (["--embedder", "openai/text-embedding-3-small"], "OPENAI_API_KEY"),
    ],
)
def test_a_hosted_model_without_its_key_is_named_before_any_call(tmp_path, flags, key):
    result = smallville("run", CAFE_TRIO, *flags, "--runs-dir", tmp_path / "runs")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("smallville: error: ") and f"needs an API key: set {key} in the environment" in line
    assert line.endswith("--api-base)")  # said whole, never cut off
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "refused, chosen", [({"json_schema"}, "json_object"), ({"json_schema", "json_object"}, "prompt")]
)
def test_a_mode_the_server_refuses_is_found_at_the_start_and_the_next_one_used(tmp_path, server, refused, chosen):
    server.refuse_modes = refused
    result = smallville(
        "run",
        CAFE_TRIO,
        "--brain",
        "openai/local",
        "--api-base",
        server.api_base,
        "--for",
        "1h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("structured output:")]
    assert line.startswith(f"structured output: {chosen}, because json_schema refused (")
    m = only_run(tmp_path)
    assert m["brain"]["structured"] == chosen and m["brain"]["structured_check"]["configured"] == "json_schema"
    assert m["usage"]["total"]["fallbacks"] == m["usage"]["total"]["retries"] == 0
    asked = [p for p in server.prompts if "Character:" in p["user"]]
    assert asked and {p["mode"] for p in asked} == {chosen}  # not paid for all run long


def test_a_mode_the_server_ignores_is_found_too(tmp_path, server):
    server.ignore_modes = {"json_schema"}
    result = smallville(
        "run",
        CAFE_TRIO,
        "--brain",
        "openai/local",
        "--api-base",
        server.api_base,
        "--for",
        "1h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "structured output: json_object, because json_schema not followed (no JSON object in the reply" in result.stderr
    )
    assert only_run(tmp_path)["usage"]["total"]["fallbacks"] == 0


def test_a_model_that_cannot_serve_the_run_stops_it_kept_and_resumable(tmp_path, server):
    server.fail_rate(1.0, ["schema"])  # every answer off its schema, whatever is asked
    settings = tmp_path / "brain.yaml"
    settings.write_text(f"model: openai/local\napi_base: {server.api_base}\nbackoff: 0\n")
    result = smallville(
        "run",
        CAFE_TRIO,
        "--brain-config",
        settings,
        "--for",
        "2h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path / "runs",
    )
    assert result.returncode == 1
    (line,) = [x for x in result.stderr.strip().splitlines() if x.startswith("smallville: error:")]
    assert "of the first" in line and "requests fell back with the same error (schema: " in line
    assert "use structured: json_schema or json_object" in line and "smallville resume" in line
    assert server.chats < 100  # stopped early, not paid for all run long
    (run_dir,) = (tmp_path / "runs").iterdir()
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "failed" and "fell back" in m["error"]
    server.fail_rate(0.0)  # the setting fixed: it goes on where it stopped
    resumed = smallville("resume", run_dir, env=clean_env())
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


def brain_on(server, **settings):
    """A model brain on `server` (no preflight, no backoff, and `settings`) and its ledger."""
    from smallville.brain import Ledger, LLMConfig, make_brain

    ledger = Ledger()
    config = LLMConfig(model="openai/local", api_base=server.api_base, backoff=0, preflight=False, **settings)
    return make_brain(config, 1, ledger=ledger), ledger


def ratings(n: int, tag: str = "text") -> list:
    """`n` rating requests, each of its own text."""
    from smallville.brain import requests as rq

    return [rq.RateImportance(f"a{i}", "Ann", (f"{tag} {i}",)) for i in range(n)]


def test_the_calls_in_flight_grow_while_answers_come_and_halve_on_a_rate_limit(server):
    from smallville.brain import requests as rq

    brain, ledger = brain_on(server, concurrency_start=2, concurrency_ceiling=16)
    (throttle,) = ledger.throttles.values()

    def batch(n: int, tag: str):
        return brain.answer(ratings(n, tag))

    assert throttle.limit == 2
    for round_ in range(3):
        batch(16, f"up {round_}")
    assert (throttle.limit, throttle.reached, throttle.cuts) == (16, 16, 0)
    server.hold_for = 16  # answered only once all sixteen are in flight at once
    batch(16, "all at once")
    assert server.max_in_flight == 16
    server.hold_for = 4
    server.fail("429", 4)  # one round of calls, four rate limits: halved once
    answers = batch(4, "limited")
    assert all(isinstance(a, rq.Importance) for a in answers) and not answers.fallbacks
    assert (int(throttle.limit), throttle.cuts) == (8, 1)
    server.hold_for = 0
    server.fail("429", 1)
    batch(1, "again")
    assert (int(throttle.limit), throttle.cuts) == (4, 2)
    assert ledger.to_dict()["concurrency"] == {"adaptive": True, "limit": 4, "reached": 16, "cuts": 2, "ceiling": 16}


def test_a_server_answering_one_call_at_a_time_brings_the_calls_in_flight_down_with_no_fallback():
    """A local server that answers one call at a time (llama.cpp's, Ollama's) queues a town's
    round of calls until most time out. The round's timeouts cut the calls in flight to half of
    what the server answered within a timeout, so the retries are answered, none falls back."""
    from smallville.brain import requests as rq

    with LLMServer(latency=0.1, serial=True) as server:  # ten answers a second, one at a time
        brain, ledger = brain_on(server, timeout=1.0, concurrency_start=80, concurrency_ceiling=80)
        (throttle,) = ledger.throttles.values()
        answers = brain.answer(ratings(80))
        brain.close()
    assert all(isinstance(a, rq.Importance) for a in answers) and not answers.fallbacks
    usage = ledger.to_dict()
    assert usage["total"]["fallbacks"] == 0 and usage["total"]["retries"] >= 60  # most of the first round timed out
    assert server.dropped >= 60  # and the server dropped them unanswered, as a real one does
    assert throttle.cuts >= 1


def test_a_pinned_concurrency_stays_where_it_is_put(server):
    from smallville.brain import requests as rq

    brain, ledger = brain_on(server, max_concurrency=3)
    brain.answer(ratings(12))
    server.fail("429", 1)
    brain.answer([rq.RateImportance("a", "Ann", ("one more",))])
    assert ledger.to_dict()["concurrency"] == {"adaptive": False, "limit": 3, "reached": 3, "cuts": 0, "ceiling": 3}
    assert server.max_in_flight <= 3


def test_the_preflight_is_paid_from_the_budget_like_any_call(tmp_path, server):
    one = smallville(
        "run",
        CAFE_TRIO,
        "--brain",
        "openai/local",
        "--api-base",
        server.api_base,
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path / "one",
        "--max-requests",
        "1",
    )
    assert one.returncode == 3 and server.chats == 1  # the preflight took the one
    m = only_run(tmp_path / "one")
    assert m["status"] == "budget_exhausted" and m["spend"]["requests"] == 1
    assert m["usage"]["by_kind"]["preflight"]["calls"] == 1
    assert "budget reached" in one.stderr and "--max-requests MORE" in one.stderr
    too_few = smallville(
        "run",
        CAFE_TRIO,
        "--brain",
        "openai/local",
        "--api-base",
        server.api_base,
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path / "few",
        "--max-tokens",
        "50",
    )
    assert too_few.returncode == 3 and server.chats == 1  # the probe could cost more: not sent
    (line,) = too_few.stderr.strip().splitlines()
    assert line.startswith("smallville: error: budget reached: 0 of --max-tokens 50 tokens spent")
