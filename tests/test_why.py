"""`smallville why` and `Run.why`: every decision traced to the request it answered, the
memories that request recalled with their scores, and where each memory came from; a probe's
news followed back, teller by teller, to the seed memory of its source."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from smallville import events as ev
from smallville.brain.record import requests_of
from smallville.run import Run, run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, THE_VILLE


def smallville(*args):
    """The command line as a user runs it: a fresh process, a clean environment, no API key."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)], capture_output=True, text=True, env=env, timeout=300
    )


def log_of(path) -> list[dict]:
    return [json.loads(line) for line in (path / "events.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def ville(tmp_path_factory):
    """The default town, offline, into the second morning (plans of a day after the first)."""
    result = run_scenario(
        load_scenario(THE_VILLE), runs_dir=tmp_path_factory.mktemp("runs"), duration=25 * 3600, embedder="lexical"
    )
    return result.path


def told(log: list[dict]) -> tuple[int, dict]:
    """The first `learned` event (its line, from 1) of an agent told the news in a conversation."""
    memories = {(e["agent"], e["data"]["id"]): e for e in log if e["kind"] == ev.MEMORY}
    for n, e in enumerate(log, 1):
        memory = memories[e["agent"], e["data"]["memory"]]["data"] if e["kind"] == ev.LEARNED else {}
        if memory.get("kind") == "chat" and memory["speaker"] != e["agent"]:
            return n, e
    raise AssertionError("nobody was told a probe's news")


def test_every_decision_names_its_request_and_every_recall_is_of_memories_already_held(ville):
    log = log_of(ville)
    recalls = {(e["agent"], e["data"]["req"]): e for e in log if e["kind"] == ev.RECALL}
    held = set()
    for e in log:
        if e["kind"] == ev.MEMORY:
            held.add((e["agent"], e["data"]["id"]))
        if e["kind"] == ev.RECALL:
            for _, hits in e["data"]["queries"]:
                assert all((e["agent"], h[0]) in held for h in hits), e
                assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)  # best first
                for _, score, rec, imp, rel in hits:  # the paper's score, weights 1/1/1
                    assert score == pytest.approx(rec + imp + rel, abs=0.002)
    says = [e for e in log if e["kind"] == ev.SAY]
    assert says and all(recalls[e["agent"], e["data"]["req"]]["data"]["request"] == "speak" for e in says)
    plans = [e for e in log if e["kind"] == ev.PLAN]
    assert all(recalls[e["agent"], e["data"]["req"]]["data"]["request"] == "plan_day" for e in plans)
    actions = [e for e in log if e["kind"] == ev.ACTION]
    assert sum("req" in e["data"] for e in actions) > 0.9 * len(actions)
    whispered = {e["data"]["what"] for e in log if e["kind"] == ev.EVENT}  # a thought no request gave
    thoughts = [
        e
        for e in log
        if e["kind"] == ev.MEMORY
        and e["data"]["kind"] in ("thought", "reflection")
        and e["data"]["text"] not in whispered
    ]
    assert thoughts and all("req" in e["data"] for e in thoughts)


def told_account(run_dir) -> tuple[list[dict], int, dict, dict]:
    """The log, the first `learned` event of someone told a probe's news (its line and itself),
    and the account `smallville why --json` gives of it."""
    log = log_of(run_dir)
    line, learned = told(log)
    result = smallville("why", run_dir, "--agent", learned["agent"], "--event", line, "--json")
    assert result.returncode == 0, result.stderr
    return log, line, learned, json.loads(result.stdout)


def test_why_at_a_learned_event_names_the_teller_and_the_conversation_and_reaches_the_source_seed(ville):
    log, line, learned, account = told_account(ville)
    agent = learned["agent"]
    origin = account["memory"]["origin"]
    chat = next(
        e
        for e in log
        if e["kind"] == ev.MEMORY and e["agent"] == agent and e["data"]["id"] == learned["data"]["memory"]
    )
    assert origin["how"] == "told" and origin["by"] == chat["data"]["speaker"] != agent
    talk = log[origin["conversation"]["line"] - 1]
    assert talk["kind"] == ev.TALK_START and {talk["agent"], talk["data"]["with"]} == {agent, origin["by"]}
    assert origin["request"]["kind"] == "speak"  # what the teller recalled for the line
    source, *middle, last = account["chain"]
    assert last["agent"] == agent and last["from"] == origin["by"]
    assert source["source"] == "seed" and "from" not in source
    seed = next(
        e
        for e in log
        if e["kind"] == ev.MEMORY and e["agent"] == source["agent"] and e["data"]["id"] == source["memory"]
    )
    words = next(p.match for p in load_scenario(THE_VILLE).probes if p.name == learned["data"]["probe"])
    assert seed["data"]["kind"] == "seed" and all(w in seed["data"]["text"].lower() for w in words)
    text = smallville("why", ville, "--agent", agent, "--event", line)
    assert f"told by {origin['by']}" in text.stdout and "knew it from the start" in text.stdout


def test_why_probe_shows_the_chain_of_conversations_from_the_source(ville):
    log = log_of(ville)
    _, learned = told(log)
    probe, agent = learned["data"]["probe"], learned["agent"]
    result = smallville("why", ville, "--probe", probe, "--agent", agent, "--json")
    assert result.returncode == 0, result.stderr
    chain = json.loads(result.stdout)["chain"]
    assert chain[0]["source"] == "seed" and chain[-1]["agent"] == agent
    for before, hop in zip(chain, chain[1:]):  # each was told by the one before, after it learned
        assert hop["from"] == before["agent"] and hop["t"] >= before["t"]
        assert hop["via"] in ("recalled", "fresh")
    assert smallville("why", ville, "--probe", probe, "--agent", agent).stdout.startswith(f"How {agent} came to know")


def test_why_at_a_plan_lists_what_the_plan_was_shown_as_inspect_scores_it(ville):
    log = log_of(ville)
    plan = next(e for e in log if e["kind"] == ev.PLAN and e["t"] >= 86400)
    agent, time = plan["agent"], plan["time"][:16]
    account = Run.open(ville).why(agent, event=log.index(plan) + 1)
    assert account["kind"] == ev.PLAN and account["request"]["kind"] == "plan_day"
    (query,) = account["request"]["queries"]
    shown = [m["text"] for m in query["memories"] if m["shown"]]
    request = requests_of(ville)[account["request"]["key"]]
    assert shown and sorted(shown) == sorted(text for _, text in request["memories"])
    result = smallville("inspect", ville, "--agent", agent, "--at", time, "--query", query["query"], "--json")
    assert result.returncode == 0, result.stderr
    inspected = {m["id"]: m for m in json.loads(result.stdout)["recall"]}
    both = [m for m in query["memories"] if m["id"] in inspected]
    assert len(both) >= len(query["memories"]) // 2
    for m in both:  # recency may differ: the agent's summary, written first at that instant, touched some
        assert m["relevance"] == pytest.approx(inspected[m["id"]]["relevance"], abs=0.001)
        assert m["importance"] == pytest.approx(inspected[m["id"]]["importance"], abs=0.001)


def test_an_old_run_without_recall_records_says_so_in_one_line(ville, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for path in ville.iterdir():
        if path.name != "events.jsonl":
            (old / path.name).symlink_to(path)
    with open(old / "events.jsonl", "w", encoding="utf-8") as out:
        for e in log_of(ville):
            if e["kind"] != ev.RECALL:
                e["data"].pop("req", None)
                out.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
    result = smallville("why", old, "--agent", "maria_lopez", "--at", "2023-02-13 12:00")
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "before smallville recorded" in result.stderr
    _, learned = told(log_of(ville))
    probe = smallville("why", old, "--probe", learned["data"]["probe"], "--agent", learned["agent"])
    assert probe.returncode == 0 and "recall not recorded" in probe.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (["--agent", "nobody", "--at", "2023-02-13 12:00"], "unknown agent 'nobody'"),
        (["--agent", "maria_lopez", "--event", "99999999"], "is not in the log"),
        (["--agent", "maria_lopez"], "give --at TIME, --event N or --probe NAME"),
        (["--agent", "maria_lopez", "--probe", "rumour"], "no probe 'rumour'"),
        (["--agent", "maria_lopez", "--at", "yesterday"], "--at"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(ville, args, says):
    result = smallville("why", ville, *args)
    assert result.returncode == 2 and says in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_clock_time_alone_is_the_one_day_of_the_run_that_has_it(ville):
    """The run covers 2023-02-13 07:00 to 2023-02-14 08:00: 12:00 is the first day's, 06:00
    the second's, and 07:30 either: said in one line naming both days."""
    for short, full in (("12:00", "2023-02-13 12:00"), ("06:00", "2023-02-14 06:00")):
        by_clock = smallville("why", ville, "--agent", "Maria Lopez", "--at", short, "--json")
        assert by_clock.returncode == 0, by_clock.stderr
        assert by_clock.stdout == smallville("why", ville, "--agent", "maria_lopez", "--at", full, "--json").stdout
        assert json.loads(by_clock.stdout)["agent"] == "maria_lopez"
    both = smallville("why", ville, "--agent", "maria_lopez", "--at", "07:30")
    assert (both.returncode, both.stdout) == (2, "")
    assert both.stderr == (
        "smallville: error: --at: 07:30 falls on 2 days of the run (2023-02-13, 2023-02-14): "
        "give the day too, e.g. '2023-02-14 07:30'\n"
    )


def test_why_of_another_agents_event_is_refused(ville):
    log = log_of(ville)
    n = next(i for i, e in enumerate(log, 1) if e["agent"] not in (None, "maria_lopez"))
    result = smallville("why", ville, "--agent", "maria_lopez", "--event", n)
    assert result.returncode == 2 and "not maria_lopez's" in result.stderr


def test_metrics_report_each_probes_chain_depth_and_share_told_through_recall(ville):
    from smallville.metrics import run_metrics

    run = Run.open(ville)
    for probe, d in run_metrics(ville).diffusion.items():
        chains = [run.probe_chain(probe, a)["chain"] for a in d["end"]]
        tellings = [c[-1] for c in chains if "from" in c[-1]]
        assert d["depth"] == max(len(c) - 1 for c in chains) and d["tellings"] == len(tellings)
        assert d["recalled_share"] == round(sum(h["via"] == "recalled" for h in tellings) / len(tellings), 4)
    assert run_metrics(ville).diffusion["party"]["depth"] >= 1


# ---- a model's run (the test server on 127.0.0.1) -------------------------------------


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    """Two hours of cafe_trio answered by the test server, told to send everyone to talk and
    to pass on the party's news in what they say (its `gossip`)."""
    from smallville.brain import LLMConfig

    from llmserver import SOCIABLE, LLMServer

    scenario = load_scenario(CAFE_TRIO)
    with LLMServer(seed=scenario.seed, hang=60) as server:
        server.prefer = {**SOCIABLE, "where": "Hobbs Cafe"}
        server.news = tuple(next(p.match for p in scenario.probes if p.name == "party"))
        brain = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, timeout=60, retries=2)
        result = run_scenario(
            scenario,
            runs_dir=tmp_path_factory.mktemp("model"),
            duration=2 * 3600,
            brain=brain,
            embedder="lexical",
        )
    return result.path


def test_why_in_a_models_run_lists_what_each_line_and_plan_was_shown(model_run):
    log = log_of(model_run)
    record = requests_of(model_run)
    run = Run.open(model_run)
    for kind in (ev.PLAN, ev.SAY):
        n, e = next((n, e) for n, e in enumerate(log, 1) if e["kind"] == kind)
        result = smallville("why", model_run, "--agent", e["agent"], "--event", n, "--json")
        assert result.returncode == 0, result.stderr
        account = json.loads(result.stdout)
        assert account == json.loads(json.dumps(run.why(e["agent"], event=n)))  # the CLI's is Run.why's
        request = record[account["request"]["key"]]
        listed = [m for q in account["request"]["queries"] for m in q["memories"]]
        shown = {m["text"] for m in listed if m["shown"]}
        assert shown and shown == {item[1] for item in request["memories"]}


def test_why_in_a_models_run_follows_news_back_through_the_teller_to_the_source_seed(model_run):
    """A model passed on the party's news: `why` at the listener's `learned` event names who
    told it and in which conversation, and its chain reaches the seed memory of the source."""
    log, line, learned, account = told_account(model_run)
    agent = learned["agent"]
    origin = account["memory"]["origin"]
    assert origin["how"] == "told" and origin["by"] != agent
    said = log[origin["said"]["line"] - 1]
    assert said["kind"] == ev.SAY and said["agent"] == origin["by"] and said["data"]["to"] == agent
    assert "valentine" in said["data"]["text"].lower()
    talk = log[origin["conversation"]["line"] - 1]
    assert talk["kind"] == ev.TALK_START and {talk["agent"], talk["data"]["with"]} == {agent, origin["by"]}
    assert talk["t"] <= said["t"] <= learned["t"]
    assert origin["request"]["kind"] == "speak"
    source, *_, last = account["chain"]
    assert last["agent"] == agent and last["from"] == origin["by"]
    assert source["source"] == "seed" and source["agent"] == origin["by"] == "isabella_rodriguez"
    seed = next(
        e
        for e in log
        if e["kind"] == ev.MEMORY and e["agent"] == source["agent"] and e["data"]["id"] == source["memory"]
    )
    assert seed["data"]["kind"] == "seed" and "valentine's day party" in seed["data"]["text"].lower()
    text = smallville("why", model_run, "--agent", agent, "--event", line).stdout
    assert f"told by {origin['by']} in the conversation" in text and "knew it from the start" in text
