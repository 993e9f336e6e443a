"""Ctrl-C during a run, taken at the end of a step so that no state is torn."""

from __future__ import annotations


class CtrlC:
    """Ctrl-C during a run: the first press stops it at the end of the step under way (every
    15 simulated minutes, after a checkpoint if one is due), so no state is torn; a second
    press stops it at once. Outside the main thread (no signals there) it does nothing."""

    def __init__(self) -> None:
        self.pressed = False
        self._before = None

    def __enter__(self) -> CtrlC:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGINT, self._press)
        return self

    def _press(self, signum, frame) -> None:
        import signal
        import sys

        self.pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second press: at once
        sys.stderr.write("\nsmallville: stopping at the end of this step (Ctrl-C again to stop now)\n")

    def __exit__(self, *exc) -> None:
        import signal

        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)
