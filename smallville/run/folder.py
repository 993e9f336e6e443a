"""The run folder on disk: its name, atomic JSON, the scenario's copy, and cutting the
append-only logs back to a checkpoint."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime
from pathlib import Path

from smallville.brain.texts import TEXTS
from smallville.embed.record import FOLDER

EMBEDDINGS = FOLDER  # a run's embeddings record, named where the record is written
EVENTS = "events.jsonl"
RECORD = "answers.jsonl"
LOGS = (EVENTS, RECORD, TEXTS)  # append-only, their lengths kept by each checkpoint


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON beside the target and rename it into place: never a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def seed_label(seed: int) -> str:
    """`seed7`, and `seed_neg7` for -7: a run id's parts are split by hyphens, and `seed-7`
    would read as seed 7."""
    return f"seed{seed}" if seed >= 0 else f"seed_neg{-seed}"


def new_run_dir(runs_dir: Path, stem: str, seed: int) -> Path:
    """A fresh, unique run folder named after the scenario, seed and wall-clock time."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-{seed_label(seed)}-{datetime.now():%Y%m%d-%H%M%S}"
    path, n = runs_dir / base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = runs_dir / f"{base}-{n}"


def keep_scenario(scenario, folder: Path) -> None:
    """Copy the scenario file and its agent files into the run, so the run can be replayed,
    resumed or forked even after the originals change or move."""
    (folder / "agents").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(scenario.path, folder / Path(scenario.path).name)
    for agent in scenario.agents:
        shutil.copyfile(agent.source, folder / "agents" / f"{agent.id}.yaml")


def sizes(run_dir: Path) -> dict[str, int]:
    """The length in bytes of the run's logs (0 for one not written yet)."""
    return {name: (run_dir / name).stat().st_size if (run_dir / name).exists() else 0 for name in LOGS}


def copy_prefix(source: Path, target: Path, size: int) -> None:
    """A new file `target` holding the first `size` bytes of `source`, copied by the kernel
    (shared blocks, where the file system can: a fork's logs cost little whatever their length)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        left = size
        try:
            while left > 0:
                done = os.copy_file_range(src.fileno(), dst.fileno(), left)
                if done == 0:
                    break
                left -= done
        except (AttributeError, OSError):  # no copy_file_range here: copy in chunks
            src.seek(size - left)
            dst.seek(size - left)
            while left > 0:
                chunk = src.read(min(left, 1 << 20))
                if not chunk:
                    break
                dst.write(chunk)
                left -= len(chunk)


def truncate(path: Path, size: int) -> tuple[int, int]:
    """Cut a log back to `size` bytes: (whole lines cut, torn lines cut, 0 or 1)."""
    if not path.exists():
        return 0, 0
    with open(path, "r+b") as f:
        f.seek(size)
        tail = f.read()
        f.truncate(size)
    return tail.count(b"\n"), int(bool(tail) and not tail.endswith(b"\n"))


def offset(file: Path, first_out) -> int:
    """Bytes before the first line for which `first_out(line)` holds (the whole file if none)."""
    at = 0
    with open(file, "rb") as f:
        for line in f:
            if first_out(line):
                break
            at += len(line)
    return at
