"""The requests' long strings, written once in `answers.texts.jsonl`: every reader gets the
requests back whole, a run written before them is still read, resumed, forked, replayed and
verified, and a torn last line is no harm."""

from __future__ import annotations

import json
import shutil

import pytest
from test_resume import smallville, start

from smallville.brain.kinds import REQUEST_KINDS
from smallville.brain.record import requests_of
from smallville.brain.requests import request_key
from smallville.brain.texts import TEXTS, Texts

RECORD = "answers.jsonl"


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    """Three hours of cafe_trio, written as this version writes a run."""
    result, run = start(tmp_path_factory.mktemp("trio"), 3)
    assert result.returncode == 0, result.stderr
    return run


def written_before(run, into):
    """A copy of `run` as a version before the texts wrote it: each request whole in the
    record, no texts file, and checkpoints that know only the two logs' lengths."""
    shutil.copytree(run, into)
    texts, moved, old, new = Texts(run / TEXTS), {}, 0, 0
    lines = []
    for line in (run / RECORD).read_bytes().splitlines(keepends=True):
        entry = json.loads(line)
        if "request" in entry:
            entry["request"] = texts.unpack(entry["request"])
        lines.append((json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode())
        moved[old], old, new = new, old + len(line), new + len(lines[-1])
    moved[old] = new
    (into / RECORD).write_bytes(b"".join(lines))
    (into / TEXTS).unlink()
    for head in into.glob("checkpoints/[0-9]*/head.json"):
        data = json.loads(head.read_text())
        data["files"] = {"events.jsonl": data["files"]["events.jsonl"], RECORD: moved[data["files"][RECORD]]}
        head.write_text(json.dumps(data))
    return into


def a_decision(run) -> tuple[str, int]:
    """Who said the first spoken line (a decision made on recalled memories), and its log line."""
    events = map(json.loads, (run / "events.jsonl").read_text().splitlines())
    return next((e["agent"], n) for n, e in enumerate(events, 1) if e["kind"] == "say")


def test_every_request_reads_back_whole_under_its_key_in_less_space(trio, tmp_path):
    requests = requests_of(trio)
    assert len(requests) > 100
    for key, request in requests.items():
        assert request_key(REQUEST_KINDS[request["kind"]].from_dict(request)) == key
    assert all(b'{"$":' in line for line in (trio / RECORD).read_bytes().splitlines() if b'"request":' in line)
    shared = [json.loads(line) for line in (trio / TEXTS).read_text().splitlines()]
    assert len(shared) == len(set(shared)) > 10  # each string once
    before = written_before(trio, tmp_path / "before")
    assert requests_of(before) == requests
    now = (trio / RECORD).stat().st_size + (trio / TEXTS).stat().st_size
    assert now < 0.7 * (before / RECORD).stat().st_size


def test_a_run_written_before_the_texts_resumes_forks_replays_verifies_and_says_why(trio, tmp_path):
    before = written_before(trio, tmp_path / "before")
    now = tmp_path / "now"
    shutil.copytree(trio, now)
    agent, n = a_decision(trio)
    whys = [smallville("why", run, "--agent", agent, "--event", n, "--json") for run in (before, now)]
    assert [why.returncode for why in whys] == [0, 0], whys[0].stderr + whys[1].stderr
    accounts = [json.loads(why.stdout) for why in whys]
    assert accounts[0] == accounts[1]
    assert any(m["shown"] for q in accounts[0]["request"]["queries"] for m in q["memories"])  # found in the request
    assert smallville("verify", before).returncode == 0
    for run in (before, now):
        resumed = smallville("resume", run, "--for", "1h", "--quiet")
        assert resumed.returncode == 0, resumed.stderr
    assert (before / "events.jsonl").read_bytes() == (now / "events.jsonl").read_bytes()
    assert requests_of(before) == requests_of(now)  # the new hour's requests refer to texts
    assert (before / TEXTS).exists()
    for run in (before, now):
        forked = smallville("fork", run, "--at", "2023-02-13 08:30", "--for", "30m", "--quiet", "--runs-dir", tmp_path)
        assert forked.returncode == 0, forked.stderr
    (fork,), (other,) = tmp_path.glob("before-fork*"), tmp_path.glob("now-fork*")
    assert smallville("verify", fork).returncode == 0
    assert (fork / "events.jsonl").read_bytes() == (other / "events.jsonl").read_bytes()
    assert requests_of(fork) == requests_of(other)
    replayed = smallville(
        "run",
        trio / "scenario" / "cafe_trio.yaml",
        "--for",
        "3h",
        "--embedder",
        "lexical",
        "--quiet",
        "--replay-from",
        before,
        "--runs-dir",
        tmp_path / "replays",
    )
    assert replayed.returncode == 0, replayed.stderr
    (replay,) = (tmp_path / "replays").iterdir()
    assert (replay / "events.jsonl").read_bytes() == (trio / "events.jsonl").read_bytes()


def test_a_torn_last_text_is_not_read_and_the_next_writer_cuts_it(tmp_path):
    texts = Texts(tmp_path / TEXTS)
    packed = texts.pack({"kind": "speak", "identity": "Ann Lee (30): calm, kind, curious.", "now": "07:00"})
    texts.close()
    assert packed == {"kind": "speak", "identity": {"$": 0}, "now": "07:00"}
    with open(tmp_path / TEXTS, "a") as f:
        f.write('"Ann is half-way through writ')  # torn by a crash: nothing refers to it
    again = Texts(tmp_path / TEXTS)
    assert again.unpack(packed)["identity"] == "Ann Lee (30): calm, kind, curious."
    assert again.pack(["Ann Lee (30): calm, kind, curious.", "Bob Ray is reading the morning paper"]) == [
        {"$": 0},
        {"$": 1},
    ]
    again.close()
    assert [json.loads(line) for line in (tmp_path / TEXTS).read_text().splitlines()] == [
        "Ann Lee (30): calm, kind, curious.",
        "Bob Ray is reading the morning paper",
    ]
