"""The LLM brain end to end: litellm over HTTP to a local OpenAI-compatible server that
answers with the offline brain and fails on request (tests/llmserver.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from conftest import CAFE_TRIO, ROOT
from llmserver import FAILURES, LLMServer
from smallville.brain import LLMConfig, make_brain
from smallville.brain import requests as rq
from smallville.errors import BrainError
from smallville.runner import run_scenario
from smallville.scenario import load_scenario

SECRET = "sk-test-secret"


@pytest.fixture
def llm(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with LLMServer(seed=load_scenario(CAFE_TRIO).seed, hang=0.6) as server:
        yield server


def config(server, **settings) -> LLMConfig:
    return LLMConfig(**{"model": "openai/test-model", "api_base": server.api_base, "echo_request": True,
                        "backoff": 0.0, "timeout": 0.3, "retries": 2, **settings})


def run(tmp_path, brain, hours=2, name="runs", **kw):
    return run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / name, duration=hours * 3600,
                        brain=brain, embedder="lexical", **kw)


def events(result) -> list[dict]:
    return [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]


def test_a_run_through_the_server_matches_the_offline_run(tmp_path, llm):
    result = run(tmp_path, config(llm))
    offline = run(tmp_path, "offline", name="offline")
    m = result.manifest
    assert m["status"] == "completed" and m["brain"]["model"] == "openai/test-model"
    assert (result.path / "events.jsonl").read_bytes() == (offline.path / "events.jsonl").read_bytes()
    usage = m["usage"]["total"]
    wasted = m["usage"]["run_ahead"]["unused"]      # fetched ahead of the clock, never asked for
    assert usage["requests"] - wasted == sum(m["requests"].values()) > 30
    assert usage["calls"] == llm.chats - 1                    # the first chat was the preflight
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0 and usage["retries"] == usage["fallbacks"] == 0
    assert set(m["usage"]["by_agent"]) == set(m["agents"])
    assert m["usage"]["per_agent_hour"]["rate_importance"]["calls"] > 0
    assert llm.bodies[1]["response_format"]["type"] == "json_schema"
    recorded = (result.path / "answers.jsonl").read_text().splitlines()
    assert len(recorded) == usage["requests"] - wasted and all(json.loads(line)["key"] for line in recorded)


@pytest.mark.parametrize("mode", FAILURES)
def test_each_failure_is_retried_then_falls_back_and_is_accounted(tmp_path, llm, mode):
    llm.fail(mode, 3, match='"agent":"klaus_mueller"')       # every attempt of Klaus's first request
    result = run(tmp_path, config(llm), hours=0.25)
    assert result.manifest["status"] == "completed"
    (fallback,) = [e for e in events(result) if e["kind"] == "brain_fallback"]
    assert fallback["agent"] == "klaus_mueller" and fallback["data"]["kind"] == "rate_importance"
    reason = {"429": "rate_limit", "500": "server", "hang": "timeout", "invalid_json": "bad_json",
              "schema": "schema", "cutoff": "bad_json"}[mode]
    assert fallback["data"]["error"].startswith(reason + ": ") and len(fallback["data"]["key"]) == 16
    klaus = result.manifest["usage"]["by_agent"]["klaus_mueller"]
    total = result.manifest["usage"]["total"]
    assert (klaus["retries"], klaus["fallbacks"]) == (2, 1) == (total["retries"], total["fallbacks"])
    first = next(e for e in events(result) if e["kind"] == "memory" and e["agent"] == "klaus_mueller")
    assert first["data"]["importance"] == 5


def test_a_rate_limited_retry_waits_as_long_as_the_server_asks(llm):
    from smallville.brain.wrappers import Retrying

    brain = make_brain(config(llm, backoff=0.5, retries=2), seed=1)
    retrying = brain.inner
    assert isinstance(retrying, Retrying)
    waits: list[float] = []
    retrying.sleep = waits.append
    llm.retry_after = 7
    llm.fail("429", 2)
    [answer] = brain.answer([rq.RateImportance("klaus_mueller", "Klaus Mueller", ("a paper is due",))])
    assert isinstance(answer, rq.Importance) and not brain.last_fallbacks
    assert waits == [7.0, 7.0]                 # Retry-After beats the backoff of 0.5 and 1.0 s
    llm.retry_after = None
    llm.fail("429", 1)
    brain.answer([rq.RateImportance("klaus_mueller", "Klaus Mueller", ("lunch",))])
    assert waits[2:] == [0.5]                  # no header: the backoff


def test_a_fifth_of_calls_failing_still_completes_with_every_failure_accounted(tmp_path, llm):
    llm.fail_rate(0.2)
    result = run(tmp_path, config(llm, max_concurrency=4), hours=24)      # cafe_trio, a whole simulated day
    assert result.manifest["status"] == "completed"
    usage = result.manifest["usage"]["total"]
    injected = sum(llm.injected.values())
    assert injected > 10 and usage["retries"] + usage["fallbacks"] == injected
    wasted = result.manifest["usage"]["run_ahead"]["unused_fallbacks"]   # fetched ahead, never asked for
    assert sum(e["kind"] == "brain_fallback" for e in events(result)) == usage["fallbacks"] - wasted


def test_requests_of_one_batch_are_in_flight_together_and_come_back_in_order(llm):
    llm.latency = 0.2
    brain = make_brain(config(llm, max_concurrency=8, timeout=5), 1)
    batch = [rq.RateImportance(f"agent{i}", f"Agent {i}", (f"memory {i} about a party" if i % 2 else "bed is idle",))
             for i in range(8)]
    began = time.perf_counter()
    answers = brain.answer(batch)
    assert time.perf_counter() - began < 0.2 * 4
    assert answers == [rq.Importance((7,) if i % 2 else (1,)) for i in range(8)]
    assert llm.max_in_flight >= 4


def test_record_then_replay_with_the_server_stopped_is_byte_identical(tmp_path, llm):
    llm.fail("500", 3, match='"agent":"klaus_mueller","date"')    # Klaus's day plan falls back
    recorded = run(tmp_path, config(llm), hours=2)
    assert any(e["kind"] == "brain_fallback" for e in events(recorded))
    llm.stop()
    replayed = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path)
    assert replayed.manifest["status"] == "completed" and replayed.manifest["brain"]["name"] == "replay"
    assert (replayed.path / "events.jsonl").read_bytes() == (recorded.path / "events.jsonl").read_bytes()


def test_a_request_missing_from_the_record_is_named(tmp_path):
    recorded = run(tmp_path, "offline", hours=1)
    lines = (recorded.path / "answers.jsonl").read_text().splitlines()
    missing = json.loads(lines[-1])
    (recorded.path / "answers.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(BrainError, match=f"request {missing['key']} \\({missing['kind']} asked by"):
        run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path)
    fell = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path,
                        replay_fallthrough=True)
    assert (fell.path / "events.jsonl").read_bytes() == (recorded.path / "events.jsonl").read_bytes()


def test_a_cache_shared_across_runs_answers_without_calls(tmp_path, llm):
    first = run(tmp_path, config(llm), hours=1, cache=tmp_path / "cache")
    calls = llm.chats
    second = run(tmp_path, config(llm), hours=1, cache=tmp_path / "cache", name="again")
    assert llm.chats == calls + 1                                 # the preflight only
    assert second.manifest["usage"]["total"]["cached"] == second.manifest["usage"]["total"]["requests"]
    assert (first.path / "events.jsonl").read_bytes() == (second.path / "events.jsonl").read_bytes()


def test_settings_from_a_config_file_and_embeddings_through_litellm(tmp_path, llm):
    settings = tmp_path / "brain.yaml"
    settings.write_text(f"model: openai/test-model\napi_base: {llm.api_base}\necho_request: true\nbackoff: 0\n"
                        "structured: json_object\nembedding_model: openai/test-embed\nmax_concurrency: 2\n"
                        "price: {prompt: 0.000001, completion: 0.000002}\n")
    result = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "runs", duration=3600, brain_config=settings)
    m = result.manifest
    assert m["status"] == "completed" and m["embedder"]["name"] == "litellm:openai/test-embed" and llm.embeddings
    assert m["brain"]["structured"] == "json_object" and m["usage"]["cost_known"]
    total = m["usage"]["total"]
    assert total["cost"] == pytest.approx(total["prompt_tokens"] * 1e-6 + total["completion_tokens"] * 2e-6, rel=1e-3)
    chat = next(b for b in llm.bodies if "messages" in b and "REQUEST_JSON" in b["messages"][-1]["content"])
    assert chat["response_format"]["type"] == "json_object" and "JSON schema" in chat["messages"][0]["content"]
    settings.write_text("model: openai/x\napi_key: sk-nope\n")
    with pytest.raises(BrainError, match="not a setting"):
        run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "runs", brain_config=settings)
    settings.write_text("model: openai/x\ntemprature: 0.2\n")
    with pytest.raises(BrainError, match="unknown brain setting 'temprature'"):
        run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "runs", brain_config=settings)


def smallville(*args, env=None):
    return subprocess.run([sys.executable, "-m", "smallville", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def test_an_unreachable_model_stops_the_run_in_one_line(tmp_path, capsys, monkeypatch):
    from smallville.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["run", str(CAFE_TRIO), "--brain", "openai/test-model", "--api-base", f"http://127.0.0.1:{port}/v1",
                 "--embedder", "lexical", "--runs-dir", str(tmp_path / "runs")])
    stderr = capsys.readouterr().err.strip()
    assert code == 1 and len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith(f"smallville: error: model 'openai/test-model' at http://127.0.0.1:{port}/v1 cannot "
                             "answer: connection: ")
    assert not (tmp_path / "runs").exists()


def test_keys_never_reach_the_run_or_the_output(tmp_path, llm):
    llm.fail("500", 3, match='"agent":"klaus_mueller","date"')
    settings = tmp_path / "brain.yaml"
    settings.write_text("echo_request: true\nbackoff: 0\ntimeout: 5\n")
    result = smallville("run", CAFE_TRIO, "--for", "1h", "--brain", "openai/test-model", "--api-base", llm.api_base,
                        "--brain-config", settings, "--embedder", "lexical", "--runs-dir", tmp_path / "runs",
                        env={"OPENAI_API_KEY": SECRET, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert f"Bearer {SECRET}" in [h.get("authorization") for h in llm.headers]     # the key was used
    assert "fallbacks" in result.stderr and "rate_importance" in result.stderr      # the usage summary
    (run_dir,) = (tmp_path / "runs").iterdir()
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in result.stdout + result.stderr


def test_an_llm_run_resumes_from_its_record_and_its_agents_can_be_interviewed(tmp_path, llm):
    from smallville.continuation import resume_run, simulate_to
    from smallville.replay.inspect import interview

    whole = run(tmp_path, config(llm), hours=3, name="whole")
    cut = run(tmp_path, config(llm), hours=2, name="cut")
    chats_before = llm.chats
    resumed = resume_run(cut.path, extend=3600)          # two hours from the record, one from the model
    assert resumed.manifest["status"] == "completed"
    assert (cut.path / "events.jsonl").read_bytes() == (whole.path / "events.jsonl").read_bytes()
    assert llm.chats > chats_before                       # the third hour was asked of the model
    sim = simulate_to(whole.path, 2 * 3600)
    asked = llm.chats
    reply = interview(sim, "isabella_rodriguez", "Do you know about a Valentine's Day party?")
    assert llm.chats == asked + 1                         # the interview went to the model; nothing else did
    assert reply["brain"] == "replay" and "Valentine's Day party" in reply["answer"]
    assert reply["memories"] and all("Valentine" in m["text"] for m in reply["memories"])
