"""Wrappers with the brain interface around any brain: retries with backoff, safe
fallbacks, and reuse of importance ratings. The LLM brain is assembled from them:

    WithFallbacks(Retrying(RatingMemo(LLMBrain)))

Inner layers may answer `Failed`; `WithFallbacks` guarantees the engine never sees it.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from smallville.brain import requests as rq
from smallville.brain.base import Answers, Brain, Failed, Fallback, Wrapper, override
from smallville.brain.kinds import safe_answer
from smallville.brain.ledger import Ledger
from smallville.errors import BrainError, ModelUnusable


class Retrying(Wrapper):
    """Asks again for what failed, up to `retries` times, waiting `backoff` seconds before
    the first retry and doubling it after each, or longer when a server said how long to
    wait (Retry-After, up to `MAX_WAIT`). A retry round is one batch."""

    MAX_WAIT = 120.0

    def __init__(
        self,
        inner: Brain,
        retries: int = 2,
        backoff: float = 1.0,
        ledger: Ledger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(inner)
        self.retries, self.backoff, self.ledger, self.sleep = retries, backoff, ledger or Ledger(), sleep

    @override
    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message | Failed]:
        answers = list(self.inner.answer(requests))
        for attempt in range(self.retries):
            todo = [i for i, a in enumerate(answers) if isinstance(a, Failed) and a.retryable]
            if not todo:
                break
            asked = max((answers[i].retry_after or 0.0 for i in todo), default=0.0)
            wait = min(max(self.backoff * 2**attempt, asked), max(self.MAX_WAIT, self.backoff))
            if wait:
                self.sleep(wait)
            for i in todo:
                self.ledger.add(requests[i].kind, requests[i].agent, retries=1)
            for i, a in zip(todo, self.inner.answer([requests[i] for i in todo])):
                answers[i] = a
        return answers


class WithFallbacks(Wrapper):
    """Replaces each `Failed` with the request's safe default (`kinds.safe_answer`) and lists it
    among the `Answers`' fallbacks. If no answer ever came and a whole batch failed to connect, the
    model is unreachable: that is a `BrainError`, not a run of fallbacks. If more than half
    of the first `WATCH` requests, or of the first `WATCH` of one kind (a town's first
    requests are mostly ratings: day plans cut off at max_tokens would hide among them), fall
    back with the same lasting error, the model cannot serve this run as set up:
    `ModelUnusable`, and every answer after says the same (the first to find it names the
    count). Flaky faults (rate limits, timeouts, server errors) never count toward that."""

    WATCH = 20

    def __init__(self, inner: Brain, ledger: Ledger | None = None) -> None:
        super().__init__(inner)
        self.ledger = ledger or Ledger()
        self._answered = False
        self._watched: Counter[str] = Counter()  # requests watched: of all kinds (""), of each kind
        self._lasting: Counter[tuple[str, str]] = Counter()
        self._unusable: str | None = None  # why, once found: every later answer says the same
        self._lock = threading.Lock()

    @override
    def answer(self, requests: Sequence[rq.Message]) -> Answers:
        answers = self.inner.answer(requests)
        failed = [a for a in answers if isinstance(a, Failed)]
        if (
            failed
            and not self._answered
            and len(failed) == len(answers)
            and all(f.reason == "connection" for f in failed)
        ):
            raise BrainError(f"model {self.name!r} is unreachable: {failed[0]}")
        self._answered = self._answered or len(failed) < len(answers)
        out, fallbacks = [], []
        for i, (request, answer) in enumerate(zip(requests, answers)):
            answer, error = self._settle(request, answer)
            if error is not None:
                fallbacks.append(Fallback(i, request.kind, rq.request_key(request), error))
            out.append(answer)
        return Answers(out, fallbacks)

    @override
    def answer_one(self, request: rq.Message) -> tuple[rq.Message, str | None]:
        """One request's answer and, if it is a safe default, the last error: safe to call
        from several threads at once (run-ahead sends requests one by one)."""
        [answer] = self.inner.answer([request])
        if isinstance(answer, Failed) and not self._answered and answer.reason == "connection":
            raise BrainError(f"model {self.name!r} is unreachable: {answer}")
        self._answered = self._answered or not isinstance(answer, Failed)
        return self._settle(request, answer)

    def _settle(self, request: rq.Message, answer) -> tuple[rq.Message, str | None]:
        self.ledger.add(request.kind, request.agent, requests=1)
        self._watch(request.kind, answer)
        if not isinstance(answer, Failed):
            return answer, None
        self.ledger.add(request.kind, request.agent, fallbacks=1)
        return safe_answer(request), str(answer)

    def _watch(self, kind: str, answer) -> None:
        fault = lasting(answer) if isinstance(answer, Failed) else None
        with self._lock:
            if self._unusable is not None:
                raise ModelUnusable(self._unusable)
            for window in ("", kind):
                if self._watched[window] >= self.WATCH:
                    continue
                self._watched[window] += 1
                if fault is None:
                    continue
                self._lasting[window, fault] += 1
                if self._lasting[window, fault] > self.WATCH // 2:
                    which = f"{kind} requests" if window else "requests"
                    self._unusable = (
                        f"model {self.name!r}: {self._lasting[window, fault]} of the first "
                        f"{self._watched[window]} {which} fell back with the same error ({answer}); "
                        f"{fix_for(answer, kind)}"
                    )
                    raise ModelUnusable(self._unusable)


def lasting(failed: Failed) -> str | None:
    """What kind of lasting fault `failed` is, or None for a flaky one worth retrying."""
    from smallville.brain.llm import names_format

    if names_format(failed.error):
        return "format"
    if failed.reason in ("schema", "bad_json"):
        return "cut" if "cut off at max_tokens" in failed.error else "schema"
    if failed.reason == "refused":
        return "refused:" + failed.error.split(":", 1)[0]
    return None


def fix_for(failed: Failed, kind: str = "") -> str:
    """The setting that mends a lasting fault of a request of `kind`, in a few words."""
    fault = lasting(failed) or ""
    if fault == "format":
        return "the server does not take this structured-output mode: set structured: json_object (or prompt)"
    if fault == "cut":
        return f"answers are cut off: raise {cut_setting(failed, kind)} in the brain settings"
    if fault == "schema":
        return (
            "the model's answers do not keep to their JSON schema: use structured: json_schema or json_object "
            "if the server can enforce it, or a stronger model"
        )
    if "Authentication" in fault or "PermissionDenied" in fault:
        return "the key was refused: check it (api_key_env names the variable it is read from)"
    if "NotFound" in fault:
        return "check the model's name (--brain) and --api-base"
    if "ContextWindow" in fault:
        return "prompts are too long for the model: use one with a longer context, or lower max_tokens"
    return "check the brain settings (docs/llm.md)"


def cut_setting(failed: Failed, kind: str = "") -> str:
    """The setting to raise for an answer cut off at max_tokens: the room for reasoning when
    most of what was cut went on reasoning, else the kind's max_tokens."""
    spent = re.search(r"(\d+) of (\d+) tokens on reasoning", failed.error)
    if spent and 2 * int(spent.group(1)) >= int(spent.group(2)):
        return "reasoning_tokens"
    return f"kinds.{kind}.max_tokens" if kind else "max_tokens"


RATINGS = (rq.RateImportance, rq.TagMemories)
"""The requests that rate memories: each text is rated once per agent (`RatingMemo`)."""


def _rating_keys(request: rq.Message) -> list[tuple]:
    """Each text's key in the memo: a tag also depends on the memory's kind."""
    if isinstance(request, rq.TagMemories):
        return [(request.agent, k, t) for k, t in zip(request.kinds, request.texts)]
    return [(request.agent, t) for t in request.texts]


def _only(request: rq.Message, keep: list[int]) -> rq.Message:
    """The rating request for the texts at `keep` only."""
    texts = tuple(request.texts[i] for i in keep)
    return replace(request, texts=texts, kinds=tuple(request.kinds[i] for i in keep) if request.kinds else ())


def _ratings_of(answer: rq.Message) -> tuple | None:
    """An answer's ratings, one per text (None for an answer that is none)."""
    if isinstance(answer, rq.Importance):
        return answer.scores
    if isinstance(answer, rq.Tags):
        return answer.tags
    return None


class RatingMemo(Wrapper):
    """Rates each distinct observation text once per agent: a rating request (importance,
    or the salience model's tags) whose texts were all rated before is answered from memory,
    and known texts are left out of the rest. `reused` in the ledger counts ratings taken
    from memory."""

    learns = True  # the ratings a run's record gave

    def __init__(self, inner: Brain, ledger: Ledger | None = None) -> None:
        super().__init__(inner)
        self.ledger = ledger or Ledger()
        self._scores: dict[tuple, object] = {}

    @override
    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message | Failed]:
        out: list[rq.Message | Failed | None] = [None] * len(requests)
        asked: list[tuple[int, rq.Message]] = []
        for i, request in enumerate(requests):
            if not isinstance(request, RATINGS):
                asked.append((i, request))
                continue
            first = {}  # each missing key's first text
            for j, key in enumerate(_rating_keys(request)):
                if key not in self._scores:
                    first.setdefault(key, j)
            missing = list(first.values())
            known = len(request.texts) - len(missing)
            if known:
                self.ledger.add(request.kind, request.agent, reused=known)
            if missing:
                asked.append((i, request if len(missing) == len(request.texts) else _only(request, missing)))
            else:
                out[i] = self._rated(request)
        for (i, sent), answer in zip(asked, self.inner.answer([r for _, r in asked]) if asked else []):
            if isinstance(sent, RATINGS) and _ratings_of(answer) is not None:
                self.learn(sent, answer)
                answer = self._rated(requests[i])
            out[i] = answer
        return out  # type: ignore[return-value]

    @override
    def learn(self, request: rq.Message, answer: rq.Message) -> None:
        """Ratings the record gave are known, as if this memo had asked for them."""
        ratings = _ratings_of(answer)
        if isinstance(request, RATINGS) and ratings is not None:
            self._scores.update(zip(_rating_keys(request), ratings))

    def _rated(self, request: rq.Message) -> rq.Message:
        ratings = tuple(self._scores[key] for key in _rating_keys(request))
        return rq.Tags(ratings) if isinstance(request, rq.TagMemories) else rq.Importance(ratings)
