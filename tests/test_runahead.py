"""Run-ahead (sim/runahead.py): requests fetched ahead of the clock by copies of the
simulation built from its state, with the outcome of the in-order run, byte for byte."""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import FIRST_COMPLETED, wait

import pytest

from smallville.brain import LLMConfig
from smallville.run import run_scenario
from smallville.scenario import load_scenario
from smallville.sim import SimConfig

from conftest import ROOT
from llmserver import SOCIABLE, LLMServer

THE_VILLE = ROOT / "scenarios" / "the_ville.yaml"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # A model whose people keep to where they are and act in 5-15 minute steps: copies of
    # the town can run far ahead of one who waits, as they do when people keep apart.
    with LLMServer(seed=load_scenario(THE_VILLE).seed, prefer={"minutes": SOCIABLE["minutes"], "where": ""}) as s:
        yield s


def town_hour(tmp_path, server, name, config=None, duration=3600, embedder="lexical", **settings):
    brain = LLMConfig(
        model="openai/test-model", api_base=server.api_base, preflight=False, max_concurrency=16, **settings
    )
    return run_scenario(
        load_scenario(THE_VILLE),
        runs_dir=tmp_path / name,
        duration=duration,
        brain=brain,
        embedder=embedder,
        config=config,
    )


def test_the_town_run_ahead_writes_exactly_the_in_order_run(tmp_path, server, monkeypatch):
    """The server holds the first breaking down of a block into actions that one agent asks
    for, at minute N of the day, so the run cannot pass minute N. A breaking down asked for
    minute N + 10 or later can then reach the server only by run-ahead. Once one has, the
    held answer goes out, and the run ends as the in-order run did."""
    in_order = town_hour(tmp_path, server, "in_order", lookahead=0)
    calls_in_order, first = server.chats, len(server.bodies)
    (prompt, _), *_ = decompositions(server.bodies)  # the first breaking down the town asked for
    held = prompt.split("\n", 1)[0] + "\nIt is "  # "NAME (AGE): TRAITS. Currently: ...\nIt is "

    def asked_ten_minutes_later(s) -> bool:
        asked = decompositions(s.bodies[first:])
        mine = [minute for prompt, minute in asked if held in prompt]
        return bool(s.held) and any(minute >= mine[0] + 10 for _, minute in asked)

    ahead, later = hour_holding(tmp_path, server, held, asked_ten_minutes_later)
    assert later, decompositions(server.bodies[first:])
    assert server.held == 1
    for name in ("events.jsonl", "answers.jsonl"):
        assert (ahead.path / name).read_bytes() == (in_order.path / name).read_bytes(), name
    assert sorted(p.name for p in ahead.path.iterdir()) == sorted(p.name for p in in_order.path.iterdir())
    stats = ahead.manifest.usage["run_ahead"]
    assert "run_ahead" not in in_order.manifest.usage
    assert stats["copies"] > 0 and stats.get("failed_copies", 0) == 0
    assert stats["copies_cpu_us"] > 0 and stats["snapshots_cpu_us"] > 0  # where run-ahead's CPU went
    assert stats["most_ahead_s"] >= 600
    assert stats["guessed_ratings"] > 0  # agents went on past ratings still to come
    # A copy can guess wrong (in the order agents act within one instant, which a missing
    # agent can change): such a call is wasted, never used. How many is a matter of timing
    # (benchmarks/llm_brain.py reports it); every other call is one the in-order run made.
    calls = ahead.manifest.usage["total"]["calls"]
    assert stats["sent"] - stats["unused"] == in_order.manifest.usage["total"]["requests"]
    assert server.chats - calls_in_order == calls >= calls_in_order


def test_copies_go_on_when_the_run_took_their_answers_and_waits_in_the_same_tick(tmp_path, server, monkeypatch):
    """Answers come in the order worst for run-ahead: a batch's answers land together, and
    only once no copy can run. The in-order run then takes the answers a copy stopped for
    before that copy can be made again, and goes on in the same tick (the start, where the
    town is one group) to a breaking down the server holds. A copy must still be made
    again and run ahead of the held call: the run never waits with no copy going."""
    from smallville.sim import runahead

    in_order = town_hour(tmp_path, server, "in_order", lookahead=0)
    first = len(server.bodies)
    (prompt, start), *_ = decompositions(server.bodies)
    held = prompt.split("\n", 1)[0] + "\nIt is "
    dispatchers: list = []
    made = runahead.RunAheadDispatcher.__init__

    def noted(self, *args, **kwargs):
        made(self, *args, **kwargs)
        dispatchers.append(self)

    collect = runahead.Ahead.collect

    def late(self) -> int:
        """Nothing lands while a copy can run; then every call not held lands at once."""
        cap = 2 * self.concurrency
        copies = dispatchers[-1].copies
        if self.lookahead > 0 and len(self.flight) < cap and (not copies or any(not c.finished for c in copies)):
            return 0
        while sum(not f.done() for f in self.flight.values()) > server.held:
            wait([f for f in self.flight.values() if not f.done()], timeout=0.05, return_when=FIRST_COMPLETED)
        return collect(self)

    monkeypatch.setattr(runahead.RunAheadDispatcher, "__init__", noted)
    monkeypatch.setattr(runahead.Ahead, "collect", late)
    ahead, later = hour_holding(
        tmp_path,
        server,
        held,
        lambda s: bool(s.held) and any(minute > start for _, minute in decompositions(s.bodies[first:])),
    )
    assert later, decompositions(server.bodies[first:])
    assert server.held == 1
    assert (ahead.path / "events.jsonl").read_bytes() == (in_order.path / "events.jsonl").read_bytes()


def hour_holding(tmp_path, server, held: str, asked_later):
    """The town's hour with run-ahead while the server holds the answers of prompts that hold
    `held`, until `asked_later(server)` (for 300 s at most: a bound for a test that fails);
    the run, and whether that came."""
    server.hold(held)
    seen = {}

    def release_once_asked_later():
        seen["later"] = server.wait_for(asked_later, timeout=300)
        server.release()

    watcher = threading.Thread(target=release_once_asked_later)
    watcher.start()
    try:
        ahead = town_hour(tmp_path, server, "ahead", lookahead=3600, timeout=600)
    finally:
        server.release()
        watcher.join()
    return ahead, seen["later"]


def decompositions(bodies) -> list[tuple[str, int]]:
    """(prompt, minute of the day it was asked at) of each request to break a block down."""
    prompts = [b["messages"][-1]["content"] for b in list(bodies) if "messages" in b]
    return [
        (p, int(m.group(1)) * 60 + int(m.group(2)))
        for p in prompts
        if (m := re.search(r"The block: .*, from (\d\d):(\d\d) to \d\d:\d\d", p))
    ]


def test_run_ahead_survives_failing_calls_and_accounts_for_each(tmp_path, server):
    server.fail_rate(0.2)
    result = town_hour(tmp_path, server, "flaky", lookahead=3600, retries=1, backoff=0.0, timeout=0.5)
    m = result.manifest
    assert m.status == "completed"
    fallbacks = [
        json.loads(line)
        for line in (result.path / "events.jsonl").read_text().splitlines()
        if '"brain_fallback"' in line
    ]
    wasted = m.usage["run_ahead"]["unused_fallbacks"]  # fetched ahead, never asked for
    assert len(fallbacks) == m.usage["total"]["fallbacks"] - wasted > 0
    assert m.usage["total"]["retries"] > 0
    recorded = [json.loads(line) for line in (result.path / "answers.jsonl").read_text().splitlines()]
    assert sum("fallback" in r for r in recorded) == len(fallbacks)


def test_copies_that_break_are_given_up_and_the_run_goes_on_in_order(tmp_path, server, monkeypatch):
    from smallville.sim import runahead

    in_order = town_hour(tmp_path, server, "in_order", lookahead=0)

    def broken(self, *args):
        raise RuntimeError("a copy that cannot go on")

    monkeypatch.setattr(runahead.Copy, "run", broken)
    broke = town_hour(tmp_path, server, "broke", lookahead=3600)
    assert (broke.path / "events.jsonl").read_bytes() == (in_order.path / "events.jsonl").read_bytes()
    stats = broke.manifest.usage["run_ahead"]
    assert stats["failed_copies"] == runahead.FAILURES <= stats["copies"]  # then run-ahead gave up


def test_run_ahead_needs_no_fork(tmp_path, server, monkeypatch):
    """Copies are built from the simulation's state in the same process: a platform without
    os.fork runs ahead as well, and writes the in-order run."""
    in_order = town_hour(tmp_path, server, "in_order", lookahead=0)
    monkeypatch.delattr("os.fork", raising=False)
    ahead = town_hour(tmp_path, server, "ahead", lookahead=3600)
    assert (ahead.path / "events.jsonl").read_bytes() == (in_order.path / "events.jsonl").read_bytes()
    stats = ahead.manifest.usage["run_ahead"]
    assert stats["copies"] > 0 and stats["most_ahead_s"] > 0 and stats.get("failed_copies", 0) == 0


def test_run_ahead_with_the_use_embedder_in_its_process_writes_the_in_order_run(tmp_path, server):
    """USE embeds in a process of its own beside the run: the copies' memories go there too
    and are read when their searches need them. The run writes the in-order run's events and
    its record of embeddings, byte for byte: the copies embed through a cache of their own
    (a USE row depends on the texts asked with it, and the copies ask others together)."""
    from smallville.embed.record import EmbeddingRecord

    in_order = town_hour(tmp_path, server, "in_order", duration=1800, embedder="use", lookahead=0)
    ahead = town_hour(tmp_path, server, "ahead", duration=1800, embedder="use")
    assert ahead.manifest.usage["run_ahead"]["copies"] > 0
    assert ahead.manifest.embedder["name"] == "use-multilingual-v3"
    assert (ahead.path / "events.jsonl").read_bytes() == (in_order.path / "events.jsonl").read_bytes()
    texts = [json.loads(line) for line in (in_order.path / "embeddings" / "texts.jsonl").read_text().splitlines()]
    mine, theirs = EmbeddingRecord(ahead.path / "embeddings"), EmbeddingRecord(in_order.path / "embeddings")
    assert texts and all(mine.get(t) is not None and (mine.get(t) == theirs.get(t)).all() for t in texts)
    for name in ("texts.jsonl", "vectors.f32"):
        assert (ahead.path / "embeddings" / name).read_bytes() == (in_order.path / "embeddings" / name).read_bytes()


def test_resumed_and_forked_model_runs_fetch_ahead_and_write_the_in_order_run(tmp_path, server):
    """A model run extended by `resume`, and a fork of it that changes nothing, go on from a
    checkpoint with run-ahead, as fresh runs do, and write what one in-order run wrote."""
    from smallville.run import fork_run, resume_run

    in_order = town_hour(tmp_path, server, "in_order", lookahead=0)
    brain = LLMConfig(
        model="openai/test-model", api_base=server.api_base, preflight=False, max_concurrency=16, lookahead=3600
    )
    half = run_scenario(
        load_scenario(THE_VILLE), runs_dir=tmp_path / "half", duration=1800, brain=brain, embedder="lexical"
    )
    forks_before = half.manifest.usage["run_ahead"]["copies"]
    longer = resume_run(half.path, extend=1800)
    assert longer.manifest.resumed[-1]["restored"] == "2023-02-13 07:30:00"  # the run's last checkpoint
    assert longer.manifest.usage["run_ahead"]["copies"] > forks_before
    forked = fork_run(longer.path, 2700, runs_dir=tmp_path / "fork")
    assert forked.manifest.fork["restored"] == "2023-02-13 07:30:00"  # then on to 07:45
    assert forked.manifest.usage["run_ahead"]["copies"] > 0
    for run in (longer, forked):
        assert (run.path / "events.jsonl").read_bytes() == (in_order.path / "events.jsonl").read_bytes(), run.path


# ---- under the salience memory model ----------------------------------------------------


@pytest.fixture(scope="module")
def salient_server():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPENAI_API_KEY", raising=False)
        mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        with LLMServer(seed=load_scenario(THE_VILLE).seed, prefer={"minutes": SOCIABLE["minutes"], "where": ""}) as s:
            yield s


@pytest.fixture(scope="module")
def salient_in_order(tmp_path_factory, salient_server):
    """The town's hour under the salience model, in order."""
    return town_hour(
        tmp_path_factory.mktemp("salient"), salient_server, "in_order", SimConfig(memory="salience"), lookahead=0
    )


def test_a_salience_town_run_ahead_guesses_tags_and_writes_the_in_order_run(tmp_path, salient_server, salient_in_order):
    """An agent whose tags have not come goes on tagged at the top (copies.Copy): the run is
    the in-order run byte for byte, though the model's tags often keep less than the guess."""
    ahead = town_hour(tmp_path, salient_server, "ahead", SimConfig(memory="salience"), lookahead=3600)
    for name in ("events.jsonl", "answers.jsonl"):
        assert (ahead.path / name).read_bytes() == (salient_in_order.path / name).read_bytes(), name
    stats = ahead.manifest.usage["run_ahead"]
    assert stats["copies"] > 0 and stats.get("failed_copies", 0) == 0
    assert stats["guessed_tags"] > 0 and "guessed_ratings" not in stats
    assert stats["sent"] - stats["unused"] == salient_in_order.manifest.usage["total"]["requests"]
    logged = [json.loads(line) for line in (ahead.path / "events.jsonl").read_text().splitlines()]
    memories = [e["data"] for e in logged if e["kind"] == "memory" and e["data"]["source"] != "given"]
    assert any(m["id"] is None for m in memories)  # forgotten: kept in a copy that guessed, if guessed


def test_a_salience_run_ahead_resumed_from_its_checkpoint_writes_the_in_order_run(
    tmp_path, salient_server, salient_in_order
):
    """The consolidation draws taken (part of each agent's state) come back from a
    checkpoint: a half hour with run-ahead, resumed for the other half, is the in-order hour."""
    from smallville.run import resume_run

    half = town_hour(tmp_path, salient_server, "half", SimConfig(memory="salience"), duration=1800, lookahead=3600)
    longer = resume_run(half.path, extend=1800)
    assert longer.manifest.resumed[-1]["restored"] == "2023-02-13 07:30:00"
    assert longer.manifest.usage["run_ahead"]["guessed_tags"] > half.manifest.usage["run_ahead"]["guessed_tags"]
    assert (longer.path / "events.jsonl").read_bytes() == (salient_in_order.path / "events.jsonl").read_bytes()
