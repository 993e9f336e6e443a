"""Runs survive crashes: checkpoints, resume, extension and forks, all byte-exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from smallville.checkpoint import Head, load_state

from conftest import CAFE_TRIO, ROOT, THE_VILLE


def smallville(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def start(runs, hours, env=None, scenario=CAFE_TRIO):
    result = smallville(
        "run", scenario, "--for", f"{hours}h", "--embedder", "lexical", "--quiet", "--runs-dir", runs, env=env
    )
    (run,) = [p for p in runs.iterdir() if "fork" not in p.name]
    return result, run


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """An uninterrupted eight hours of cafe_trio."""
    result, run = start(tmp_path_factory.mktemp("whole"), 8)
    assert result.returncode == 0, result.stderr
    return run


@pytest.mark.parametrize("fault", ["kill-at:6300", "kill-at:14400", "kill-in-checkpoint:10800"])
def test_a_killed_run_resumes_to_the_same_bytes(tmp_path, whole, fault):
    result, run = start(tmp_path, 8, env={"SMALLVILLE_FAULT": fault})
    assert result.returncode == -9  # SIGKILL: nothing cleaned up
    assert json.loads((run / "manifest.json").read_text())["status"] == "running"
    with open(run / "events.jsonl", "a") as f:
        f.write('{"t":99999,"kind":"mem')  # a line torn by the crash
    with open(run / "answers.texts.jsonl", "a") as f:
        f.write('"Maria is half-way thro')
    resumed = smallville("resume", run, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    for name in ("events.jsonl", "answers.jsonl", "answers.texts.jsonl"):
        assert (run / name).read_bytes() == (whole / name).read_bytes()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["resumed"]
    assert manifest["counts"] == json.loads((whole / "manifest.json").read_text())["counts"]


@pytest.fixture(scope="module")
def ville(tmp_path_factory):
    result, run = start(tmp_path_factory.mktemp("ville"), 3, scenario=THE_VILLE)
    assert result.returncode == 0, result.stderr
    return run


@pytest.mark.parametrize("fault", ["kill-in-checkpoint:7200", "kill-at:9900"])
def test_the_ville_killed_resumes_to_the_same_bytes(tmp_path, ville, fault):
    killed, run = start(tmp_path, 3, env={"SMALLVILLE_FAULT": fault}, scenario=THE_VILLE)
    assert killed.returncode == -9
    if fault.startswith("kill-in"):
        assert any(p.name.startswith(".") for p in (run / "checkpoints").iterdir())  # the torn checkpoint
    assert smallville("resume", run, "--quiet").returncode == 0
    assert (run / "events.jsonl").read_bytes() == (ville / "events.jsonl").read_bytes()


def test_checkpoints_are_whole_documented_json(whole):
    folders = sorted(p.name for p in (whole / "checkpoints").iterdir())
    assert folders == [
        "000003600",
        "000007200",
        "000010800",
        "000014400",
        "000018000",
        "000021600",
        "000025200",
        "000028800",
    ]
    head = json.loads((whole / "checkpoints" / "000010800" / "head.json").read_text())
    assert head["schema"] == 6 and head["t"] == 10800 and head["time"] == "2023-02-13 10:00:00"
    assert head["memory"]["from"] == 7200 and head["memory"]["count"] == [
        s["memories"] for s in load_state(whole, Head.of(head))["agents"].values()
    ]
    assert {"memories.jsonl", "embeddings.f32", "recorded.i64", "parts.jsonl", "accessed.npz", "head.json"} == {
        p.name for p in (whole / "checkpoints" / "000010800").iterdir()
    }
    piece = whole / "checkpoints" / "000010800"
    lines = np.fromfile(piece / "recorded.i64", dtype="<i8")  # each embedding stored once:
    assert len(lines) == sum(head["memory"]["rows"]) - sum(  # the piece names its line in the
        json.loads((whole / "checkpoints" / "000007200" / "head.json").read_text())["memory"]["rows"]
    )
    assert len(lines) and (lines >= 0).all() and (piece / "embeddings.f32").stat().st_size == 0  # run's record
    state = load_state(whole, Head.of(head))
    assert set(state["agents"]) == {"isabella_rodriguez", "klaus_mueller", "maria_lopez"}
    maria = state["agents"]["maria_lopez"]
    assert {"plan", "queue", "rng", "memories", "relationships", "doing"} <= set(maria)
    assert maria["doing"]["phase"] in ("waiting", "walking", "sleeping", "talking", "listening")
    assert maria["doing"]["until"] >= 10800
    events = (whole / "events.jsonl").read_bytes()[: head["files"]["events.jsonl"]]
    assert events.endswith(b"\n") and json.loads(events.splitlines()[-1])["t"] < 10800
    assert not any(p.suffix == ".pkl" for p in whole.rglob("*"))


def test_a_completed_run_is_extended_as_if_it_had_been_longer(tmp_path, whole):
    result, run = start(tmp_path, 5)
    assert result.returncode == 0
    again = smallville("resume", run, "--quiet")
    assert again.returncode == 2 and "has completed" in again.stderr and again.stderr.count("\n") == 1
    longer = smallville("resume", run, "--for", "3h", "--quiet")
    assert longer.returncode == 0, longer.stderr
    assert (run / "events.jsonl").read_bytes() == (whole / "events.jsonl").read_bytes()


def test_a_fork_shares_the_past_and_changes_the_future(tmp_path, whole):
    thought = "Klaus has decided to throw a surprise party for Maria at the library on February 13th, 7pm."
    result = smallville(
        "fork",
        whole,
        "--at",
        "2023-02-13 10:00",
        "--inject",
        "klaus MUELLER",  # an agent by its name, as the run's tables show it (any case), or its id
        thought,
        "--runs-dir",
        tmp_path,
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    (fork,) = tmp_path.iterdir()
    parent_lines = (whole / "events.jsonl").read_text().splitlines()
    fork_lines = (fork / "events.jsonl").read_text().splitlines()
    before = [line for line in parent_lines if json.loads(line)["t"] < 3 * 3600]
    assert fork_lines[: len(before)] == before
    assert fork_lines != parent_lines
    (injected,) = [json.loads(line) for line in fork_lines if thought in line and '"injected":true' in line]
    assert injected["agent"] == "klaus_mueller"
    manifest = json.loads((fork / "manifest.json").read_text())
    assert manifest["fork"]["at"] == "2023-02-13 10:00:00"
    assert manifest["fork"]["parent"]["run_id"] == whole.name and manifest["status"] == "completed"


def test_a_fork_with_another_seed_diverges_and_bad_forks_are_refused(tmp_path, whole):
    result = smallville("fork", whole, "--at", "2023-02-13 09:00", "--seed", "99", "--runs-dir", tmp_path, "--quiet")
    assert result.returncode == 0, result.stderr
    (fork,) = tmp_path.iterdir()
    assert (fork / "events.jsonl").read_bytes() != (whole / "events.jsonl").read_bytes()
    late = smallville("fork", whole, "--at", "2023-02-20 09:00")
    assert late.returncode == 2 and "cannot fork" in late.stderr
    nobody = smallville("fork", whole, "--at", "2023-02-13 09:00", "--inject", "nobody", "hi")
    assert nobody.returncode == 2 and "unknown agent 'nobody'" in nobody.stderr


def test_a_killed_fork_resumes_to_the_same_bytes_and_shows_its_past(tmp_path, whole):
    args = ("fork", whole, "--at", "2023-02-13 09:40", "--seed", "5", "--quiet")
    assert smallville(*args, "--runs-dir", tmp_path / "clean").returncode == 0
    killed = smallville(*args, "--runs-dir", tmp_path / "killed", env={"SMALLVILLE_FAULT": "kill-at:18000"})
    assert killed.returncode == -9
    (clean,), (fork,) = (tmp_path / "clean").iterdir(), (tmp_path / "killed").iterdir()
    assert (fork / "checkpoints" / "000009600").is_dir()  # its own first: the fork point
    assert smallville("resume", fork, "--quiet").returncode == 0
    assert (fork / "events.jsonl").read_bytes() == (clean / "events.jsonl").read_bytes()
    early = [
        smallville("inspect", run, "--agent", "maria_lopez", "--at", "2023-02-13 08:10", "--json")
        for run in (whole, fork)
    ]  # before the fork: the parent's past
    assert early[0].returncode == 0 and early[0].stdout == early[1].stdout
