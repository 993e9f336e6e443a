"""A checkpoint's state as parts that refer back: what a checkpoint writes of the state is
only what differs from the previous checkpoint's (`Saved`); for the rest it refers to where
that already is, `[T, offset, length]` in bytes of `T/parts.jsonl`.

- the root part is the state with each agent replaced by a reference to its record, and the
  objects (a list) by a patched dict's references;
- a record is an agent's state with its plan a reference, its dicts (`PATCHED`) each a list
  of references to dicts merged in order (the dict whole, then patches of what changed or
  was added, at most `SEGMENTS`), and its random generator as words written once and how
  many times to twist them (at most `TWISTS`).

An agent's plan that did not change since the previous checkpoint is not encoded again, nor
is an agent whose state did not change (the same digest, `smallville.checkpoint.hashing`):
the reference to its plan, or to its record, is the previous checkpoint's.

So a checkpoint is read by following references at most three deep, however many came
before it (docs/run-format.md).
"""

from __future__ import annotations

import json
import marshal
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from smallville.checkpoint.hashing import agent_digest, text

PARTS = "parts.jsonl"
PATCHED = ("relationships", "talks", "last_talk", "earlier_lines", "seen", "mind", "salience")  # an agent's dicts;
# a record may lack some (`salience` is kept only under the salience
# memory model), so each is patched only where the state has it
SEGMENTS = 8  # a dict's parts at most: the first whole, then patches
TWISTS = 64  # twists of an rng's words at most before they are written again
WORDS = 624  # the Mersenne Twister's state, in 32-bit words


def folder_name(t: float) -> str:
    """A checkpoint's folder: the simulated second, zero-padded (`000007200`)."""
    return f"{int(t):09d}"


def copy_dict(value: dict) -> dict:
    """A dict's copy that the agent's changes to its lists (earlier lines) leave alone."""
    return {k: list(v) if isinstance(v, list) else v for k, v in value.items()}


class Twists:
    """An rng's words as `twists` twists of words written once at `ref`."""

    def __init__(self, words: tuple[int, ...], ref: list, twists: int = 0) -> None:
        self.ref, self.twists = ref, twists
        self._rng = random.Random()
        self._rng.setstate((3, tuple(words) + (WORDS,), None))
        if twists:
            self._rng.getrandbits(32 * WORDS * twists)  # from position 624: exactly `twists` twists
        self.words = self._rng.getstate()[1][:WORDS]

    def reach(self, words: tuple[int, ...], most: int = 16) -> bool:
        """Twist on (at most `most` times, and `TWISTS` in all) until the words are `words`."""
        for _ in range(most):
            if self.words == words or self.twists == TWISTS:
                break
            self._rng.getrandbits(32 * WORDS)
            self.twists += 1
            self.words = self._rng.getstate()[1][:WORDS]
        return self.words == words


@dataclass
class Kept:
    """An agent as a checkpoint holds it: its digest, its record's JSON and reference, and its
    plan's (with the plan's `marshal` bytes, which are equal only for an equal plan of the
    same types: 5 and 5.0 differ), so a later checkpoint can refer to them."""

    digest: str
    record: tuple[str, list]
    plan: tuple[bytes, str, list]


@dataclass
class Saved:
    """What a checkpoint holds, kept on the simulation (`sim.checkpointed`) once written or
    restored, so that the next checkpoint of the same run writes only what changed."""

    root: Path  # the run's checkpoints folder
    t: float
    refs: dict[str, list] = field(default_factory=dict)  # a part's JSON -> where it is
    dicts: dict[tuple[str, str], tuple[dict, list]] = field(default_factory=dict)  # value, parts
    rngs: dict[str, Twists] = field(default_factory=dict)
    accessed: tuple[float, list[np.ndarray]] | None = None  # the last full times: T, per agent
    memories: dict[str, int] = field(default_factory=dict)  # how many each agent's stream held
    rows: dict[str, int] | None = None  # each stream's distinct embeddings, if its pieces are in this run's checkpoints
    anchor: tuple[float, dict[str, int], dict[str, int]] | None = None  # with `rows`: the streams' last anchor
    since_anchor: int = 0  # (T, memories, rows) and the pieces since (`checkpoint.streams`)
    agents: dict[str, Kept] = field(default_factory=dict)  # those written by a Writer

    def usable(self, root: Path, t: float) -> bool:
        """Whether a checkpoint of `root` at `t` may refer to what this one holds."""
        return self.root == root.resolve() and self.t < t and (root / folder_name(self.t) / PARTS).exists()


# -- writing ----------------------------------------------------------------------------


class Writer:
    """Appends the parts of one checkpoint that `before` does not hold already."""

    def __init__(self, root: Path, t: float, out, before: Saved | None) -> None:
        self.t, self.out, self.offset = int(t), out, 0
        self.before = before or Saved(root.resolve(), -1.0)
        self.now = Saved(root.resolve(), t)

    def put(self, value) -> list:
        return self.put_text(text(value))

    def put_text(self, written: str) -> list:
        ref = self.before.refs.get(written)
        if ref is None:
            data = written.encode("utf-8")
            ref = [self.t, self.offset, len(data)]
            self.out.write(data + b"\n")
            self.offset += len(data) + 1
        self.now.refs[written] = ref
        return ref

    def patched(self, key: tuple[str, str], value: dict) -> list:
        """A dict as parts: the previous checkpoint's plus a patch of what changed, if it only
        gained or changed keys and has fewer than `SEGMENTS` parts; else whole."""
        old, parts = self.before.dicts.get(key, (None, []))
        if old is not None and len(parts) < SEGMENTS and old.keys() <= value.keys():
            patch = {k: v for k, v in value.items() if k not in old or old[k] != v or type(old[k]) is not type(v)}
            if not patch:  # the same: held again, not copied
                self.now.dicts[key] = (old, parts)
                return parts
            parts = parts + [self.put(patch)]
        else:
            parts = [self.put(value)]
        self.now.dicts[key] = (copy_dict(value), parts)
        return parts

    def words(self, agent_id: str, words: tuple[int, ...]) -> Twists:
        twists = self.before.rngs.get(agent_id)
        if twists is None or not twists.reach(words):
            twists = Twists(words, self.put(words))
        self.now.rngs[agent_id] = twists
        return twists

    def record(self, agent_id: str, state: dict) -> list:
        """A reference to the agent's record: the previous checkpoint's if its digest is the
        same (nothing of it encoded again), else a new one."""
        self.now.memories[agent_id] = state["memories"]
        kept = self.before.agents.get(agent_id)
        plan = self.plan(kept, state["plan"])
        digest = agent_digest(state, plan[1])
        if kept is not None and kept.digest == digest:
            return self.keep(agent_id, kept)
        record = {**state, "plan": plan[2]}
        for name in (n for n in PATCHED if n in state):
            record[name] = self.patched((agent_id, name), state[name])
        version, internal, gauss = state["rng"]
        twists = self.words(agent_id, tuple(internal[:WORDS]))
        record["rng"] = [version, internal[WORDS], gauss, twists.twists, twists.ref]
        written = text(record)
        self.now.agents[agent_id] = Kept(digest, (written, self.put_text(written)), plan)
        return self.now.agents[agent_id].record[1]

    def plan(self, kept: Kept | None, plan: list) -> tuple[bytes, str, list]:
        """A plan's `marshal` bytes, JSON and reference: those kept if it is the same."""
        key = marshal.dumps(plan, 2)  # version 2: no references, so equal plans give equal bytes
        if kept is not None and kept.plan[0] == key:
            self.now.refs[kept.plan[1]] = kept.plan[2]
            return kept.plan
        written = text(plan)
        return key, written, self.put_text(written)

    def keep(self, agent_id: str, kept: Kept) -> list:
        """An unchanged agent: what the previous checkpoint holds of it, held again."""
        for name in (n for n in PATCHED if (agent_id, n) in self.before.dicts):
            self.now.dicts[agent_id, name] = self.before.dicts[agent_id, name]
        self.now.rngs[agent_id] = self.before.rngs[agent_id]
        self.now.refs[kept.record[0]] = kept.record[1]
        self.now.agents[agent_id] = kept
        return kept.record[1]

    def digests(self) -> dict[str, str]:
        """Each agent's digest, of those recorded so far."""
        return {a: kept.digest for a, kept in self.now.agents.items()}

    def root(self, state: dict, agents: dict[str, list]) -> list:
        """The state with references to its agents' records, the objects as a dict patched."""
        objects = self.patched(("", "objects"), {str(i): o for i, o in enumerate(state["objects"])})
        return self.put({**state, "agents": agents, "objects": objects})

    def accessed(self, times: list[np.ndarray]) -> tuple[dict, float | None]:
        """The arrays to save (`n`: how many memories each agent has; `t`: every time, or at
        the flat indices `i` those changed since the full ones at the returned time)."""
        n = np.array([len(x) for x in times], dtype=np.int64)
        base = self.before.accessed
        if base is not None:
            changed = [np.zeros(0, dtype=np.int64)]
            for x, old, start in zip(times, base[1], starts(n)):
                m = min(len(x), len(old))
                changed += [np.flatnonzero(x[:m] != old[:m]) + start, np.arange(start + m, start + len(x))]
            i = np.concatenate(changed)
            if 4 * len(i) <= n.sum():  # a quarter at most: restore reads 1.25x the times
                self.now.accessed = base
                return {"n": n, "i": i, "t": np.concatenate(times)[i] if len(times) else np.zeros(0)}, base[0]
        self.now.accessed = (self.now.t, [x.copy() for x in times])
        return {"n": n, "t": np.concatenate(times) if times else np.zeros(0)}, None


def starts(n: np.ndarray) -> np.ndarray:
    """Where each agent's times begin in the flat array of everyone's."""
    return np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)


class Reader:
    """Reads parts by reference, and keeps what it read as the `Saved` of the checkpoint."""

    def __init__(self, root: Path, t: float) -> None:
        self.folder = root
        self.files: dict[int, object] = {}
        self.saved = Saved(root.resolve(), t)

    def get(self, ref: list):
        t, offset, length = ref
        if t not in self.files:
            self.files[t] = open(self.folder / folder_name(t) / PARTS, "rb")
        f = self.files[t]
        f.seek(offset)
        read = f.read(length).decode("utf-8")
        self.saved.refs[read] = ref
        return json.loads(read)

    def patched(self, key: tuple[str, str], parts: list) -> dict:
        value: dict = {}
        for part in parts:
            value.update(self.get(part))
        self.saved.dicts[key] = (copy_dict(value), parts)
        return dict(sorted(value.items()))

    def root(self, ref: list) -> dict:
        state = self.get(ref)
        objects = self.patched(("", "objects"), state["objects"])
        state["objects"] = [objects[str(i)] for i in range(len(objects))]
        state["agents"] = {a: self.record(a, ref) for a, ref in state["agents"].items()}
        return state

    def record(self, agent_id: str, ref: list) -> dict:
        state = self.get(ref)
        self.saved.memories[agent_id] = state["memories"]
        state["plan"] = self.get(state["plan"])
        for name in (n for n in PATCHED if n in state):
            state[name] = self.patched((agent_id, name), state[name])
        version, pos, gauss, twists, words = state["rng"]
        self.saved.rngs[agent_id] = rng = Twists(tuple(self.get(words)), words, twists)
        state["rng"] = [version, [*rng.words, pos], gauss]
        return state

    def close(self) -> None:
        for f in self.files.values():
            f.close()
