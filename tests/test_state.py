"""A run's state is data: every checkpoint brings the town back exactly, in the middle of
whatever each agent was doing, so resume, fork, inspect and interview start from one and
`verify` is the separate proof that a run reproduces."""

from __future__ import annotations

import io
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter

import pytest

from smallville.brain import make_brain
from smallville.checkpoint import checkpoints, digest, load_state, restore
from smallville.checkpoint.parts import Twists
from smallville.embed import make_embedder
from smallville.run import run_scenario
from smallville.scenario import load_scenario
from smallville.sim import SimConfig, Simulation
from smallville.sim.log import EventLog

from conftest import CAFE_TRIO, ROOT, THE_VILLE


@pytest.fixture(scope="module")
def ville_day(tmp_path_factory):
    """The default town for 26 hours with a checkpoint every 15 simulated minutes."""
    scenario = load_scenario(THE_VILLE)
    return run_scenario(
        scenario, runs_dir=tmp_path_factory.mktemp("runs"), duration=26 * 3600, embedder="lexical", checkpoint_every=900
    )


def restored(result, checkpoint, out):
    scenario = load_scenario(THE_VILLE)
    seed = result.manifest.seed
    sim = Simulation(
        scenario,
        make_brain("offline", seed),
        make_embedder("lexical"),
        seed=seed,
        config=SimConfig.from_dict(result.manifest.config),
        log=EventLog(scenario.start, out),
    )
    restore(sim, result.path, checkpoint)
    return sim


def test_every_checkpoint_brings_back_the_run_that_followed_it(ville_day):
    events = (ville_day.path / "events.jsonl").read_bytes()
    saved = checkpoints(ville_day.path)
    assert len(saved) == 104
    before = None
    for here, there in zip(saved, saved[1:]):
        out = io.StringIO()
        sim = restored(ville_day, here, out)
        assert digest(sim.get_state()) == here.digest
        if before is not None:  # and every memory's last access, which the digest leaves out
            assert all(accessed(sim, a) == accessed(before, a) for a in sim.agents), here.time
        sim.run(there.t)
        assert digest(sim.get_state()) == there.digest, here.time
        span = events[here.files["events.jsonl"] : there.files["events.jsonl"]]
        assert out.getvalue().encode() == span, here.time
        before = sim


def accessed(sim, agent_id: str) -> list[float]:
    stream = sim.agents[agent_id].stream
    return [stream[i].last_accessed for i in range(len(stream))]


def test_checkpoints_catch_agents_in_every_phase(ville_day):
    states = [load_state(ville_day.path, c) for c in checkpoints(ville_day.path)]
    phases = Counter(agent["doing"]["phase"] for state in states for agent in state["agents"].values())
    assert set(phases) == {"waiting", "walking", "sleeping", "talking", "listening"}
    talks = [state["conversations"] for state in states if state["conversations"]]
    assert talks and all(t["lines"] and t["turn"] == len(t["lines"]) for ts in talks for t in ts)


def test_a_checkpoint_writes_what_changed_and_refers_back_for_the_rest(ville_day):
    saved = checkpoints(ville_day.path)
    folders = [ville_day.path / "checkpoints" / f"{int(c.t):09d}" for c in saved]
    written = sum((folder / "parts.jsonl").stat().st_size for folder in folders[1:])
    whole = sum(len(json.dumps(load_state(ville_day.path, c), separators=(",", ":"))) for c in saved[1:])
    assert written < whole / 8  # every 15 minutes here: a twelfth
    for c, folder in zip(saved, folders):  # references only to itself and to earlier ones
        refs = re.findall(rb"\[(\d+),\d+,\d+\]", (folder / "parts.jsonl").read_bytes())
        assert refs and all(int(t) <= c.t for t in refs)
    kinds = [c.accessed for c in saved]  # last-access times: every one, or what changed
    assert kinds[0] is None and None in kinds[1:] and any(k is not None for k in kinds)


def test_a_stream_is_read_from_a_bounded_chain_of_pieces(ville_day):
    """Every ANCHOR_EVERY checkpoints a piece goes on from the last anchor: the streams of a
    late checkpoint are read from one piece per anchor and at most ANCHOR_EVERY - 1 more,
    and each memory is written at most twice."""
    from smallville.checkpoint import streams

    root, saved = ville_day.path / "checkpoints", checkpoints(ville_day.path)
    anchors = [c.t for c in saved if c.memory.get("anchor")]
    assert anchors[0] == saved[0].t and len(anchors) == 1 + (len(saved) - 1) // streams.ANCHOR_EVERY
    for c in saved:
        chain = streams._chain(root, c)
        assert len(chain) <= sum(t <= c.t for t in anchors) + streams.ANCHOR_EVERY - 1, c.time
    written = sum(
        len(json.loads(line))
        for c in saved
        for line in (root / f"{int(c.t):09d}" / streams.MEMORIES).read_text().splitlines()
    )
    held = sum(saved[-1].memory["count"])
    assert held < written <= 2 * held


def test_an_rng_is_stored_as_its_words_twisted_on():
    rng = random.Random("7:agent:ann")
    rng.random()
    words = rng.getstate()[1][:624]
    twists = Twists(words, [0, 0, 0])
    for _ in range(3000):  # 6,000 words drawn: 9 times the 624 anew
        rng.random()
    later = rng.getstate()[1][:624]
    assert not twists.reach(later, most=8) and twists.reach(later) and twists.twists == 9
    assert Twists(words, [0, 0, 0], 9).words == later
    rng.seed(8)
    assert not twists.reach(rng.getstate()[1][:624])  # another seed's words are written anew


def test_state_is_plain_json_and_set_state_gives_it_back(ville_day):
    (checkpoint,) = [c for c in checkpoints(ville_day.path) if c.time == "2023-02-13 18:00:00"]
    sim = restored(ville_day, checkpoint, io.StringIO())
    state = sim.get_state()
    assert json.loads(json.dumps(state)) == state == load_state(ville_day.path, checkpoint)
    assert state["schema"] == 2 and state["t"] == checkpoint.t
    assert not any(p.suffix in (".pkl", ".pickle") for p in ville_day.path.rglob("*"))


def smallville(*args, env=None, script=None):
    command = (
        [sys.executable, "-c", script, *map(str, args)]
        if script
        else [sys.executable, "-m", "smallville", *map(str, args)]
    )
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    runs = tmp_path_factory.mktemp("trio")
    result = smallville("run", CAFE_TRIO, "--for", "4h", "--embedder", "lexical", "--quiet", "--runs-dir", runs)
    assert result.returncode == 0, result.stderr
    (run,) = runs.iterdir()
    return run


def test_verify_proves_a_run_and_names_the_first_difference(trio, tmp_path):
    ok = smallville("verify", trio)
    assert ok.returncode == 0, ok.stderr
    assert "reproduced" in ok.stdout and "4 checkpoints identical" in ok.stdout
    copy = tmp_path / trio.name
    subprocess.run(["cp", "-r", str(trio), str(copy)], check=True)
    lines = (copy / "events.jsonl").read_text().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if '"kind":"say"' in line)
    lines[n] = lines[n].replace('"text":"', '"text":"Well. ', 1)
    (copy / "events.jsonl").write_text("".join(lines))
    bad = smallville("verify", copy)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert f"events.jsonl line {n + 1} (" in bad.stderr and "does not reproduce" in bad.stderr


CHANGED_ENGINE = """
import sys
from dataclasses import replace
from smallville.brain import offline
from smallville.brain import requests as rq

from smallville.sim.engine import Simulation

steps = offline.OfflineBrain._decompose
offline.OfflineBrain._decompose = lambda self, req, rng: rq.Actions(tuple(
    replace(s, description="carefully " + s.description) for s in steps(self, req, rng).steps))

pick = Simulation.pick_tile
Simulation.pick_tile = lambda self, agent, area: (self.world.grid.tiles_in(area) or [None])[0] or pick(
    self, agent, area)                                                  # the first tile of a place, not a random one
from smallville.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_resumes_forks_and_is_inspected_after_the_engine_changed(trio, tmp_path):
    """A later engine that behaves differently still goes on from the run's own checkpoints;
    only `verify` says the run no longer reproduces."""
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(trio), str(run)], check=True)
    before = (run / "events.jsonl").read_bytes()
    looked = smallville("inspect", run, "--agent", "maria_lopez", "--at", "2023-02-13 09:00", "--json")
    assert looked.returncode == 0, looked.stderr
    changed = smallville(
        "inspect", run, "--agent", "maria_lopez", "--at", "2023-02-13 09:00", "--json", script=CHANGED_ENGINE
    )
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout) == json.loads(looked.stdout)  # the state the run had, not a new one

    longer = smallville("resume", run, "--for", "1h", "--quiet", script=CHANGED_ENGINE)
    assert longer.returncode == 0, longer.stderr
    after = (run / "events.jsonl").read_bytes()
    assert after.startswith(before) and b'"action":"carefully ' in after[len(before) :]
    assert b"carefully" not in before

    forked = smallville(
        "fork", run, "--at", "2023-02-13 08:30", "--runs-dir", tmp_path / "forks", "--quiet", script=CHANGED_ENGINE
    )
    assert forked.returncode == 0, forked.stderr
    (fork,) = (tmp_path / "forks").iterdir()
    shared = [line for line in before.splitlines() if json.loads(line)["t"] < 3600]  # before the 08:00 checkpoint
    assert (fork / "events.jsonl").read_bytes().splitlines()[: len(shared)] == shared

    proof = smallville("verify", trio, script=CHANGED_ENGINE)
    assert proof.returncode == 1 and "does not reproduce" in proof.stderr  # the proof sees the change


def test_inspect_shows_what_the_event_log_says(trio):
    """At a checkpoint, each agent's place and plan are those its last events gave."""
    result = smallville("inspect", trio, "--agent", "klaus_mueller", "--at", "2023-02-13 10:00", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    events = [json.loads(line) for line in (trio / "events.jsonl").read_text().splitlines()]
    mine = [e for e in events if e["agent"] == "klaus_mueller" and e["t"] < 3 * 3600]
    plan = [e for e in mine if e["kind"] == "plan"][-1]["data"]["blocks"]
    assert shown["plan"] == plan
    last_move = [e for e in mine if e["kind"] == "move"][-1]["data"]
    if json.loads(json.dumps(shown["tile"])) != last_move["to"]:  # still on the way there
        assert shown["status"] == "walking"
    else:
        assert shown["area"] == last_move["area"]


def as_written_by_schema(run, schema: int) -> None:
    """Rewrite a run's checkpoints as an older smallville wrote them: schema 5, every
    distinct embedding of a piece written whole in its `embeddings.f32`, none referring to
    the run's record of embeddings; schema 4, also the digest of
    the whole state's JSON; schema 3, also each agent's
    memory stream in `memory/ID/` (saved where the last checkpoint is), the digest of the
    whole state's JSON, and the rest as now;
    schema 2, also each the whole state and every last-access time; schema 1, the state's
    fields at the top."""
    import numpy as np

    from smallville.checkpoint import _accessed, streams
    from smallville.memory import MemoryStream

    heads = checkpoints(run)
    states = [load_state(run, head) for head in heads]  # all read before any is rewritten
    accessed = [_accessed(run / "checkpoints", head, list(state["agents"]))[0] for head, state in zip(heads, states)]
    last = streams.read(MemoryStream, run / "checkpoints", heads[-1], list(states[-1]["agents"]), accessed[-1], None)
    for agent, read in last.items():
        read().save(str(run / "checkpoints" / "memory" / agent))
    for head, state, times in zip(heads, states, accessed):
        folder = run / "checkpoints" / f"{int(head.t):09d}"
        whole_rows(run, folder, head.memory["dim"])
        if schema == 5:
            (folder / "head.json").write_text(json.dumps({**head.data, "schema": 5}))
            continue
        if schema == 4:
            (folder / "head.json").write_text(json.dumps({**head.data, "schema": 4, "digest": digest(state, 4)}))
            continue
        if schema == 3:
            (folder / streams.MEMORIES).unlink()
            (folder / streams.ROWS).unlink()
            written = {k: v for k, v in head.data.items() if k != "memory"}
            (folder / "head.json").write_text(json.dumps({**written, "schema": 3, "digest": digest(state, 3)}))
            continue
        for path in folder.iterdir():
            path.unlink()
        body = {
            "schema": 2,
            "time": head.time,
            "t": head.t,
            "digest": digest(state, 2),
            "files": head.files,
            "state": state,
        }
        if schema == 1:
            body = {**state, "schema": 1, "t": head.t, "time": head.time, "digest": "", "files": head.files}
        (folder / "state.json").write_text(json.dumps(body))
        np.savez(folder / "accessed.npz", **dict(zip(state["agents"], times)))


def whole_rows(run, folder, dim: int) -> None:
    """Write a piece's embeddings as schema 5 did: each row whole, where schema 6 names the
    line of the run's record that holds it."""
    import numpy as np

    from smallville.checkpoint import streams
    from smallville.embed.record import EmbeddingRecord
    from smallville.memory.vectors import unit_rows

    lines = np.fromfile(folder / streams.LINES, dtype="<i8")
    rows = np.empty((len(lines), dim), dtype="<f4")
    rows[lines < 0] = np.fromfile(folder / streams.ROWS, dtype="<f4").reshape(-1, dim)
    rows[lines >= 0] = unit_rows(EmbeddingRecord(run / "embeddings", dim).rows_at(lines[lines >= 0]))
    (folder / streams.ROWS).write_bytes(rows.tobytes())
    (folder / streams.LINES).unlink()


def test_a_run_written_by_the_previous_version_goes_on_from_its_checkpoints(trio, tmp_path):
    runs = {}
    for name, schema in (("now", 6), ("old", 2), ("old3", 3), ("old4", 4), ("old5", 5)):
        runs[name] = tmp_path / name
        subprocess.run(["cp", "-r", str(trio), str(runs[name])], check=True)
        if schema < 6:
            as_written_by_schema(runs[name], schema)
        longer = smallville("resume", runs[name], "--for", "1h", "--quiet")
        assert longer.returncode == 0, longer.stderr
    for old in ("old", "old3", "old4", "old5"):
        assert (runs[old] / "events.jsonl").read_bytes() == (runs["now"] / "events.jsonl").read_bytes()
        assert smallville("verify", runs[old]).returncode == 0
    assert [c.schema for c in checkpoints(runs["old"])] == [2, 2, 2, 2, 6]
    assert [c.schema for c in checkpoints(runs["old3"])] == [3, 3, 3, 3, 6]
    assert [c.schema for c in checkpoints(runs["old4"])] == [4, 4, 4, 4, 6]
    assert [c.schema for c in checkpoints(runs["old5"])] == [5, 5, 5, 5, 6]
    assert checkpoints(runs["old4"])[-1].memory["from"] == checkpoints(runs["old4"])[-2].t
    assert checkpoints(runs["old5"])[-1].memory["from"] == checkpoints(runs["old5"])[-2].t
    looked = [
        smallville("inspect", runs[name], "--agent", "maria_lopez", "--at", "2023-02-13 09:30", "--json")
        for name in ("now", "old5")
    ]
    assert looked[0].returncode == 0 and looked[0].stdout == looked[1].stdout and "memories" in looked[0].stdout
    forks = {}
    for name in ("now", "old5"):
        forks[name] = tmp_path / f"forks-{name}"
        forked = smallville("fork", runs[name], "--at", "2023-02-13 09:30", "--runs-dir", forks[name], "--quiet")
        assert forked.returncode == 0, forked.stderr
    (fork_now,), (fork_old,) = forks["now"].iterdir(), forks["old5"].iterdir()
    assert (fork_old / "events.jsonl").read_bytes() == (fork_now / "events.jsonl").read_bytes()
    assert checkpoints(runs["old3"])[-1].memory["from"] is None  # after schema 3: the streams whole
    assert checkpoints(runs["now"])[-1].memory["from"] == checkpoints(runs["now"])[-2].t


def test_a_run_with_only_old_checkpoints_is_refused_in_one_line(trio, tmp_path):
    old = tmp_path / "old"
    subprocess.run(["cp", "-r", str(trio), str(old)], check=True)
    with open(old / "manifest.json") as f:
        manifest = json.load(f)
    manifest["status"] = "interrupted"
    (old / "manifest.json").write_text(json.dumps(manifest))
    as_written_by_schema(old, 1)
    result = smallville("resume", old)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "written by an older smallville" in result.stderr and "schema 1" in result.stderr


def test_a_state_rebuilt_from_python_and_a_finished_run_leave_no_threads_running(trio, tmp_path, monkeypatch):
    """What `state_at` builds (the brain behind the replay, the streams' search helpers) ends
    when the state is closed; a run ends its own when it finishes."""
    from smallville import mind
    from smallville.memory import scoring
    from smallville.run import simulate_to

    from conftest import smallville_threads

    monkeypatch.setattr(scoring, "PARALLEL_ROWS", 2)  # every search on helper threads
    monkeypatch.setattr(scoring, "threads", lambda: 2)
    before = smallville_threads()
    with simulate_to(trio, 3 * 3600) as sim:
        assert mind.inspect_agent(sim, "klaus_mueller")["recall"]
        assert mind.interview(sim, "klaus_mueller", "What are you doing today?")["answer"]
        assert smallville_threads() - before
    assert smallville_threads() - before == set()
    result = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path, duration=3600, embedder="lexical")
    assert smallville_threads() - before == set()
    assert mind.inspect_agent(result.simulation, "maria_lopez")["recall"]  # still readable
    result.simulation.close()
    assert smallville_threads() - before == set()
