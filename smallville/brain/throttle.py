"""How many model calls may be in flight at once: a number the settings pin, or one found
by additive increase and multiplicative decrease, as TCP finds a link's capacity.

Adaptive, the limit starts at `start` and grows by one with every answer (doubling each
round of calls) until the first rate limit or timeout; from then on by one per round. A 429
or a Retry-After halves it, once per round: the other calls of the round that was already in
flight when it came say nothing new. A call that timed out cuts it too, once per round, to
half of it or half the answers that came in the last `window` seconds (the call's timeout),
whichever is less: a local server that answers one call at a time queues the others until
they time out, and the answers of the last timeout's length are as many calls as it gets
through in one. It stays between 1 and `ceiling`.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class Throttle:
    """`with throttle.slot() as ticket:` around each call; then `ticket.answered()`,
    `ticket.rate_limited()` or `ticket.timed_out()`."""

    def __init__(self, start: int, ceiling: int, adaptive: bool = True, window: float = 60.0) -> None:
        self.adaptive = adaptive
        self.window = window
        self._answers: deque[float] = deque()  # when the answers of the last `window` seconds came
        self.ceiling = ceiling
        self.limit = float(start if adaptive else ceiling)
        self.reached = int(self.limit)  # the highest limit so far
        self.cuts = 0  # halvings
        self._in_flight = 0
        self._round = 0  # bumped by each halving
        self._congested = False  # a rate limit was met: grow slowly from now on
        self._cond = threading.Condition()

    def slot(self) -> _Ticket:
        return _Ticket(self)

    def _enter(self) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self._in_flight < int(self.limit))
            self._in_flight += 1
            return self._round

    def _exit(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify()

    def _answered(self) -> None:
        if not self.adaptive:
            return
        with self._cond:
            self._answers.append(time.monotonic())
            self._forget()
            step = 1.0 / self.limit if self._congested else 1.0
            self.limit = min(float(self.ceiling), self.limit + step)
            self.reached = max(self.reached, int(self.limit))
            self._cond.notify_all()

    def _cut(self, started_in: int, timed_out: bool = False) -> None:
        if not self.adaptive:
            return
        with self._cond:
            self._congested = True
            if started_in != self._round:  # this round was cut already
                return
            self._round += 1
            self.cuts += 1
            self.limit = max(1.0, self.limit / 2)
            if timed_out:
                self._forget()
                self.limit = max(1.0, min(self.limit, len(self._answers) / 2))

    def _forget(self) -> None:
        """Drop the answers older than `window` seconds."""
        since = time.monotonic() - self.window
        while self._answers and self._answers[0] < since:
            self._answers.popleft()

    def describe(self) -> dict:
        return {
            "adaptive": self.adaptive,
            "limit": int(self.limit),
            "reached": self.reached,
            "cuts": self.cuts,
            "ceiling": self.ceiling,
        }


class _Ticket:
    def __init__(self, throttle: Throttle) -> None:
        self.throttle = throttle
        self.started_in = 0

    def __enter__(self) -> _Ticket:
        self.started_in = self.throttle._enter()
        return self

    def __exit__(self, *exc) -> None:
        self.throttle._exit()

    def answered(self, label: str | None = None) -> None:
        self.throttle._answered()

    def rate_limited(self, label: str | None = None) -> None:
        self.throttle._cut(self.started_in)

    def timed_out(self, label: str | None = None) -> None:
        self.throttle._cut(self.started_in, timed_out=True)


class Pool:
    """The calls in flight to a model of several deployments (deployments.py): each deployment
    has a limit of its own, found as a lone server's is (a `Throttle` of each: its answers
    raise it, its rate limits and timeouts cut it), and at most the sum of their limits are in flight at
    once. Which deployment a call goes to, litellm's Router decides as it is made, so a
    ticket is told afterwards: `ticket.answered(label)` or `ticket.rate_limited(label)`."""

    def __init__(self, throttles: dict[str, Throttle]) -> None:
        self.throttles = throttles
        self._in_flight = 0
        self._cond = threading.Condition()

    def slot(self) -> _PoolTicket:
        return _PoolTicket(self)

    def limit(self) -> int:
        return sum(int(t.limit) for t in self.throttles.values())

    def _enter(self) -> dict[str, int]:
        with self._cond:
            self._cond.wait_for(lambda: self._in_flight < self.limit())
            self._in_flight += 1
            return {label: t._round for label, t in self.throttles.items()}

    def _exit(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify()

    def _answered(self, label: str | None) -> None:
        if label in self.throttles:
            self.throttles[label]._answered()
            with self._cond:
                self._cond.notify_all()

    def _cut(self, label: str | None, rounds: dict[str, int], timed_out: bool = False) -> None:
        if label in self.throttles:
            self.throttles[label]._cut(rounds[label], timed_out)

    def describe(self) -> dict:
        each = {label: t.describe() for label, t in self.throttles.items()}
        return {
            "adaptive": any(t.adaptive for t in self.throttles.values()),
            "limit": self.limit(),
            "reached": sum(d["reached"] for d in each.values()),
            "cuts": sum(d["cuts"] for d in each.values()),
            "ceiling": sum(t.ceiling for t in self.throttles.values()),
            "deployments": each,
        }


class _PoolTicket:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.rounds: dict[str, int] = {}

    def __enter__(self) -> _PoolTicket:
        self.rounds = self.pool._enter()
        return self

    def __exit__(self, *exc) -> None:
        self.pool._exit()

    def answered(self, label: str | None = None) -> None:
        self.pool._answered(label)

    def rate_limited(self, label: str | None = None) -> None:
        self.pool._cut(label, self.rounds)

    def timed_out(self, label: str | None = None) -> None:
        self.pool._cut(label, self.rounds, timed_out=True)
