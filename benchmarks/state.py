"""What checkpoints buy and what they cost, against the ways before them, measured in one run.

    python benchmarks/state.py [--days 7] [--agents 1000] [--hours 24] [--kill-hour 20]
                               [--disk-days 2] [--embedder lexical] [--before REF]
                               [--only inspect,fork,resume,share,disk]

- inspect and interview at the end of a DAYS-day run of the_ville and of a 2-hour run
  (targets: under 2 s each, no slower at DAYS days than at 2 hours), against re-simulating
  the run from its start (what they did before checkpoints were restored);
- fork --at T early, middle and late in the DAYS-day run (target: the same whatever T),
  against re-simulating from the start to T;
- an AGENTS-agent generated town killed at simulated hour KILL-HOUR
  (SMALLVILLE_FAULT=kill-at) and resumed: what it simulated again (at most one checkpoint
  interval) and its wall time to get back to where it was killed, against the killed run's
  wall time to get there from the start;
- checkpoint wall time as a share of the AGENTS-agent town's HOURS-hour run (target: 5% at
  most) and checkpoint disk for a DISK-DAYS-day run of the_ville (target: no more than
  before), and that run's whole folder by part (target: 40 MB for 2 days), for this tree
  and for BEFORE (default: the last commit writing checkpoint schema 2), whose `smallville`
  is taken out with `git archive`.

Each measurement runs in a fresh process; the times of inspect, interview, fork and resume
leave out its start-up (imports and loading the embedder).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("SMALLVILLE_TREE", str(ROOT)))  # the tree a child measures
THE_VILLE = ROOT / "scenarios" / "the_ville.yaml"


# -- children: each prints one JSON line -------------------------------------------------


def child_run(scenario: str, hours: float, embedder: str, runs: str) -> dict:
    """Run a scenario, timing every checkpoint written and the memory streams' saves in it."""
    import smallville.checkpoint as ck
    from smallville.memory import MemoryStream
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    spent = {"checkpoint": 0.0, "streams": 0.0, "checkpoints": 0}

    def timed(fn, key: str):
        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - began

        return wrapper

    ck.write_checkpoint = timed(ck.write_checkpoint, "checkpoint")
    if hasattr(ck, "_save_streams"):
        ck._save_streams = timed(ck._save_streams, "streams")
    else:  # the version before saved them one by one
        MemoryStream.save = timed(MemoryStream.save, "streams")
    began = time.perf_counter()
    result = run_scenario(load_scenario(scenario), runs_dir=runs, duration=hours * 3600, embedder=embedder)
    spent["wall"] = time.perf_counter() - began
    spent["checkpoints"] = len([p for p in (Path(result.path) / "checkpoints").iterdir() if p.name[0].isdigit()])
    return {**spent, "path": str(result.path)}


def _startup(run: str) -> dict:
    """Start-up, done once before the measurements: opening the run (its scenario and agent
    files, read again by each command: for a big town, most of what is left), and loading
    its embedder (a USE model loads again when a text is not in the run's record)."""
    from smallville.run import Run

    began = time.perf_counter()
    opened = Run.open(run)
    town = time.perf_counter() - began
    opened.embedder(write=False).embed(["start-up"])
    return {"town": town, "embedder": time.perf_counter() - began - town}


def _note(startup: dict) -> str:
    return f"start-up: town files {startup['town']:.2f} s (read again within), embedder {startup['embedder']:.2f} s"


def child_ask(run: str, agent: str, question: str) -> dict:
    """`smallville inspect` and `smallville interview` at the run's end, less start-up."""
    from smallville import mind
    from smallville.run import simulate_to

    load = _startup(run)
    began = time.perf_counter()
    with simulate_to(run) as sim:
        mind.inspect_agent(sim, agent)
    inspected = time.perf_counter() - began
    began = time.perf_counter()
    with simulate_to(run) as sim:
        mind.interview(sim, agent, question)
    return {"inspect": inspected, "interview": time.perf_counter() - began, "startup": load}


def child_replay(run: str, agent: str) -> dict:
    """Re-simulate the run from its start (the way before checkpoints were restored): the
    wall time to reach each step, and to inspect at the end."""
    from smallville import mind
    from smallville.brain.assembly import assemble, settings_of
    from smallville.run import Run
    from smallville.sim import SimConfig, Simulation
    from smallville.sim.log import EventLog, Nowhere

    run = Run.open(run)
    marks = {}
    began = time.perf_counter()
    stack = assemble(settings_of(run.manifest.to_dict()), run.seed_now, replay=(run.path, 0))
    sim = Simulation(
        run.scenario,
        stack.brain,
        run.embedder(write=False),
        seed=run.manifest.seed,
        config=SimConfig.from_dict(run.manifest.config),
        log=EventLog(run.scenario.start, Nowhere()),
    )
    sim.run(run.reached(), on_step=lambda now: marks.__setitem__(now, time.perf_counter() - began))
    mind.inspect_agent(sim, agent)
    return {"marks": marks, "inspect": time.perf_counter() - began}


def child_fork(run: str, ats: list[float], runs: str) -> dict:
    """`smallville fork --at T --for 15m` for each T: wall time, and what it simulated again."""
    from smallville.run import fork_run

    out = {"startup": _startup(run)}
    for at in ats:
        began = time.perf_counter()
        result = fork_run(run, at, duration=900, runs_dir=runs)
        out[at] = {"wall": time.perf_counter() - began, "restored": result.manifest.fork["restored"]}
    return out


def child_resume(run: str) -> dict:
    """`smallville resume`: wall time until the simulation is rebuilt and until it is back
    where it was killed, and the checkpoint it started from."""
    from smallville.run import resume_run

    load = _startup(run)
    marks, steps = {}, {}
    began = time.perf_counter()

    def on_start(session):
        marks["restored"], marks["from"] = time.perf_counter() - began, session.sim.env.now

    result = resume_run(run, on_start=on_start, on_step=lambda now: steps.setdefault(now, time.perf_counter() - began))
    return {
        **marks,
        "steps": steps,
        "wall": time.perf_counter() - began,
        "resumed": result.manifest.resumed[-1],
        "startup": load,
    }


CHILDREN = {"run": child_run, "ask": child_ask, "replay": child_replay, "fork": child_fork, "resume": child_resume}


# -- the parent ------------------------------------------------------------------------


def child(name: str, *args, tree: Path = ROOT, env: dict | None = None) -> dict:
    """Run a child in a fresh process with `tree`'s smallville; its JSON answer."""
    command = [
        sys.executable,
        __file__,
        "--child",
        name,
        json.dumps([a if isinstance(a, (int, float, list)) else str(a) for a in args]),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree), "SMALLVILLE_TREE": str(tree), **(env or {})}
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def before_tree(ref: str | None, into: Path) -> tuple[str, Path]:
    """`smallville` as it was at `ref` (default: the commit before checkpoint schema 3)."""
    if ref is None:
        first = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "log",
                "--reverse",
                "--format=%h",
                "-S",
                "CHECKPOINT_SCHEMA = 3",
                "--",
                "smallville/checkpoint.py",
                "smallville/checkpoint",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        ref = f"{first[0]}^" if first else "HEAD"
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "smallville"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return ref, into


def disk(path: Path) -> dict:
    def size(p: Path) -> int:
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())

    checkpoints = path / "checkpoints"
    pieces = sum(
        f.stat().st_size
        for name in ("memories.jsonl", "embeddings.f32", "recorded.i64")  # each piece
        for f in checkpoints.glob(f"[0-9]*/{name}")
    )
    return {"run": size(path), "checkpoints": size(checkpoints), "streams": size(checkpoints / "memory") + pieces}


def parts(path: Path) -> dict[str, int]:
    """A run folder's bytes by part: the embeddings record, the answer record (and the requests
    in it), the requests' texts, the event log (and its recall events), the checkpoints."""

    def size(p: Path) -> int:
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size

    record, texts, events = path / "answers.jsonl", path / "answers.texts.jsonl", path / "events.jsonl"
    requests = sum(
        len(json.dumps(json.loads(line)["request"], ensure_ascii=False, separators=(",", ":")).encode())
        for line in record.read_bytes().splitlines()
        if b'"request":' in line
    )
    recalls = sum(len(line) + 1 for line in events.read_bytes().splitlines() if b'"kind":"recall"' in line[:80])
    return {
        "embeddings/": size(path / "embeddings"),
        "answers.jsonl": size(record),
        "  of which requests": requests,
        "answers.texts.jsonl": size(texts) if texts.exists() else 0,
        "events.jsonl": size(events),
        "  of which recall events": recalls,
        "checkpoints/": size(path / "checkpoints"),
    }


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def on_disk(result: dict) -> str:
    sizes = disk(Path(result["path"]))
    return f"{mb(sizes['checkpoints'] - sizes['streams'])} ({mb(sizes['streams'])})"


def share(result: dict) -> str:
    spent, wall = result["checkpoint"], result["wall"]
    return f"{100 * spent / wall:.1f}% ({spent:.1f} s of {wall:.1f} s)"


def seconds_at(marks: dict, t: float) -> float:
    return next(v for k, v in sorted((float(k), v) for k, v in marks.items()) if k >= t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=7, help="the long run of the_ville, in days (default 7)")
    parser.add_argument("--agents", type=int, default=1000, help="the generated town's size (default 1000)")
    parser.add_argument("--hours", type=float, default=24, help="the town's run for the checkpoint share (default 24)")
    parser.add_argument("--kill-hour", type=float, default=20, help="where the town's run is killed (default 20)")
    parser.add_argument("--disk-days", type=float, default=2, help="the_ville's run for disk (default 2)")
    parser.add_argument("--embedder", default="lexical", help="lexical (default) or use")
    parser.add_argument("--before", help="the version to compare with (default: the last writing schema 2)")
    parser.add_argument("--only", default="inspect,fork,resume,share,disk")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child](*json.loads(args.args))))
        return
    only = set(args.only.split(","))
    rows: list[tuple[str, str, str, str]] = []

    def row(what: str, now: str, baseline: str, note: str = "") -> None:
        rows.append((what, now, baseline, note))
        print(f"  {what}: {now} (baseline {baseline}) {note}", file=sys.stderr, flush=True)

    def timed(what: str, now: float, baseline: float | None, note: str = "") -> None:
        """A wall time beside the re-simulation it replaces."""
        if baseline is None:
            row(what, f"{now:.2f} s", "-", note)
        else:
            row(what, f"{now:.2f} s", f"{baseline:.2f} s re-simulated ({baseline / now:.1f}x)", note)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if only & {"inspect", "fork"}:
            long = child("run", THE_VILLE, args.days * 24, args.embedder, tmp / "ville")["path"]
            short = child("run", THE_VILLE, 2, args.embedder, tmp / "ville2h")["path"]
            agent, question = "klaus_mueller", "What do you think of Isabella's party?"
            replayed = child("replay", long, agent)
            if "inspect" in only:
                for label, run in ((f"{args.days:g} d", long), ("2 h", short)):
                    asked = child("ask", run, agent, question)
                    base = replayed["inspect"] if run == long else None
                    timed(f"inspect at the end of {label}", asked["inspect"], base, _note(asked["startup"]))
                    timed(f"interview at the end of {label}", asked["interview"], base)
            if "fork" in only:
                end = args.days * 86400
                ats = [int(f * end / 3600) * 3600 + 1800.0 for f in (0.1, 0.5, 0.9)]
                forks = child("fork", long, ats, tmp / "forks")
                note = _note(forks.pop("startup"))
                for at, out in forks.items():
                    timed(
                        f"fork --at {float(at) / 3600:g} h --for 15m",
                        out["wall"],
                        seconds_at(replayed["marks"], float(at) + 900),
                        f"restored {out['restored']}; {note}",
                    )
        if only & {"resume", "share"}:
            from smallville.town import generate_town, write_town

            town = tmp / "town" / "town.yaml"
            write_town(generate_town(args.agents, 0), town)
        if "resume" in only:
            kill = args.kill_hour * 3600
            began = time.perf_counter()
            died = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "smallville",
                    "run",
                    str(town),
                    "--for",
                    f"{args.kill_hour + 1:g}h",
                    "--embedder",
                    args.embedder,
                    "--quiet",
                    "--runs-dir",
                    str(tmp / "killed"),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env={**os.environ, "SMALLVILLE_FAULT": f"kill-at:{int(kill)}"},
            )
            to_kill = time.perf_counter() - began
            assert died.returncode == -9, died.stderr
            (run,) = (tmp / "killed").iterdir()
            out = child("resume", run)
            back = out["restored"] if out["from"] >= kill else seconds_at(out["steps"], kill)
            timed(
                f"resume {args.agents:,} agents killed at {args.kill_hour:g} h, back there",
                back,
                to_kill,
                f"restored {out['resumed']['restored']}, simulated again {(kill - out['from']) / 60:g} min; "
                f"baseline: the killed run, start-up included; {_note(out['startup'])}",
            )
        if only & {"share", "disk"}:
            ref, old = before_tree(args.before, tmp / "before")
            if "share" in only:
                now, was = (
                    child("run", town, args.hours, args.embedder, tmp / name, tree=tree)
                    for name, tree in (("share", ROOT), ("share-before", old))
                )
                row(
                    f"checkpoints' share of {args.agents:,} agents' {args.hours:g} h",
                    share(now),
                    share(was),
                    f"before: {ref}",
                )
                row("  of which memory streams' saves", f"{now['streams']:.1f} s", f"{was['streams']:.1f} s")
                row(f"  {args.agents:,} agents' checkpoints on disk, state (streams)", on_disk(now), on_disk(was))
            if "disk" in only:
                now, was = (
                    child("run", THE_VILLE, args.disk_days * 24, args.embedder, tmp / name, tree=tree)
                    for name, tree in (("disk", ROOT), ("disk-before", old))
                )
                row(
                    f"the_ville {args.disk_days:g} d on disk",
                    mb(disk(Path(now["path"]))["run"]),
                    mb(disk(Path(was["path"]))["run"]),
                    f"before: {ref}",
                )
                row("  of which checkpoints, state (streams)", on_disk(now), on_disk(was))
                for (part, this), (_, then) in zip(parts(Path(now["path"])).items(), parts(Path(was["path"])).items()):
                    row(f"  {part}", mb(this), mb(then))
    print(f"\nembedder {args.embedder}, offline brain\n")
    print("| measurement | this version | baseline | |")
    print("| --- | --- | --- | --- |")
    for what, now, baseline, note in rows:
        print(f"| {what} | {now} | {baseline} | {note} |")


if __name__ == "__main__":
    main()
