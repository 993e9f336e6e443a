"""How long the live page (`smallville serve`) takes to draw a tick of a 1,000-agent town in
headless chromium. Goal: under 16 ms a tick (60 frames a second).

    python benchmarks/serve_draw.py [--agents 1000] [--for 2h] [--frames 300] [--runs-dir DIR]

Generates a town (`smallville town generate`), runs it offline (lexical embedder), serves its
runs folder on 127.0.0.1, opens the run's page in Debian's headless chromium (no GPU: every
pixel drawn by the CPU) with `#bench=N`, and prints what the page measured: the time to draw
each of N ticks spread over the run (every agent's position looked up, the part of the town
in view drawn, with everyone in it and what they say, and the canvas read back so the
drawing is done, not only recorded), at a laptop's window and at one that shows the whole town.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def a_run(agents: int, duration: float, runs: Path) -> Path:
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario
    from smallville.town import generate_town, write_town

    existing = sorted(p for p in runs.glob("*") if (p / "manifest.json").exists()) if runs.exists() else []
    if existing:
        return existing[-1]
    write_town(generate_town(agents, 0), runs.parent / "town.yaml")
    print(f"running a {agents}-agent town for {duration / 3600:g} h ...", file=sys.stderr, flush=True)
    return run_scenario(
        load_scenario(runs.parent / "town.yaml"), runs_dir=runs, duration=duration, embedder="lexical"
    ).path


def measure(url: str, frames: int, width: int, height: int, profile: Path) -> dict:
    from browser import Browser

    with Browser(profile, width, height) as page:
        page.open(url + f"#bench={frames}")
        figures = json.loads(page.wait_for("document.body.dataset.bench", timeout=600, what="the measurement"))
        figures["errors"] = page.errors
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--for", dest="duration", default="2h", help="simulated time of the run (default 2h)")
    parser.add_argument("--frames", type=int, default=300, help="ticks drawn and timed (default 300)")
    parser.add_argument("--runs-dir", type=Path, help="keep the run here (and use the one there, if any)")
    args = parser.parse_args()
    from smallville.serve import make_server
    from smallville.timefmt import parse_duration

    with tempfile.TemporaryDirectory() as tmp:
        runs = args.runs_dir or Path(tmp) / "runs"
        run = a_run(args.agents, parse_duration(args.duration), runs)
        server = make_server(runs, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"{server.url}run?id={run.relative_to(runs).as_posix()}"
        try:
            rows = [("laptop window", measure(url, args.frames, 1400, 900, Path(tmp) / "p1"))]
            whole = rows[0][1]["map"]
            rows.append(
                ("whole town in view", measure(url, args.frames, whole[0] + 420, whole[1] + 80, Path(tmp) / "p2"))
            )
        finally:
            server.shutdown()
            server.server_close()
    print(f"{args.agents} agents, {args.duration} run, {args.frames} ticks drawn, headless chromium without GPU\n")
    print("| view | canvas | agents in view | median | p95 | max |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in rows:
        print(
            f"| {name} | {r['view'][0]}x{r['view'][1]} | {r['inView']} of {r['agents']} | {r['median']:.2f} ms "
            f"| {r['p95']:.2f} ms | {r['max']:.2f} ms |"
        )
        if r["errors"]:
            print(f"  console errors: {r['errors']}")


if __name__ == "__main__":
    main()
