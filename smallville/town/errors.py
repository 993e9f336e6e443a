"""What can go wrong making a town, as errors the command line reports in one line (exit 2)."""

from __future__ import annotations

from smallville.errors import UsageError


class TownExists(UsageError):
    """Writing the town would overwrite files."""


class TownTooLarge(UsageError):
    """A town needs more names or more map legend characters than there are; the message says which and the limit."""
