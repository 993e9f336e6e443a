"""The exception tree, and the exit status of each branch on the command line.

    SmallvilleError            something the user can act on; the CLI prints it in one line
     |                         (exit 1: the run or the machine failed)
     +-- UsageError            bad input from the user (exit 2): an unknown agent, a malformed
     |    |                    time or one outside the run, a path that is not a run, ...
     |    +-- ScenarioError    a scenario or agent file breaks the format (exit 2)
     +-- RunError              a run directory is damaged, unreadable or incompatible
     +-- BrainError            a brain cannot answer at all (unreachable model, bad config)
"""

from __future__ import annotations


class SmallvilleError(Exception):
    """An error the user can act on: reported as one line, no traceback."""

    exit_code = 1


class UsageError(SmallvilleError):
    """The user asked for something that cannot be: fix the command line and try again."""

    exit_code = 2


class ScenarioError(UsageError):
    """One or more problems in scenario or agent files; `problems` lists them all."""

    def __init__(self, problems: list) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class RunError(SmallvilleError):
    """A run directory cannot be used as asked."""


class BrainError(SmallvilleError):
    """A brain cannot answer at all."""
