"""Every exception smallville raises, in one tree, and the exit status of each on the command line.

    SmallvilleError              something the user can act on, said in one line  (exit 1)
     |
     +-- UsageError              bad input: an unknown agent, a malformed time or one
     |    |                      outside the run, a path that is not a run, ...   (exit 2)
     |    +-- UnknownAgent       an agent id or name the run does not have (on
     |    |                      `serve`'s pages: HTTP 404)                       (exit 2)
     |    +-- ScenarioError      a scenario or agent file breaks the format, one
     |    |                      line per problem                                 (exit 2)
     |    +-- ExperimentError    an experiment file or its flags cannot be run     (exit 2)
     |    +-- TownExists         writing a generated town would overwrite files   (exit 2)
     |    +-- TownTooLarge       a generated town needs more names or legend
     |    |                      characters than there are                        (exit 2)
     |    +-- NotRecorded        `why` of a run written before recall was
     |                           recorded: it cannot say what a decision rested on (exit 2)
     +-- RunError                a run folder is damaged, unreadable or of
     |    |                      another version                                  (exit 1)
     |    +-- Unreproduced       `verify`: the re-simulation left the run's record (exit 1)
     +-- BrainError              a brain cannot answer at all: unreachable model,
     |    |                      bad settings                                     (exit 1)
     |    +-- KeyMissing         a hosted model's API key is not in the
     |    |                      environment (a setup error)                      (exit 2)
     |    +-- ModelUnusable      most first requests failed alike: the run stops,
     |                           kept and resumable                               (exit 1)
     +-- BudgetExhausted         the next batch could pass a spending limit: the
     |                           run stops, kept and resumable                    (exit 3)
     +-- ExtraMissing            an optional dependency is not installed (also an
     |                           ImportError)                                     (exit 1)
     +-- Interrupted             Ctrl-C: what was written is kept               (exit 130)

    Signals caught where they are raised, never shown to a user:

    AnswerError(ValueError)      a model's reply is not a valid answer (it is retried)
    Stopped(KeyboardInterrupt)   Ctrl-C or SIGTERM taken at the end of a step (the run ends `interrupted`)
    Differs                      `verify` found the first difference (it becomes `Unreproduced`)
    Truncated                    a followed log became shorter (the page starts the run again)
    Outside(LookupError)         `serve` was asked for a path that is no run under its folder
    BadRequest(ValueError)       `serve` was sent a request it cannot read (HTTP 400)

The command line prints `report()` of a `SmallvilleError` (an `OSError` becomes one through
`as_error`) and exits with its `exit_code`; a run that ends stopped exits with the code of
what stopped it.
"""

from __future__ import annotations


class SmallvilleError(Exception):
    """An error the user can act on: reported as one line, no traceback."""

    exit_code = 1

    def report(self) -> str:
        """What the command line prints."""
        return f"smallville: error: {self}"


class UsageError(SmallvilleError):
    """The user asked for something that cannot be: fix the command line and try again."""

    exit_code = 2


class UnknownAgent(UsageError):
    """An agent id or name the run does not have: the message lists the ids it has."""


class ScenarioError(UsageError):
    """One or more problems in scenario or agent files; `problems` lists them all."""

    def __init__(self, problems: list[object]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def report(self) -> str:
        """Each problem on a line of its own, `FILE:LINE:COLUMN: what is wrong`."""
        return str(self)


class ExperimentError(UsageError):
    """An experiment file or its flags cannot be run as written."""


class TownExists(UsageError):
    """Writing a generated town would overwrite files (like other bad arguments)."""


class TownTooLarge(UsageError):
    """A generated town needs more names or map legend characters than there are; the
    message says which and the limit."""


class NotRecorded(UsageError):
    """`why` was asked of a run written before smallville recorded what each request recalled."""


class RunError(SmallvilleError):
    """A run directory cannot be used as asked."""


class Unreproduced(RunError):
    """`verify`: re-simulating the run did not give what it wrote; the message says where."""

    def report(self) -> str:
        return f"smallville: {self}"


class BrainError(SmallvilleError):
    """A brain cannot answer at all."""


class KeyMissing(BrainError):
    """A hosted model needs a key that is not in the environment: a setup error, so exit 2."""

    exit_code = 2


class ModelUnusable(BrainError):
    """Most of a run's first requests fell back with the same error that no retry mends
    (a refused request, answers off the schema): the run stops rather than go on with
    safe defaults, and says which setting fixes it."""


class BudgetExhausted(SmallvilleError):
    """The next batch could pass a limit: the run stops (exit 3). `which` limit (requests,
    tokens or usd), its value, what was spent and what the batch could need."""

    exit_code = 3
    FLAGS = {"requests": "--max-requests", "tokens": "--max-tokens", "usd": "--budget"}
    UNITS = {"requests": "model calls", "tokens": "tokens", "usd": "USD"}

    def __init__(self, which: str, limit: float, spent: float, needed: float) -> None:
        self.which, self.limit, self.spent, self.needed = which, limit, spent, needed
        super().__init__(
            f"budget reached: {self.amount(spent)} of {self.FLAGS[which]} {self.amount(limit)} "
            f"{self.UNITS[which]} spent, and the next batch could take up to {self.amount(needed)} more"
        )

    def amount(self, value: float) -> str:
        """A figure of this limit's unit as a user gives it (dollars to four places, else whole)."""
        return f"{value:.4f}" if self.which == "usd" else f"{int(value)}"

    def data(self) -> dict[str, object]:
        """The stop as the manifest's `budget_stop` keeps it."""
        return {"limit": self.FLAGS[self.which].lstrip("-"), "value": self.limit, "spent": self.spent}


class ExtraMissing(SmallvilleError, ImportError):
    """An optional dependency is not installed (plots need matplotlib, `to_pandas` pandas):
    the message says what to install. An ImportError too, as Python callers expect."""


class Interrupted(SmallvilleError):
    """Ctrl-C: the run or experiment stopped, and what was written is kept (exit 130, as a
    shell reports an interrupt)."""

    exit_code = 130

    def report(self) -> str:
        return str(self)


def as_error(exc: SmallvilleError | OSError) -> SmallvilleError:
    """`exc` as the user is to see it: an OSError (a runs folder that cannot be written, a
    full disk) in one line naming the file, exit 1."""
    if isinstance(exc, SmallvilleError):
        return exc
    return SmallvilleError(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))


# -- signals, caught where they are raised ----------------------------------------------


class AnswerError(ValueError):
    """A model's reply is not a valid answer: `reason` is `bad_json` or `schema`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, taken at the end of a step: the run's state is whole."""


class Differs(Exception):
    """The re-simulation of `verify` left the run's record: the first difference, in words."""


class Truncated(Exception):
    """A followed log is shorter than the offset: the run was cut back (resumed from a checkpoint)."""


class Outside(LookupError):
    """A run path that is no run folder under the served folder (or leaves it)."""


class BadRequest(ValueError):
    """A request to `serve` it cannot read."""
