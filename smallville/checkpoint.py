"""Checkpoints: the state of a run at a simulated time, as JSON plus arrays (no pickle),
each writing only what changed since the one before.

    RUN_DIR/checkpoints/
      memory/ID/            each agent's memory stream, saved incrementally (append-only)
      T/head.json           what `checkpoints()` lists: the time, the digest of the whole
                            state, how long the event log and the answer record were at T,
                            and where the state's root part is
      T/parts.jsonl         the parts of the state first written at T, one JSON a line
      T/accessed.npz        the memories' last-access times: every one, or those changed
                            since the last checkpoint that has every one

The state (`Simulation.get_state()`) is stored as parts that refer to each other by
`[T, offset, length]` (bytes of `T/parts.jsonl`): the root part is the state with each
agent replaced by a reference to its record, and the objects by a dict's references; a
record is the agent's state with its plan, its random generator's words and its dicts
(relationships, talks, earlier lines, ...) replaced by references. A part that has not changed since the previous checkpoint is not
written again: the reference points where it already is. A dict that only gained or
changed keys is the previous one's parts plus a patch, at most `SEGMENTS` of them. A
random generator's words change whole every 624 draws; a record says how many of those
twists to apply to words written once (at most `TWISTS`, done natively on restore). So a
checkpoint is read by following references at most three deep, however many came before.

A checkpoint folder is written under a temporary name and renamed into place when whole,
so a crash during a save leaves the previous checkpoints intact; a checkpoint refers only
to earlier ones, which are never removed before it (`resume` removes later ones). `T` is
the simulated second, zero-padded (`000007200`). Schema 2 (the whole state in
`T/state.json`, every last-access time in `T/accessed.npz`) is still read.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CHECKPOINT_SCHEMA = 3
READABLE = (2, 3)                       # schemas `restore` reads
HEAD, PARTS, ACCESSED, WHOLE_STATE = "head.json", "parts.jsonl", "accessed.npz", "state.json"
PATCHED = ("relationships", "talks", "last_talk", "earlier_lines", "seen")    # an agent's dicts
SEGMENTS = 8                            # a dict's parts at most: the first whole, then patches
TWISTS = 64                             # twists of an rng's words at most before they are written again
WORDS = 624                             # the Mersenne Twister's state, in 32-bit words


def fault_point(stage: str, t: float) -> None:
    """Fault injection for the crash tests: SMALLVILLE_FAULT=kill-in-checkpoint:T."""
    if os.environ.get("SMALLVILLE_FAULT") == f"{stage}:{int(t)}":
        os.kill(os.getpid(), 9)


def digest(state: dict) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def folder_name(t: float) -> str:
    return f"{int(t):09d}"


def _text(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _copy(value: dict) -> dict:
    """A dict's copy that the agent's changes to its lists (earlier lines) leave alone."""
    return {k: list(v) if isinstance(v, list) else v for k, v in value.items()}


class _Twists:
    """An rng's words as `twists` twists of words written once at `ref`."""

    def __init__(self, words: tuple[int, ...], ref: list, twists: int = 0) -> None:
        self.ref, self.twists = ref, twists
        self._rng = random.Random()
        self._rng.setstate((3, tuple(words) + (WORDS,), None))
        if twists:
            self._rng.getrandbits(32 * WORDS * twists)      # from position 624: exactly `twists` twists
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
class Saved:
    """What a checkpoint holds, kept on the simulation (`sim.checkpointed`) once written or
    restored, so that the next checkpoint of the same run writes only what changed."""

    root: Path                                      # the run's checkpoints folder
    t: float
    refs: dict[str, list] = field(default_factory=dict)              # a part's JSON -> where it is
    dicts: dict[tuple[str, str], tuple[dict, list]] = field(default_factory=dict)  # value, parts
    rngs: dict[str, _Twists] = field(default_factory=dict)
    accessed: tuple[float, list[np.ndarray]] | None = None           # the last full times: T, per agent
    memories: dict[str, int] = field(default_factory=dict)           # how many each agent's stream held

    def usable(self, root: Path, t: float) -> bool:
        return self.root == root.resolve() and self.t < t and (root / folder_name(self.t) / HEAD).exists()


# -- writing ----------------------------------------------------------------------------


class _Writer:
    """Appends the parts of one checkpoint that `before` does not hold already."""

    def __init__(self, root: Path, t: float, out, before: Saved | None) -> None:
        self.t, self.out, self.offset = int(t), out, 0
        self.before = before or Saved(root.resolve(), -1.0)
        self.now = Saved(root.resolve(), t)

    def put(self, value) -> list:
        text = _text(value)
        ref = self.before.refs.get(text)
        if ref is None:
            data = text.encode("utf-8")
            ref = [self.t, self.offset, len(data)]
            self.out.write(data + b"\n")
            self.offset += len(data) + 1
        self.now.refs[text] = ref
        return ref

    def patched(self, key: tuple[str, str], value: dict) -> list:
        """A dict as parts: the previous checkpoint's plus a patch of what changed, if it only
        gained or changed keys and has fewer than `SEGMENTS` parts; else whole."""
        old, parts = self.before.dicts.get(key, (None, []))
        if old is not None and len(parts) < SEGMENTS and old.keys() <= value.keys():
            patch = {k: v for k, v in value.items() if k not in old or old[k] != v}
            parts = parts + [self.put(patch)] if patch else parts
        else:
            parts = [self.put(value)]
        self.now.dicts[key] = (_copy(value), parts)
        return parts

    def words(self, agent_id: str, words: tuple[int, ...]) -> _Twists:
        twists = self.before.rngs.get(agent_id)
        if twists is None or not twists.reach(words):
            twists = _Twists(words, self.put(words))
        self.now.rngs[agent_id] = twists
        return twists

    def record(self, agent_id: str, state: dict) -> list:
        self.now.memories[agent_id] = state["memories"]
        record = {**state, "plan": self.put(state["plan"])}
        for name in PATCHED:
            record[name] = self.patched((agent_id, name), state[name])
        version, internal, gauss = state["rng"]
        twists = self.words(agent_id, tuple(internal[:WORDS]))
        record["rng"] = [version, internal[WORDS], gauss, twists.twists, twists.ref]
        return self.put(record)

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
            for x, old, start in zip(times, base[1], _starts(n)):
                m = min(len(x), len(old))
                changed += [np.flatnonzero(x[:m] != old[:m]) + start, np.arange(start + m, start + len(x))]
            i = np.concatenate(changed)
            if 4 * len(i) <= n.sum():                  # a quarter at most: restore reads 1.25x the times
                self.now.accessed = base
                return {"n": n, "i": i, "t": np.concatenate(times)[i] if len(times) else np.zeros(0)}, base[0]
        self.now.accessed = (self.now.t, [x.copy() for x in times])
        return {"n": n, "t": np.concatenate(times) if times else np.zeros(0)}, None


def _starts(n: np.ndarray) -> np.ndarray:
    """Where each agent's times begin in the flat array of everyone's."""
    return np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)


def _last_accessed(stream) -> np.ndarray:
    """Every memory's last-access time (`Memory.last_accessed`), as one array."""
    return stream._accessed[:len(stream)]


def _save_streams(sim, root: Path, saved: dict[str, int]) -> None:
    """Append each agent's new memories to its stream on disk, unless it has the `saved`
    number still (its last-access times are the checkpoint's). The saves wait on the disk
    (several files written and synced each), so they go on side by side."""
    changed = [agent for agent in sim.agents.values() if len(agent.stream) != saved.get(agent.id)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda agent: agent.stream.save(str(root / agent.id)), changed))


def _write_synced(path: Path, write) -> None:
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def write_checkpoint(sim, run_dir: Path, files: dict[str, int]) -> Path:
    """Save the simulation's state now; `files` maps run files (events.jsonl, answers.jsonl)
    to their length in bytes at this moment. What the run's previous checkpoint (written or
    restored by `sim`) holds already is referred to, not written again."""
    root = Path(run_dir) / "checkpoints"
    t = sim.env.now
    final = root / folder_name(t)
    tmp = root / f".{folder_name(t)}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    before = sim.checkpointed if sim.checkpointed is not None and sim.checkpointed.usable(root, t) else None
    _save_streams(sim, root / "memory", before.memories if before else {})
    fault_point("kill-in-checkpoint", t)
    state = sim.get_state()
    with open(tmp / PARTS, "wb") as out:
        writer = _Writer(root, t, out, before)
        agents = {a: writer.record(a, s) for a, s in state["agents"].items()}
        head = {"schema": CHECKPOINT_SCHEMA, "time": sim.now_datetime().strftime("%Y-%m-%d %H:%M:%S"), "t": t,
                "digest": digest(state), "files": files, "root": writer.root(state, agents)}
        out.flush()
        os.fsync(out.fileno())
    arrays, head["accessed"] = writer.accessed([_last_accessed(sim.agents[a].stream) for a in state["agents"]])
    _write_synced(tmp / ACCESSED, lambda f: np.savez(f, **arrays))
    _write_synced(tmp / HEAD, lambda f: f.write(_text(head).encode("utf-8")))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    sim.checkpointed = writer.now
    return final


# -- reading ----------------------------------------------------------------------------


def checkpoints(run_dir: Path, schema: tuple[int, ...] | None = READABLE) -> list[dict]:
    """The heads of the run's complete checkpoints of a schema in `schema` (None: any),
    oldest first (a half-written one is skipped): `schema`, `time`, `t`, `digest` and
    `files`. `load_state` gives a checkpoint's whole state."""
    found = []
    for folder in sorted((Path(run_dir) / "checkpoints").glob("[0-9]*")):
        try:
            name = HEAD if (folder / HEAD).exists() else WHOLE_STATE     # schema 1 and 2: one file
            head = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if schema is None or head.get("schema") in schema:
            found.append(head)
    return found


class _Reader:
    """Reads parts by reference, and keeps what it read as the `Saved` of the checkpoint."""

    def __init__(self, root: Path, head: dict) -> None:
        self.folder = root
        self.files: dict[int, object] = {}
        self.saved = Saved(root.resolve(), head["t"])

    def get(self, ref: list):
        t, offset, length = ref
        if t not in self.files:
            self.files[t] = open(self.folder / folder_name(t) / PARTS, "rb")
        f = self.files[t]
        f.seek(offset)
        text = f.read(length).decode("utf-8")
        self.saved.refs[text] = ref
        return json.loads(text)

    def patched(self, key: tuple[str, str], parts: list) -> dict:
        value: dict = {}
        for part in parts:
            value.update(self.get(part))
        self.saved.dicts[key] = (_copy(value), parts)
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
        for name in PATCHED:
            state[name] = self.patched((agent_id, name), state[name])
        version, pos, gauss, twists, words = state["rng"]
        self.saved.rngs[agent_id] = rng = _Twists(tuple(self.get(words)), words, twists)
        state["rng"] = [version, [*rng.words, pos], gauss]
        return state

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def _read(run_dir: Path, head: dict) -> tuple[dict, Saved | None]:
    """A checkpoint's whole state, and (schema 3) what it holds as parts."""
    if head["schema"] != CHECKPOINT_SCHEMA:
        return head["state"], None
    reader = _Reader(Path(run_dir) / "checkpoints", head)
    try:
        state = reader.root(head["root"])
    finally:
        reader.close()
    return state, reader.saved


def load_state(run_dir: Path, checkpoint: dict) -> dict:
    """The whole `Simulation.get_state()` a checkpoint (one of `checkpoints()`) holds."""
    return _read(run_dir, checkpoint)[0]


def _accessed(root: Path, head: dict, agents: list[str]) -> tuple[list[np.ndarray], tuple | None]:
    """Each agent's last-access times at a checkpoint, and the full ones a diff is against."""
    with np.load(root / folder_name(head["t"]) / ACCESSED, allow_pickle=False) as saved:
        if head["schema"] != CHECKPOINT_SCHEMA:
            return [saved[a] for a in agents], None
        n, times, changed = saved["n"], saved["t"], saved["i"] if "i" in saved.files else None
    if changed is None:
        full = np.split(times, _starts(n)[1:])
        return full, (head["t"], full)
    base, _ = _accessed(root, {"schema": CHECKPOINT_SCHEMA, "t": head["accessed"]}, agents)
    flat = np.empty(n.sum(), dtype=np.float64)
    for start, count, old in zip(_starts(n), n, base):
        flat[start: start + min(count, len(old))] = old[:count]
    flat[changed] = times
    return np.split(flat, _starts(n)[1:]), (head["accessed"], base)


def restore(sim, run_dir: Path, checkpoint: dict) -> None:
    """Bring `sim` (new, not started) to the state of one of `run_dir`'s checkpoints: each
    memory stream as it was then, and every agent going on with what it was doing."""
    from smallville.memory import MemoryStream

    root = Path(run_dir) / "checkpoints"
    state, saved = _read(run_dir, checkpoint)
    times, full = _accessed(root, checkpoint, list(state["agents"]))
    streams = {a: MemoryStream.load(str(root / "memory" / a), sim.embedder, count=s["memories"], accessed=x)
               for (a, s), x in zip(state["agents"].items(), times)}
    sim.set_state(state, streams)
    if saved is not None:
        saved.accessed = full
    sim.checkpointed = saved
