"""A checkpoint's head, typed: what `T/head.json` says about the checkpoint at T."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Head:
    """A checkpoint's head. `t` is its simulated second and `time` the date-time; `files`
    the length in bytes of the run's logs then (events.jsonl, answers.jsonl); `digest` the
    state's, as its `schema` defines it (`smallville.checkpoint.hashing`). Schema 3 on, `root`
    is where the state's root part is; schema 4 on, `memory` the memory streams' counts, rows
    and settings (`smallville.checkpoint.streams`); `accessed` the checkpoint whose full
    last-access times this one's are a diff against (None: it has every one). Schema 2 holds
    the whole `state` in its head. `data` is the head as written."""

    schema: int | None
    t: float
    time: str
    files: dict[str, int] = field(default_factory=dict)
    digest: str = ""
    root: list | None = None
    memory: dict | None = None
    accessed: float | None = None
    state: dict | None = None
    data: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, data: dict) -> Head:
        """The head `data` (a head.json, or a schema 1 or 2 state.json) describes."""
        return cls(
            data.get("schema"),
            data["t"],
            data.get("time", ""),
            dict(data.get("files") or {}),
            data.get("digest", ""),
            data.get("root"),
            data.get("memory"),
            data.get("accessed"),
            data.get("state"),
            data,
        )
