"""What a run says it does when it starts (a new run, a fork, a resumed run), and what it is called."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from smallville.opening import opening
from smallville.run import Manifest

from conftest import ROOT

TINY = ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml"
RUN = {
    "scenario": {"name": "The Ville"},
    "agents": ["a"] * 25,
    "sim_start": "2023-02-13 07:00:00",
    "duration_s": 86400.0,
    "seed": 7,
}
FORK = {
    **RUN,
    "fork": {
        "t": 3600.0,
        "at": "2023-02-13 08:00:00",
        "seed": None,
        "inject": [["a", "a thought"]],
        "parent": {"run_id": "the_ville-seed7-20260101-120000", "path": "runs/x"},
        "restored": None,
    },
}


def line(manifest: dict) -> str:
    whole = {
        "run_id": "RUN",
        "brain": {"name": "offline"},
        "embedder": {"name": "lexical-512"},
        "sim_end": "",
        **manifest,
    }
    return opening(Manifest.from_dict(whole), "runs/RUN", "offline", "lexical-512")


def test_a_new_run_says_what_it_simulates():
    assert line(RUN) == (
        "The Ville: 25 agents, 1d from 2023-02-13 07:00, seed 7, brain offline, embedder lexical-512; writing runs/RUN"
    )


def test_a_fork_says_where_it_branched_and_how_it_got_there():
    assert line(FORK) == (
        "The Ville: forked from the_ville-seed7-20260101-120000 at 2023-02-13 08:00 "
        "(re-simulated from the start), 1 injected thought; seed 7, to 2023-02-14 07:00, "
        "brain offline, embedder lexical-512; writing runs/RUN"
    )
    reseeded = {**FORK, "fork": {**FORK["fork"], "seed": 99, "inject": []}, "duration_s": 7200.0}
    assert line(reseeded).startswith(
        "The Ville: forked from the_ville-seed7-20260101-120000 at 2023-02-13 08:00 "
        "(re-simulated from the start); seed 99 from the fork on, to 2023-02-13 09:00, "
    )


def test_a_resume_says_from_which_checkpoint_and_what_it_cut():
    resumed = {
        **RUN,
        "duration_s": 10 * 3600.0,
        "resumed": [
            {
                "from": "2023-02-13 12:00:00",
                "checkpoint": True,
                "restored": None,
                "cut": {"events": 12, "answers": 0, "torn": 1},
            }
        ],
    }
    assert line(resumed) == (
        "The Ville: resuming from the 2023-02-13 12:00 checkpoint (re-simulated from the start) "
        "to 2023-02-13 17:00; log truncated by 1 torn line and 12 events past the checkpoint; "
        "seed 7, brain offline, embedder lexical-512; writing runs/RUN"
    )
    clean = {**resumed, "resumed": [{**resumed["resumed"][0], "cut": {"events": 0, "answers": 0, "torn": 0}}]}
    assert "; log" not in line(clean)
    early = {
        **RUN,
        "resumed": [
            {
                "from": "2023-02-13 07:00:00",
                "checkpoint": False,
                "restored": None,
                "cut": {"events": 3, "answers": 2, "torn": 0},
            }
        ],
    }
    assert line(early).startswith(
        "The Ville: resuming from the start (no checkpoint had been written) to "
        "2023-02-14 07:00; log truncated by 3 events and 2 recorded answers; seed 7"
    )


def test_the_wording_follows_the_facts_of_a_restore():
    """When a later version restores checkpoints, only the facts in the manifest change."""
    later = {**FORK, "fork": {**FORK["fork"], "at": "2023-02-13 08:30:00", "restored": "2023-02-13 08:00:00"}}
    assert "at 2023-02-13 08:30 (checkpoint 08:00 + 30m re-simulated), 1 injected thought" in line(later)
    exact = {**FORK, "fork": {**FORK["fork"], "restored": "2023-02-13 08:00:00"}}
    assert "at 2023-02-13 08:00 (restored from its checkpoint)" in line(exact)


def smallville(*args, env=None):
    clean = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    result = smallville("run", TINY, "--for", "3h", "--embedder", "lexical", "--runs-dir", runs, "--quiet")
    assert result.returncode == 0, result.stderr
    (run,) = runs.iterdir()
    return run


def test_fork_says_what_it_did(parent, tmp_path):
    result = smallville(
        "fork", parent, "--at", "2023-02-13 08:20", "--inject", "ann_lee", "Ann wants a dog.", "--runs-dir", tmp_path
    )
    assert result.returncode == 0, result.stderr
    (fork,) = tmp_path.iterdir()
    assert result.stderr.splitlines()[0] == (
        f"Tiny Town: forked from {parent.name} at 2023-02-13 08:20 (checkpoint 08:00 + 20m re-simulated), "
        f"1 injected thought; seed 7, to 2023-02-13 10:00, brain offline, embedder lexical-512; writing {fork}"
    )


def test_resume_says_which_checkpoint_and_what_it_cut(tmp_path):
    killed = smallville(
        "run",
        TINY,
        "--for",
        "3h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path,
        "--quiet",
        env={"SMALLVILLE_FAULT": "kill-at:9000"},
    )
    assert killed.returncode == -9
    (run,) = tmp_path.iterdir()
    checkpoint = json.loads((run / "checkpoints" / "000007200" / "head.json").read_text())
    past = {name: (run / name).read_bytes()[size:].count(b"\n") for name, size in checkpoint["files"].items()}
    with open(run / "events.jsonl", "a") as f:
        f.write('{"t": 9001, "kind": "mem')  # torn by the crash
    result = smallville("resume", run)
    assert result.returncode == 0, result.stderr
    events, answers = past["events.jsonl"], past["answers.jsonl"]
    assert (
        events > 1
        and answers > 1
        and result.stderr.splitlines()[0]
        == (
            f"Tiny Town: resuming from the 2023-02-13 09:00 checkpoint (restored from its checkpoint) to 2023-02-13 "
            f"10:00; log truncated by 1 torn line, {events} events and {answers} recorded answers past the checkpoint; "
            f"seed 7, brain offline, embedder lexical-512; writing {run}"
        )
    )
    resumed = json.loads((run / "manifest.json").read_text())["resumed"]
    assert resumed == [
        {
            "from": "2023-02-13 09:00:00",
            "wall": resumed[0]["wall"],
            "checkpoint": True,
            "restored": "2023-02-13 09:00:00",
            "cut": {"events": events, "answers": answers, "torn": 1},
        }
    ]


def test_a_negative_seed_is_never_read_as_a_positive_one(tmp_path):
    from smallville.experiment import slot_name
    from smallville.run import seed_label

    assert [seed_label(s) for s in (7, 0, -1, -12)] == ["seed7", "seed0", "seed_neg1", "seed_neg12"]
    assert slot_name("full", -2) == "full-seed_neg2"
    result = smallville(
        "run", TINY, "--for", "1h", "--seed", "-3", "--embedder", "lexical", "--runs-dir", tmp_path, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    (run,) = tmp_path.iterdir()
    assert run.name.startswith("tiny-seed_neg3-") and json.loads((run / "manifest.json").read_text())["seed"] == -3


def test_the_readme_shows_the_real_opening_line(tmp_path):
    """The default town's first line, as the README shows it (the run is killed once it has begun)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (shown,) = [line for line in readme.splitlines() if line.startswith("The Ville: 25 agents, ")]
    result = subprocess.run(
        [sys.executable, "-m", "smallville", "run", str(ROOT / "scenarios" / "the_ville.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "SMALLVILLE_FAULT": "kill-at:3600"},
    )
    assert result.returncode == -9
    (run,) = (tmp_path / "runs").iterdir()
    assert result.stderr.splitlines()[0] == shown.replace("the_ville-seed7-20260213-090000", run.name)
