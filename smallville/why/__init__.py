"""Provenance: why an agent did what it did, and how news reached it, from a run's files alone.

    explain(run, agent, at=T | event=N, depth=K)   the account of a decision (`Accounts.why`)
    probe_chain(run, probe, agent)                 how a probe's news reached `agent` (`spread.chain`)
    probe_tree(run, probe)                         who told whom, when: the probe's whole spread

`run` is a `smallville.run.Run`; `Run.why` and `Run.probe_chain` call these.
"""

from __future__ import annotations

import json
from pathlib import Path

from smallville.brain.texts import TEXTS, Texts
from smallville.errors import UsageError
from smallville.events import LEARNED
from smallville.why.account import Accounts
from smallville.why.spread import chain, probe_words, spread
from smallville.why.trail import Trail

__all__ = ["Accounts", "Trail", "explain", "probe_chain", "probe_tree", "spread", "weights"]


def explain(
    run,
    agent: str,
    at: float | None = None,
    event: int | None = None,
    depth: int = 1,
    trail: Trail | None = None,
    kind: str | None = None,
) -> dict:
    """The account of the agent's decision at log line `event`, or its last at or before `at`
    seconds since the start (one of the two); with `kind`, its last decision of that kind
    (`say`, `plan`, ...) by `at`."""
    agent = run.agent_id(agent)
    if (at is None) == (event is None):
        raise UsageError("give one of --at TIME and --event N")
    if depth < 0:
        raise UsageError(f"--depth must be 0 or more, not {depth}")
    trail = trail or Trail.read(run.path)
    trail.require_recall()
    if event is None:
        event = trail.decision_at(agent, at, kind)
        if event is None:
            what = f"{kind} decision" if kind else "decision"
            raise UsageError(f"{agent} made no {what} by {run.when(at)}")
    out = Accounts(trail, Requests(run.path / "answers.jsonl").texts, weights(run.manifest)).why(agent, event, depth)
    if out["kind"] == LEARNED:  # the news followed back to its source, teller by teller
        probe = out["data"]["probe"]
        out["chain"] = chain(trail, probe, probe_words(run.scenario, probe), agent)
    return out


def probe_chain(run, probe: str, agent: str, trail: Trail | None = None) -> dict:
    """How `probe`'s news reached `agent`: the hops from its source (empty: it never learned)."""
    agent = run.agent_id(agent)
    words = probe_words(run.scenario, probe)
    trail = trail or Trail.read(run.path)
    return {
        "probe": probe,
        "agent": agent,
        "chain": chain(trail, probe, words, agent),
        "recorded": trail.records_recall,
    }


def probe_tree(run, probe: str, trail: Trail | None = None) -> dict:
    """The spread of `probe` as a tree: each agent who came to know it, once, by the time it
    did, with who told it (`from`; none for a source), in which conversation and how the
    teller had the news in mind (`via`); and the tree's depth."""
    words = probe_words(run.scenario, probe)
    told = spread(trail or Trail.read(run.path), probe, words)
    hops = sorted((c[-1] for c in told["chains"].values() if c), key=lambda h: (h["t"], h["line"]))
    return {"probe": probe, "depth": told["depth"], "recalled_share": told["recalled_share"], "hops": hops}


def weights(manifest) -> tuple[float, float, float]:
    """The retrieval weights (recency, importance, relevance) a run's manifest says it used."""
    return tuple((manifest.config or {}).get("weights") or (1.0, 1.0, 1.0))


class Requests:
    """The requests of an answer record (`answers.jsonl`), by key: each as the texts it
    carries (what its prompt showed). The record is indexed on first use (each line begins
    with its key) and a request parsed only when asked for; the strings it refers to in
    `answers.texts.jsonl` are read with the first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[str, int] | None = None
        self.shared = Texts(path.parent / TEXTS)  # the long strings the requests refer to

    def texts(self, key: str) -> str | None:
        if self.offsets is None:
            self.offsets = {}
            if self.path.exists():
                with open(self.path, "rb") as f:
                    at = 0
                    for line in f:
                        if b'"request":' in line and line.endswith(b"\n"):
                            self.offsets.setdefault(line[8:24].decode(), at)
                        at += len(line)
        if key not in self.offsets:
            return None
        with open(self.path, "rb") as f:
            f.seek(self.offsets[key])
            return "\n".join(strings(self.shared.unpack(json.loads(f.readline()).get("request"))))


def strings(value) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []
