"""The LLM brain end to end: litellm over HTTP to a local OpenAI-compatible server
(tests/llmserver.py) that gets exactly the prompts a model would, answers each with a valid
instance of the schema it was sent, and fails on request. No API key is in the environment
unless a test puts one there: a server of one's own needs none."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from smallville.brain import LLMConfig, make_brain
from smallville.brain import requests as rq
from smallville.errors import BrainError
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT
from llmserver import FAILURES, SOCIABLE, LLMServer

SECRET = "sk-test-secret"
KLAUS = r"Character: Klaus Mueller \("  # his ratings' and summaries' prompts (a pattern)
KLAUS_PLAN = r"(?s)^Klaus Mueller \(.*Usual routine"  # his day plan's


@pytest.fixture
def llm(monkeypatch):
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with LLMServer(seed=load_scenario(CAFE_TRIO).seed, hang=60) as server:
        yield server


def config(server, **settings) -> LLMConfig:
    return LLMConfig(
        **{
            "model": "openai/test-model",
            "api_base": server.api_base,
            "backoff": 0.0,
            "timeout": 60,
            "retries": 2,
            **settings,
        }
    )


def run(tmp_path, brain, hours=2, name="runs", **kw):
    return run_scenario(
        load_scenario(CAFE_TRIO), runs_dir=tmp_path / name, duration=hours * 3600, brain=brain, embedder="lexical", **kw
    )


def events(result) -> list[dict]:
    return [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]


def test_a_run_sends_the_real_prompts_with_no_key_and_accounts_for_every_call(tmp_path, llm):
    llm.prefer = {**SOCIABLE, "where": "Hobbs Cafe"}  # a model that sends everyone to the cafe to talk
    result = run(tmp_path, config(llm))
    m = result.manifest
    assert m.status == "completed" and m.brain["model"] == "openai/test-model"
    usage = m.usage["total"]
    wasted = m.usage["run_ahead"]["unused"]  # fetched ahead of the clock, never asked for
    assert usage["requests"] - wasted == sum(m.requests.values()) > 30
    assert usage["calls"] == llm.chats and m.usage["by_kind"]["preflight"]["calls"] == 1
    assert usage["prompt_tokens"] == sum(u["prompt_tokens"] for u in llm.usages)  # the server's own count
    assert usage["retries"] == usage["fallbacks"] == 0
    assert set(m.usage["by_agent"]) == set(m.agents)
    assert {h.get("authorization") for h in llm.headers} == {"Bearer no-key-needed"}  # a placeholder, no key
    assert llm.prompts[1]["mode"] == "json_schema" and "REQUEST_JSON" not in llm.prompts[1]["user"]
    recorded = (result.path / "answers.jsonl").read_text().splitlines()
    assert len(recorded) == usage["requests"] - wasted and all(json.loads(line)["key"] for line in recorded)
    # What a model is told: who it speaks for, their day, what they remember and what was said.
    plans = set(llm.prompts_of("plan_day"))  # (a call run-ahead made twice, under load, is one prompt)
    assert len(plans) == 3 and all("It is Monday, February 13, 2023, 07:00." in p for p in plans)
    assert any("Isabella Rodriguez" in p and "Valentine's Day party" in p for p in plans)  # her persona, memories
    rated = "\n".join(llm.prompts_of("rate_importance"))
    stored = [e["data"]["text"] for e in events(result) if e["kind"] == "memory" and e["data"]["kind"] == "observation"]
    assert stored and all(text in rated for text in stored)
    said = [e for e in events(result) if e["kind"] == "say"]
    speaks = llm.prompts_of("speak")
    assert len(said) >= 4
    answered, last = [], {}  # lines answered in their conversation (each pair's last line)
    for e in (e for e in events(result) if e["kind"] in ("say", "talk_end")):
        pair = frozenset((e["agent"], e["data"].get("to") or e["data"]["with"]))
        if e["kind"] == "talk_end":
            last.pop(pair, None)
            continue
        if pair in last:
            answered.append(last[pair])
        last[pair] = e
    assert answered
    for line in answered:
        assert any(line["data"]["text"] in p for p in speaks), line  # each line is quoted to whoever answers it


def test_answers_that_follow_the_schema_are_never_retried_in_a_25_agent_hour(tmp_path, llm):
    """A server that answers every request with a random valid instance of its schema, as
    any constrained decoder may: no retries, no fallbacks, and what the schema cannot say is
    repaired in the open."""
    from conftest import THE_VILLE

    result = run_scenario(
        load_scenario(THE_VILLE), runs_dir=tmp_path, duration=3600, brain=config(llm), embedder="lexical"
    )
    total = result.manifest.usage["total"]
    assert result.manifest.status == "completed" and total["calls"] > 100
    assert total["retries"] == total["fallbacks"] == 0
    log = events(result)
    assert not [e for e in log if e["kind"] == "brain_fallback"]
    repairs = [e for e in log if e["kind"] == "brain_repair"]
    assert {e["data"]["kind"] for e in repairs} >= {"plan_day"} and all(e["data"]["repairs"] for e in repairs)
    for plan in (e for e in log if e["kind"] == "plan"):  # every plan the engine took is in order
        blocks = plan["data"]["blocks"]
        assert all(a[1] <= b[0] for a, b in zip(blocks, blocks[1:])), plan


@pytest.mark.parametrize("mode", FAILURES)
def test_each_failure_is_retried_then_falls_back_and_is_accounted(tmp_path, llm, mode):
    llm.fail(mode, 3, match=KLAUS)  # every attempt of Klaus's first request
    result = run(tmp_path, config(llm, timeout=1.0 if mode == "hang" else 60), hours=0.25)
    assert result.manifest.status == "completed"
    (fallback,) = [e for e in events(result) if e["kind"] == "brain_fallback"]
    assert fallback["agent"] == "klaus_mueller" and fallback["data"]["kind"] == "rate_importance"
    reason = {
        "429": "rate_limit",
        "500": "server",
        "hang": "timeout",
        "invalid_json": "bad_json",
        "schema": "schema",
        "cutoff": "bad_json",
    }[mode]
    assert fallback["data"]["error"].startswith(reason + ": ") and len(fallback["data"]["key"]) == 16
    klaus = result.manifest.usage["by_agent"]["klaus_mueller"]
    total = result.manifest.usage["total"]
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
    answers = brain.answer([rq.RateImportance("klaus_mueller", "Klaus Mueller", ("a paper is due",))])
    assert isinstance(answers[0], rq.Importance) and not answers.fallbacks
    assert waits == [7.0, 7.0]  # Retry-After beats the backoff of 0.5 and 1.0 s
    llm.retry_after = None
    llm.fail("429", 1)
    brain.answer([rq.RateImportance("klaus_mueller", "Klaus Mueller", ("lunch",))])
    assert waits[2:] == [0.5]  # no header: the backoff


def test_a_fifth_of_calls_failing_still_completes_with_every_failure_accounted(tmp_path, llm):
    llm.fail_rate(0.2, [m for m in FAILURES if m != "hang"])  # hangs: in the test above
    result = run(tmp_path, config(llm, max_concurrency=4), hours=24)  # cafe_trio, a whole simulated day
    assert result.manifest.status == "completed"
    usage = result.manifest.usage["total"]
    injected = sum(llm.injected.values())
    assert injected > 10 and usage["retries"] + usage["fallbacks"] == injected
    wasted = result.manifest.usage["run_ahead"]["unused_fallbacks"]  # fetched ahead, never asked for
    assert sum(e["kind"] == "brain_fallback" for e in events(result)) == usage["fallbacks"] - wasted


def test_requests_of_one_batch_are_in_flight_together_and_come_back_in_order(llm):
    llm.hold_for = 8  # no answer until all eight calls have arrived
    brain = make_brain(config(llm, max_concurrency=8), 1)
    batch = [
        rq.RateImportance(f"agent{i}", f"Agent {i}", tuple(f"memory {j} of agent {i}" for j in range(i + 1)))
        for i in range(8)
    ]
    answers = brain.answer(batch)
    assert llm.max_in_flight == 8
    assert [len(a.scores) for a in answers] == list(range(1, 9)) and not answers.fallbacks


def test_record_then_replay_with_the_server_stopped_is_byte_identical(tmp_path, llm):
    llm.fail("500", 3, match=KLAUS_PLAN)  # Klaus's day plan falls back
    recorded = run(tmp_path, config(llm), hours=2)
    assert any(e["kind"] == "brain_fallback" for e in events(recorded))
    llm.stop()
    replayed = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path)
    assert replayed.manifest.status == "completed" and replayed.manifest.brain["name"] == "replay"
    assert (replayed.path / "events.jsonl").read_bytes() == (recorded.path / "events.jsonl").read_bytes()


def test_a_request_missing_from_the_record_is_named(tmp_path):
    recorded = run(tmp_path, "offline", hours=1)
    lines = (recorded.path / "answers.jsonl").read_text().splitlines()
    missing = json.loads(lines[-1])
    (recorded.path / "answers.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(BrainError, match=f"request {missing['key']} \\({missing['kind']} asked by"):
        run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path)
    fell = run_scenario(
        load_scenario(CAFE_TRIO), runs_dir=tmp_path / "replay", replay_from=recorded.path, replay_fallthrough=True
    )
    assert (fell.path / "events.jsonl").read_bytes() == (recorded.path / "events.jsonl").read_bytes()


def test_a_cache_shared_across_runs_answers_without_calls(tmp_path, llm):
    first = run(tmp_path, config(llm), hours=1, cache=tmp_path / "cache")
    calls = llm.chats
    second = run(tmp_path, config(llm), hours=1, cache=tmp_path / "cache", name="again")
    assert llm.chats == calls + 1  # the preflight only
    assert second.manifest.usage["total"]["cached"] == second.manifest.usage["total"]["requests"]
    assert (first.path / "events.jsonl").read_bytes() == (second.path / "events.jsonl").read_bytes()


def test_settings_from_a_config_file_and_embeddings_through_litellm(tmp_path, llm):
    settings = tmp_path / "brain.yaml"
    settings.write_text(
        f"model: openai/test-model\napi_base: {llm.api_base}\nbackoff: 0\n"
        "structured: json_object\nembedding_model: openai/test-embed\nmax_concurrency: 2\n"
        "price: {prompt: 0.000001, completion: 0.000002}\n"
    )
    result = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "runs", duration=3600, brain_config=settings)
    m = result.manifest
    assert m.status == "completed" and m.embedder["name"] == "litellm:openai/test-embed" and llm.embeddings
    assert m.brain["structured"] == "json_object" and m.usage["cost_known"]
    total = m.usage["total"]
    assert total["cost"] == pytest.approx(total["prompt_tokens"] * 1e-6 + total["completion_tokens"] * 2e-6, rel=1e-3)
    chat = next(b for b in llm.bodies if "messages" in b and "Character:" in b["messages"][-1]["content"])
    schema = chat["response_format"]["schema"]
    assert chat["response_format"]["type"] == "json_object"
    assert json.dumps(schema, separators=(",", ":")) in chat["messages"][-1]["content"]  # and in the prompt
    settings.write_text("model: openai/x\napi_key: sk-nope\n")
    with pytest.raises(BrainError, match="not a setting"):
        run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "runs", brain_config=settings)
    settings.write_text("model: openai/x\ntemprature: 0.2\n")
    with pytest.raises(BrainError, match="unknown brain setting 'temprature'"):
        run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path / "runs", brain_config=settings)


def smallville(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_an_unreachable_model_stops_the_run_in_one_line(tmp_path, capsys, llm):
    from smallville.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(
        [
            "run",
            str(CAFE_TRIO),
            "--brain",
            "openai/test-model",
            "--api-base",
            f"http://127.0.0.1:{port}/v1",
            "--embedder",
            "lexical",
            "--runs-dir",
            str(tmp_path / "runs"),
        ]
    )
    stderr = capsys.readouterr().err.strip()
    assert code == 1 and len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith(
        f"smallville: error: model 'openai/test-model' at http://127.0.0.1:{port}/v1 cannot answer: connection: "
    )
    assert not (tmp_path / "runs").exists()


def test_a_model_run_and_a_state_rebuilt_from_it_leave_no_threads_running(tmp_path, llm):
    """A model run ends the threads that sent its calls; so does closing the state rebuilt
    from its record, whose model answers what the record lacks."""
    from smallville.run import simulate_to

    from conftest import smallville_threads

    before = smallville_threads()
    done = run(tmp_path, config(llm), hours=1)
    assert smallville_threads() - before == set()
    with simulate_to(done.path) as sim:
        asked = llm.chats
        agent = sim.agents["klaus_mueller"]
        questions = ("Where are you?", "What are you doing next?")  # not in the record: a batch for the model
        sim.brain.answer([rq.Interview(agent.id, agent.name, agent.persona(), q, ()) for q in questions])
        assert llm.chats == asked + 2
        assert {t.name.split("_")[0] for t in smallville_threads() - before} == {"smallville-llm"}
    assert smallville_threads() - before == set()


def test_keys_never_reach_the_run_or_the_output(tmp_path, llm):
    llm.fail("500", 3, match=KLAUS_PLAN)
    settings = tmp_path / "brain.yaml"
    settings.write_text("backoff: 0\n")
    result = smallville(
        "run",
        CAFE_TRIO,
        "--for",
        "1h",
        "--brain",
        "openai/test-model",
        "--api-base",
        llm.api_base,
        "--brain-config",
        settings,
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path / "runs",
        env={"OPENAI_API_KEY": SECRET, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    assert f"Bearer {SECRET}" in [h.get("authorization") for h in llm.headers]  # the key was used
    assert "fallbacks" in result.stderr and "rate_importance" in result.stderr  # the usage summary
    (run_dir,) = (tmp_path / "runs").iterdir()
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in result.stdout + result.stderr


def test_an_llm_run_resumes_from_its_record_and_its_agents_can_be_interviewed(tmp_path, llm):
    from smallville.mind import interview
    from smallville.run import resume_run, simulate_to

    whole = run(tmp_path, config(llm), hours=3, name="whole")
    cut = run(tmp_path, config(llm), hours=2, name="cut")
    chats_before = llm.chats
    resumed = resume_run(cut.path, extend=3600)  # two hours from the record, one from the model
    assert resumed.manifest.status == "completed"
    assert (cut.path / "events.jsonl").read_bytes() == (whole.path / "events.jsonl").read_bytes()
    assert llm.chats > chats_before  # the third hour was asked of the model
    sim = simulate_to(whole.path, 2 * 3600)
    asked = llm.chats
    reply = interview(sim, "isabella_rodriguez", "Do you know about a Valentine's Day party?")
    assert llm.chats == asked + 1  # the interview went to the model; nothing else did
    (prompt,) = llm.prompts_of("interview")
    assert "Do you know about a Valentine's Day party?" in prompt and "Isabella Rodriguez" in prompt
    assert reply["brain"] == "replay" and reply["answer"]
    assert prompt.count("Valentine") >= 2  # the question, and a memory it brought back
    assert all(m["text"] in prompt for m in reply["memories"])  # it cites only what it was shown


def test_each_request_kind_gets_its_own_max_tokens_and_temperature(llm):
    """A day plan needs more room than a rating, a rating batch more the more memories it
    rates; dialogue varies and ratings do not. `kinds:` overrides one kind, a top-level
    setting every other."""
    from smallville.brain.llm import LLMBrain

    plan = rq.PlanDay(
        "ann", "Ann Lee", "Ann is a baker.", "Monday, February 13, 2023", ((420, "wake up", ""),), (), ("Ann's home",)
    )
    ratings = [rq.RateImportance("ann", "Ann Lee", (f"Ann is baking loaf {i}",)) for i in range(1, 11)]
    speak = rq.Speak("ann", "Ann Lee", "bob", "Bob", "", (), (), ())

    def sent(batch, **settings):
        brain = LLMBrain(config(llm, preflight=False, **settings))
        try:
            before = len(llm.bodies)
            brain.answer(batch)
            return [
                (b["response_format"]["json_schema"]["name"], b["max_tokens"], b["temperature"])
                for b in llm.bodies[before:]
            ]
        finally:
            brain.close()

    default = {kind: (limit, heat) for kind, limit, heat in sent([plan, ratings[0], speak])}
    assert default["plan_day"][0] > 1000 > default["speak"][0]
    assert default["speak"][1] > default["rate_importance"][1] == 0
    one, ten = (
        sent([r])[0][1]
        for r in (
            rq.RateImportance("ann", "Ann Lee", ("x",)),
            rq.RateImportance("ann", "Ann Lee", tuple(f"x{i}" for i in range(10))),
        )
    )
    assert one < ten
    chosen = sent(
        [plan, ratings[1], speak],
        max_tokens=900,
        temperature=0.2,
        kinds={"plan_day": {"max_tokens": 2500, "temperature": 1.0}},
    )
    assert sorted(chosen) == [("plan_day", 2500, 1.0), ("rate_importance", 900, 0.2), ("speak", 900, 0.2)]
    with pytest.raises(BrainError, match="kinds.plan: unknown request kind"):
        config(llm, kinds={"plan": {"max_tokens": 10}})
    with pytest.raises(BrainError, match=r"kinds.speak.top_p: unknown"):
        config(llm, kinds={"speak": {"top_p": 0.9}})


def test_a_brain_taking_a_run_over_knows_its_ratings_from_the_record(tmp_path, llm):
    from smallville.brain.kinds import REQUEST_KINDS
    from smallville.brain.record import requests_of, teach

    recorded = run(tmp_path, config(llm), hours=1)
    record = recorded.path / "answers.jsonl"
    answers = {e["key"]: e["answer"] for e in map(json.loads, record.read_text().splitlines())}
    ratings = [(k, r) for k, r in requests_of(recorded.path).items() if r["kind"] == "rate_importance"]
    assert ratings and all(any(len(t) >= 20 for t in r["texts"]) for _, r in ratings)
    brain = make_brain(config(llm), seed=1)
    teach(brain, recorded.path, record.stat().st_size)  # as a resume does: the texts read back whole
    calls = llm.chats
    got = brain.answer([REQUEST_KINDS["rate_importance"].from_dict(r) for _, r in ratings])
    assert llm.chats == calls  # each rating came from what the record taught
    assert [a.to_dict() for a in got] == [answers[k] for k, _ in ratings]
    brain.close()
