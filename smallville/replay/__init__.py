"""Looking at a finished (or interrupted) run again, without any model."""

from smallville.replay.record import RunRecord, load_run

__all__ = ["RunRecord", "load_run"]
