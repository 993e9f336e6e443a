"""Recording, replay and a persistent cache: wrappers with the brain interface around
any brain, keyed by `request_key`.

A run's record, `answers.jsonl`, is append-only, one line per request asked, in the
order asked: `{"key", "kind", "request", "answer"}` (a request asked again is written
without `request`), plus `"fallback": error` when the answer was a safe default. A run's
requests refer to their long strings in `answers.texts.jsonl` (`Texts`); `requests_of`
reads them back whole. Replay serves a key's answers in the order they were recorded, so a
run with a model that answered the same question differently twice replays exactly too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from smallville.brain import requests as rq
from smallville.brain.base import (
    Answers,
    Brain,
    Failed,
    Fallback,
    Wrapper,
    fallbacks_of,
    override,
)
from smallville.brain.kinds import ANSWER_OF, REQUEST_KINDS
from smallville.brain.ledger import Ledger
from smallville.brain.recordfile import RecordFile
from smallville.brain.recordfile import key_of as _key_of
from smallville.brain.texts import TEXTS, Texts
from smallville.errors import BrainError

RECORD = "answers.jsonl"


def _line(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


class Recording(Wrapper):
    """Writes every request of every batch and its answer to `out` as it goes; with `texts`
    (the run's `Texts`), each request's long strings go there once and the request refers
    to them."""

    def __init__(self, inner: Brain, out: IO[str], written: set[str] | None = None, texts: Texts | None = None) -> None:
        super().__init__(inner)
        self.out = out
        self.texts = texts
        self.written: set[str] = set(written or ())  # keys whose request is in the record already

    @override
    def answer(self, requests: Sequence[rq.Message]) -> Answers:
        answers = self.inner.answer(requests)
        errors = {f.index: f.error for f in fallbacks_of(answers)}
        lines = []
        for i, (request, answer) in enumerate(zip(requests, answers)):
            key = rq.request_key(request)
            entry = {"key": key, "kind": request.kind}
            if key not in self.written:
                entry["request"] = self.texts.pack(request.to_dict()) if self.texts else request.to_dict()
                self.written.add(key)
            entry["answer"] = answer.to_dict()
            if i in errors:
                entry["fallback"] = errors[i]
            lines.append(_line(entry))
        if self.texts:
            self.texts.flush()  # before the lines that refer to them
        self.out.write("".join(lines))
        self.out.flush()
        return answers


class Replaying(Brain):
    """Answers from a run's record with no model. A request the record lacks is a
    `BrainError` naming it, or goes to `fallthrough` (a live brain) when one is given.

    With `start` (a byte offset of the record, such as a checkpoint's), the lines before
    it count as answered already: replay goes on from there, and reads of the record only
    what it serves (`RecordFile`). `served` counts the lines answered (those before
    `start` included)."""

    name = "replay"

    def __init__(self, run_dir: str | Path, fallthrough: Brain | None = None, start: int = 0) -> None:
        self.path = Path(run_dir) / RECORD
        self.fallthrough = fallthrough
        try:
            self._record = RecordFile(self.path, start)
        except OSError as exc:
            raise BrainError(f"cannot replay from {run_dir}: {exc.strerror or exc}: {self.path}") from None
        self._taken = 0
        self.missing = 0

    @property
    def served(self) -> int:
        return self._record.lines_before() + self._taken

    @override
    def describe(self) -> dict:
        out = {"name": "replay", "from": str(self.path.parent), "entries": self._record.lines()}
        if self.fallthrough is not None:
            out["fallthrough"] = self.fallthrough.describe()
        return out

    # The preflight is the base's: a fall-through model is reached only if the record lacks something.

    @override
    def answer(self, requests: Sequence[rq.Message]) -> Answers:
        out: list[rq.Message | None] = [None] * len(requests)
        fallbacks: list[Fallback] = []
        live: list[int] = []
        learn = self.fallthrough.learn if self.fallthrough is not None and self.fallthrough.learns else None
        for i, request in enumerate(requests):
            key = rq.request_key(request)
            try:
                line = self._record.take(key) if request.simulated else None  # not looked for in vain
            except (ValueError, KeyError):
                raise BrainError(f"{self.path}: not a record line near the answer to {key}") from None
            if line is None:
                if self.fallthrough is None:
                    raise BrainError(
                        f"request {key} ({request.kind} asked by {request.agent}) is not in the record "
                        f"{self.path}; --replay-fallthrough sends such requests to the live brain"
                    )
                live.append(i)
                continue
            entry = json.loads(line)
            self._taken += 1
            out[i] = rq.Message.registry[entry["answer"]["kind"]].from_dict(entry["answer"])
            if learn is not None:  # the live brain goes on knowing what the record answered
                learn(request, out[i])
            if "fallback" in entry:
                fallbacks.append(Fallback(i, request.kind, key, entry["fallback"]))
        if live:
            self.missing += len(live)
            answers = self.fallthrough.answer([requests[i] for i in live])
            for i, answer in zip(live, answers):
                out[i] = answer
            fallbacks += [Fallback(live[f.index], f.kind, f.key, f.error) for f in fallbacks_of(answers)]
            fallbacks.sort(key=lambda f: f.index)
        return Answers(out, fallbacks)


def teach(brain: Brain, run_dir: str | Path, size: int) -> None:
    """Let a brain that takes a run over know what the first `size` bytes of the run's
    record rated (its rating memo), as if it had asked for those ratings itself."""
    if not brain.learns or size == 0:
        return
    learn = brain.learn
    texts = Texts(Path(run_dir) / TEXTS)
    requests: dict[str, dict] = {}
    with open(Path(run_dir) / RECORD, "rb") as f:
        for line in f.read(size).splitlines():
            if b'"kind":"rate_importance"' not in line[:60] and b'"kind":"tag_memories"' not in line[:60]:
                continue
            entry = json.loads(line)
            requests.setdefault(entry["key"], entry.get("request"))
            if requests[entry["key"]] is not None:
                request = REQUEST_KINDS[entry["kind"]].from_dict(texts.unpack(requests[entry["key"]]))
                learn(request, ANSWER_OF[type(request)].from_dict(entry["answer"]))


def requests_of(run_dir: str | Path) -> dict[str, dict]:
    """Each request in a run's record, by key, whole (as `Message.to_dict` gives it), in the
    order first asked: of a record written with or without `answers.texts.jsonl`."""
    texts = Texts(Path(run_dir) / TEXTS)
    out: dict[str, dict] = {}
    with open(Path(run_dir) / RECORD, "rb") as f:
        for line in f:
            if b'"request":' in line and line.endswith(b"\n"):
                entry = json.loads(line)
                out.setdefault(entry["key"], texts.unpack(entry["request"]))
    return out


def recorded_keys(run_dir: str | Path, size: int) -> set[str]:
    """The request keys in the first `size` bytes of a run's record."""
    keys, read = set(), 0
    with open(Path(run_dir) / RECORD, "rb") as f:
        for line in f:  # a line at a time: a big town's record is large
            read += len(line)
            if read > size:
                break
            if line.strip():
                keys.add(_key_of(line))
    return keys


class Caching(Wrapper):
    """A persistent answer cache shared across runs: `DIR/answers.jsonl`, keyed by the
    request and a fingerprint of the brain (model, settings, template versions). Only
    valid answers are cached; `cached` in the ledger counts hits."""

    def __init__(self, inner: Brain, directory: str | Path, ledger: Ledger | None = None) -> None:
        super().__init__(inner)
        self.ledger = ledger or Ledger()
        settings = {
            k: v
            for k, v in inner.describe().items()
            if k
            not in (
                "max_concurrency",
                "concurrency_start",
                "concurrency_ceiling",
                "timeout",
                "retries",
                "backoff",
                "preflight",
                "structured_check",
                "routing",
                "cooldown",
                "allowed_fails",
            )
        }
        if isinstance(settings.get("model"), list):  # a list of deployments is one brain, wherever they are
            settings["model"] = sorted({d["model"] for d in settings["model"]})
        self.fingerprint = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        directory = Path(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.path = directory / RECORD
            self._answers: dict[str, dict] = {}
            if self.path.exists():
                for line in self.path.read_text(encoding="utf-8").splitlines():
                    try:
                        entry = json.loads(line)
                        self._answers[entry["key"]] = entry["answer"]
                    except (ValueError, KeyError):
                        continue  # a line cut short by a crash: ignore it
            self._out = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise BrainError(f"cannot use the cache {directory}: {exc.strerror or exc}") from None

    @override
    def describe(self) -> dict:
        return {**self.inner.describe(), "cache": str(self.path.parent)}

    @override
    def close(self) -> None:
        self._out.close()

    def _key(self, request: rq.Message) -> str:
        return f"{self.fingerprint}:{rq.request_key(request)}"

    @override
    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message | Failed]:
        out: list[rq.Message | Failed | None] = [None] * len(requests)
        todo = []
        for i, request in enumerate(requests):
            hit = self._answers.get(self._key(request))
            if hit is None:
                todo.append(i)
            else:
                self.ledger.add(request.kind, request.agent, cached=1)
                out[i] = rq.Message.registry[hit["kind"]].from_dict(hit)
        for i, answer in zip(todo, self.inner.answer([requests[i] for i in todo]) if todo else []):
            out[i] = answer
            if not isinstance(answer, Failed):
                key = self._key(requests[i])
                self._answers[key] = answer.to_dict()
                self._out.write(_line({"key": key, "answer": self._answers[key]}))
        self._out.flush()
        return out  # type: ignore[return-value]
