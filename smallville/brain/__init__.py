"""Brains answer the typed requests agents make; see `requests` for the vocabulary."""

from __future__ import annotations

from smallville.brain.base import Brain
from smallville.errors import BrainError


def make_brain(spec: str, seed: int) -> Brain:
    """The brain named on the command line: `offline` (the default)."""
    if spec == "offline":
        from smallville.brain.offline import OfflineBrain

        return OfflineBrain(seed)
    raise BrainError(f"unknown brain {spec!r}: this version has only the offline brain (--brain offline)")


__all__ = ["Brain", "make_brain"]
