"""Ctrl-C (or SIGTERM) during a run, taken at the end of a step so that no state is torn."""

from __future__ import annotations


class CtrlC:
    """Ctrl-C during a run: the first press stops it at the end of the step under way (every
    15 simulated minutes, after a checkpoint if one is due), so no state is torn; a second
    press stops it at once. SIGTERM (`kill`, `timeout`, a batch scheduler's notice) is taken
    the same way. Outside the main thread (no signals there) it does nothing."""

    def __init__(self) -> None:
        self.pressed = False
        self._before: dict = {}

    def __enter__(self) -> CtrlC:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._before = {sig: signal.signal(sig, self._press) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _press(self, signum, frame) -> None:
        import signal
        import sys

        self.pressed = True
        for sig in self._before:  # the second: at once
            signal.signal(sig, signal.default_int_handler)
        again = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        sys.stderr.write(f"\nsmallville: stopping at the end of this step ({again} again to stop now)\n")

    def __exit__(self, *exc) -> None:
        import signal

        for sig, before in self._before.items():
            signal.signal(sig, before)
        self._before = {}
