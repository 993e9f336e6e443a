"""A run's records read by key: the answer record from a checkpoint's offset on, and the
record of embeddings, each reading what is asked for rather than the whole file, and
giving what reading the whole file gave."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import numpy as np
import pytest

from smallville.brain import recordfile
from smallville.brain.recordfile import RecordFile
from smallville.embed import LexicalEmbedder
from smallville.embed.record import EmbeddingRecord, RecordedEmbedder


def write_record(path, keys: list[str]) -> list[bytes]:
    lines = [
        (json.dumps({"key": key, "kind": "speak", "answer": {"n": i}}, separators=(",", ":")) + "\n").encode()
        for i, key in enumerate(keys)
    ]
    path.write_bytes(b"".join(lines))
    return lines


class WholeFile:
    """How replay read the record before: every line indexed at open, a key's lines
    served in order from the count before `start`, then its last again."""

    def __init__(self, lines: list[bytes], start: int) -> None:
        self.entries, self.used, offset = defaultdict(list), defaultdict(int), 0
        for line in lines:
            key = json.loads(line)["key"]
            self.entries[key].append(line)
            if offset < start:
                self.used[key] += 1
            offset += len(line)

    def take(self, key: str) -> bytes | None:
        entries = self.entries.get(key)
        if not entries:
            return None
        line = entries[min(self.used[key], len(entries) - 1)]
        self.used[key] += 1
        return line


@pytest.mark.parametrize("seed", range(6))
def test_the_record_read_from_an_offset_serves_what_the_whole_file_served(tmp_path, seed, monkeypatch):
    rng = random.Random(seed)
    monkeypatch.setattr(recordfile, "BLOCK", rng.choice([16, 64, 1 << 16]))  # lines across blocks too
    monkeypatch.setattr(recordfile, "SCAN_BLOCK", rng.choice([32, 100, 1 << 20]))
    keys = [f"{rng.randrange(40):016x}" for _ in range(300)]
    lines = write_record(tmp_path / "answers.jsonl", keys)
    start = rng.randrange(sum(map(len, lines)) + 1)  # a line start or not
    read, whole = RecordFile(tmp_path / "answers.jsonl", start), WholeFile(lines, start)
    asked = [rng.choice(keys + [f"{k:016x}" for k in range(40, 45)]) for _ in range(400)]  # some never recorded
    assert [read.take(key) for key in asked] == [whole.take(key) for key in asked]
    assert read.lines_before() == sum(
        1 for line, offset in zip(lines, np.cumsum([0] + [len(x) for x in lines])) if offset < start
    )


def test_replay_from_a_checkpoint_reads_only_the_record_after_it_until_asked_what_it_lacks(tmp_path, monkeypatch):
    keys = [f"{i:016x}" for i in range(2000)]
    lines = write_record(tmp_path / "answers.jsonl", keys)
    start = sum(map(len, lines[:1500]))
    reads = []
    real = RecordFile._read
    monkeypatch.setattr(RecordFile, "_read", lambda self, lo, hi: reads.append((lo, hi)) or real(self, lo, hi))
    read = RecordFile(tmp_path / "answers.jsonl", start)
    assert [read.take(key) for key in keys[1500:1600]] == lines[1500:1600]
    assert min(lo for lo, _ in reads) >= start - 1  # nothing before the checkpoint
    assert max(hi for _, hi in reads) < start + 4 * recordfile.BLOCK  # nor far after what was served
    assert read.take(keys[10]) == lines[10]  # a key only before: looked for there
    assert read.take("f" * 16) is None  # one the record lacks


def test_a_line_that_is_not_a_record_line_is_an_error_when_reached(tmp_path):
    (tmp_path / "answers.jsonl").write_bytes(
        b'{"key":"0000000000000001","answer":{}}\nnot json\n{"key":"0000000000000002","answer":{}}\n'
    )
    read = RecordFile(tmp_path / "answers.jsonl")
    assert read.take("0000000000000001")
    with pytest.raises(ValueError):
        read.take("0000000000000002")


def test_the_record_of_embeddings_reads_a_row_when_its_text_is_asked_for(tmp_path):
    texts = [f"text {i}" for i in range(50)] + ['a "quoted" text\\ with\nescapes', "ünïcödé"]
    inner = LexicalEmbedder(16)
    written = RecordedEmbedder(inner, tmp_path)
    rows = written.embed(texts)
    written.close()
    record = EmbeddingRecord(tmp_path)
    assert record.rows == {}  # opening reads nothing
    for i in (3, 50, 51, 7):
        assert np.array_equal(record.get(texts[i]), rows[i])  # the very bits
    assert sorted(record.rows) == sorted(texts[i] for i in (3, 50, 51, 7))
    assert record.get("never embedded") is None
    again = RecordedEmbedder(inner, tmp_path)  # goes on appending after what it holds
    again.embed(["new text"])
    again.close()
    lines = (tmp_path / "texts.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == texts + ["new text"]
    assert (tmp_path / "vectors.f32").stat().st_size == len(lines) * 16 * 4


def test_the_record_of_embeddings_keeps_the_order_texts_were_asked_in(tmp_path):
    # A run's texts are embedded in another process and read when needed: a text asked for
    # later (a query) may be read first, but the record is written in the order asked, so it
    # is the same file with or without the process.
    from smallville.embed import Later

    inner, waiting = LexicalEmbedder(16), []

    class Elsewhere(LexicalEmbedder):
        def submit(self, texts, soon=False):
            waiting.append(texts)
            return Later(lambda: inner.embed(texts), lambda: False)

    written = RecordedEmbedder(Elsewhere(16), tmp_path)
    first = written.submit(["a memory"])
    second = written.submit(["another memory", "a memory"])
    query = written.embed(["a query"])  # read at once: the memories are still coming
    assert np.array_equal(query, inner.embed(["a query"]))
    assert waiting == [["a memory"], ["another memory"], ["a query"]]  # a text coming is not asked again
    assert not (tmp_path / "texts.jsonl").exists() or not (tmp_path / "texts.jsonl").read_text()
    assert np.array_equal(second(), inner.embed(["another memory", "a memory"]))
    assert np.array_equal(first(), inner.embed(["a memory"]))
    written.sync()  # a checkpoint: everything asked is in the record first
    lines = (tmp_path / "texts.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == ["a memory", "another memory", "a query"]
    written.close()


def test_a_torn_record_of_embeddings_is_read_as_far_as_both_files_go(tmp_path):
    inner = LexicalEmbedder(16)
    written = RecordedEmbedder(inner, tmp_path)
    rows = written.embed(["one", "two", "three"])
    written.close()
    with open(tmp_path / "vectors.f32", "r+b") as f:  # a crash after the third text's line
        f.truncate(2 * 16 * 4 + 10)
    record = EmbeddingRecord(tmp_path)
    assert np.array_equal(record.get("two"), rows[1]) and record.get("three") is None
    again = RecordedEmbedder(inner, tmp_path)
    again.embed(["three"])
    again.close()
    assert (tmp_path / "texts.jsonl").read_text().splitlines() == ['"one"', '"two"', '"three"']
    assert (tmp_path / "vectors.f32").stat().st_size == 3 * 16 * 4


def test_a_request_key_is_the_hash_of_its_canonical_json_and_is_worked_out_once():
    """Keys name answers in every record written before: the sha256 of the request's
    canonical JSON (nested messages and tuples as to_dict gives them), whatever the kind."""
    import hashlib
    import json

    from smallville.brain import requests as rq

    day = rq.DayPlan((rq.Block(420, 480, "waking up", "home"), rq.Block(480, 540, "café au lait", "")))
    asked = [
        rq.RateImportance("a1", "Ann Lee", ("saw Bob", "ünïcode")),
        rq.Interview("a1", "Ann Lee", "a painter", "How are you?", ((0, "saw Bob"), (3, "x"))),
        day,
    ]
    for request in asked:
        canonical = json.dumps(request.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        expected = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        assert rq.request_key(request) == expected == rq.request_key(request)
