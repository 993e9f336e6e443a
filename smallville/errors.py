"""The exception tree.

    SmallvilleError            anything the user can fix; the CLI prints it in one line
     +-- ScenarioError         a scenario or agent file breaks the format (exit 2)
     +-- RunError              a run directory is missing, unreadable or incompatible
     +-- BrainError            a brain cannot answer at all (unreachable model, bad config)
"""

from __future__ import annotations


class SmallvilleError(Exception):
    """An error the user caused and can fix: reported as one line, no traceback."""

    exit_code = 1


class ScenarioError(SmallvilleError):
    """One or more problems in scenario or agent files; `problems` lists them all."""

    exit_code = 2

    def __init__(self, problems: list) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class RunError(SmallvilleError):
    """A run directory cannot be used as asked."""


class BrainError(SmallvilleError):
    """A brain cannot answer at all."""
