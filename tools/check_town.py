#!/usr/bin/env python3
"""Sanity checker for hand-written towns (scenario + agent files).

Usage:
    python tools/check_town.py [SCENARIO.yaml ...] [--expect PROBE=id1,id2 ...] [-q]

With no scenario given it checks every scenarios/*.yaml of the repository.
It needs only pyyaml and is independent of the smallville package: it is a
second opinion on the files, not the engine's own validator.

Checks:
  * every grid row has the same width; every grid character is in the legend;
    every legend key is a single character;
  * every object is inside the grid, on a walkable tile (its area is printed);
  * every walkable tile is reachable from every other (BFS, 4-neighbour),
    and (warning only) still so when object tiles are treated as blocked;
  * every agent's home / start_at / routine `where` is an existing area path
    (an arena "Sector / Arena" or a sector "Sector");
  * every legend area has at least one tile;
  * event `where` is an area path or a prefix of one; event `agent` is in the town;
  * probes: which agents know each probe at the start (their seed memories hold
    all match words, case-insensitive substring); compared with --expect or the
    built-in expectations for the default scenarios; other text fields of
    agents outside the expected set that would match are reported as leaks.

Exit status: 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import deque
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent

# Who should know each probe at the scenario start, per scenario file stem.
DEFAULT_EXPECT = {
    "the_ville": {"party": {"isabella_rodriguez"}, "election": {"sam_moore"}},
    "cafe_trio": {"party": {"isabella_rodriguez"}},
}

TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


class Report:
    def __init__(self, quiet: bool = False):
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.quiet = quiet

    def error(self, msg: str) -> None:
        self.errors.append(msg)
        print(f"  ERROR: {msg}")

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)
        print(f"  warning: {msg}")

    def info(self, msg: str) -> None:
        if not self.quiet:
            print(f"  {msg}")


def norm_path(path: str) -> str:
    return " / ".join(part.strip() for part in str(path).split("/"))


def find_agent_file(scenario: Path, agent_id: str) -> Path | None:
    for folder in (scenario.parent, scenario.parent.parent):
        candidate = folder / "agents" / f"{agent_id}.yaml"
        if candidate.is_file():
            return candidate
    return None


def memory_texts(memories) -> list[str]:
    out = []
    for m in memories or []:
        if isinstance(m, str):
            out.append(m)
        elif isinstance(m, dict) and "text" in m:
            out.append(str(m["text"]))
    return out


def all_text(value) -> list[str]:
    """Every string inside a nested structure."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in all_text(v)]
    if isinstance(value, list):
        return [t for v in value for t in all_text(v)]
    return []


def matches(text: str, words) -> bool:
    low = text.lower()
    return all(str(w).lower() in low for w in words)


def check_map(scn: dict, rep: Report):
    """Returns (grid rows, legend, areas set, sectors set) or None."""
    mp = scn.get("map")
    if not isinstance(mp, dict):
        rep.error("missing map")
        return None
    legend = mp.get("legend") or {}
    grid_text = mp.get("grid") or ""
    rows = [r for r in str(grid_text).split("\n") if r != ""]
    if not rows:
        rep.error("empty map.grid")
        return None
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        for i, r in enumerate(rows):
            if len(r) != len(rows[0]):
                rep.error(f"grid row {i} has width {len(r)}, row 0 has {len(rows[0])}")
    H = len(rows)

    legend = {str(k): str(v) for k, v in legend.items()}
    for k in legend:
        if len(k) != 1:
            rep.error(f"legend key {k!r} is not one character")
        if k == " ":
            rep.error("legend key is a space")
    walls = {k for k, v in legend.items() if v == "wall"}
    for k, v in legend.items():
        if v.strip().lower() == "wall" and v != "wall":
            rep.error(f"legend {k!r}: {v!r} looks like a wall but is not exactly 'wall'")

    unknown = {}
    for y, r in enumerate(rows):
        for x, ch in enumerate(r):
            if ch not in legend and ch not in unknown:
                unknown[ch] = (x, y)
    for ch, (x, y) in unknown.items():
        rep.error(f"unknown grid character {ch!r} first at [{x}, {y}]")

    areas = {norm_path(v) for k, v in legend.items() if k not in walls}
    sectors = {a.split(" / ")[0] for a in areas}
    values = [norm_path(v) for k, v in legend.items() if k not in walls]
    dup = {v for v in values if values.count(v) > 1}
    for v in sorted(dup):
        rep.warn(f"area {v!r} has more than one legend character")

    def area_at(x, y):
        if not (0 <= y < H and 0 <= x < len(rows[y])):
            return None
        ch = rows[y][x]
        if ch in walls or ch not in legend:
            return None
        return norm_path(legend[ch])

    # every legend area has tiles
    counts = {}
    for r in rows:
        for ch in r:
            counts[ch] = counts.get(ch, 0) + 1
    for k, v in legend.items():
        if k not in walls and counts.get(k, 0) == 0:
            rep.error(f"legend {k!r} ({v}) has no tile on the grid")

    # objects
    objects = mp.get("objects") or []
    obj_tiles = set()
    per_area: dict[str, list[str]] = {}
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict) or "name" not in obj or "at" not in obj:
            rep.error(f"object #{i} needs name and at: {obj!r}")
            continue
        at = obj["at"]
        if not (isinstance(at, list) and len(at) == 2 and all(isinstance(c, int) for c in at)):
            rep.error(f"object {obj['name']!r}: at must be [column, row], got {at!r}")
            continue
        x, y = at
        area = area_at(x, y)
        if area is None:
            rep.error(f"object {obj['name']!r} at [{x}, {y}] is outside the grid or on a wall")
            continue
        if (x, y) in obj_tiles:
            rep.warn(f"two objects share tile [{x}, {y}]")
        obj_tiles.add((x, y))
        names = per_area.setdefault(area, [])
        if obj["name"] in names:
            rep.warn(f"object name {obj['name']!r} appears twice in {area}")
        names.append(str(obj["name"]))
    if not rep.quiet:
        print("  objects by area:")
        for area in sorted(per_area):
            print(f"    {area}: {', '.join(per_area[area])}")

    # connectivity
    def components(blocked: set) -> list[set]:
        walk = {
            (x, y)
            for y, r in enumerate(rows)
            for x, ch in enumerate(r)
            if ch in legend and ch not in walls and (x, y) not in blocked
        }
        seen: set = set()
        comps = []
        for start in sorted(walk, key=lambda p: (p[1], p[0])):
            if start in seen:
                continue
            comp = {start}
            q = deque([start])
            seen.add(start)
            while q:
                x, y = q.popleft()
                for n in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                    if n in walk and n not in seen:
                        seen.add(n)
                        comp.add(n)
                        q.append(n)
            comps.append(comp)
        return comps

    comps = components(set())
    if len(comps) > 1:
        comps.sort(key=len, reverse=True)
        for c in comps[1:]:
            x, y = min(c, key=lambda p: (p[1], p[0]))
            rep.error(
                f"{len(c)} walkable tiles around [{x}, {y}] ({area_at(x, y)}) "
                f"cannot be reached from the rest of the map"
            )
    else:
        rep.info(f"connectivity: all {len(comps[0]) if comps else 0} walkable tiles connected")
    comps_b = components(obj_tiles)
    if len(comps_b) > 1:
        rep.warn(f"if objects blocked walking, the map would split into {len(comps_b)} parts")

    return rows, legend, areas, sectors, objects


def area_exists(path, areas, sectors) -> bool:
    p = norm_path(path)
    return p in areas or p in sectors


def check_scenario(path: Path, expect: dict | None, rep: Report) -> None:
    print(f"== {path}")
    try:
        scn = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        rep.error(f"YAML error: {exc}")
        return
    if not isinstance(scn, dict):
        rep.error("scenario is not a mapping")
        return
    for key in ("name", "start", "map", "agents"):
        if key not in scn:
            rep.error(f"missing required key {key!r}")
    m = check_map(scn, rep)
    if m is None:
        return
    rows, legend, areas, sectors, objects = m

    # agents
    agents: dict[str, dict] = {}
    for entry in scn.get("agents") or []:
        overrides = {}
        if isinstance(entry, str):
            aid = entry
        elif isinstance(entry, dict) and "id" in entry:
            aid = str(entry["id"])
            overrides = {k: v for k, v in entry.items() if k != "id"}
        else:
            rep.error(f"bad agents entry {entry!r}")
            continue
        if aid in agents:
            rep.error(f"agent {aid} listed twice")
        f = find_agent_file(path, aid)
        if f is None:
            rep.error(f"agent file agents/{aid}.yaml not found")
            continue
        try:
            data = yaml.safe_load(f.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            rep.error(f"{f}: YAML error: {exc}")
            continue
        if not isinstance(data, dict):
            rep.error(f"{f}: not a mapping")
            continue
        data = {**data, **overrides}
        agents[aid] = data
        for key in ("name", "home"):
            if key not in data:
                rep.error(f"{aid}: missing required key {key!r}")
        for key in ("home", "start_at"):
            if key in data and not area_exists(data[key], areas, sectors):
                rep.error(f"{aid}: {key} {data[key]!r} is not an area of this map")
        routine = data.get("routine") or []
        last = None
        for i, step in enumerate(routine):
            if not isinstance(step, dict):
                rep.error(f"{aid}: routine[{i}] is not a mapping")
                continue
            at = str(step.get("at", ""))
            if not TIME_RE.match(at):
                rep.error(f"{aid}: routine[{i}].at {at!r} is not HH:MM (quote it)")
            elif last is not None and at <= last:
                rep.warn(f"{aid}: routine[{i}].at {at} is not after {last}")
            last = at
            if "do" not in step:
                rep.error(f"{aid}: routine[{i}] has no 'do'")
            if "where" in step and not area_exists(step["where"], areas, sectors):
                rep.error(f"{aid}: routine[{i}].where {step['where']!r} is not an area of this map")
        if routine:
            if "wake" not in str(routine[0].get("do", "")).lower():
                rep.warn(f"{aid}: first routine step does not mention waking")
            if "sleep" not in str(routine[-1].get("do", "")).lower():
                rep.warn(f"{aid}: last routine step does not mention sleep")
        for other in data.get("relationships") or {}:
            if other == aid:
                rep.error(f"{aid}: relationship with itself")

    # scenario memories / events
    scn_mem = scn.get("memories") or {}
    for aid in scn_mem:
        if aid not in agents:
            rep.error(f"memories for {aid!r}, who is not in this scenario")
    for i, ev in enumerate(scn.get("events") or []):
        if "agent" in ev and str(ev["agent"]) not in agents:
            rep.error(f"events[{i}].agent {ev['agent']!r} is not in this scenario")
        if "where" in ev:
            w = norm_path(ev["where"])
            if not any(a == w or a.startswith(w + " /") for a in areas) and w not in sectors:
                rep.error(f"events[{i}].where {ev['where']!r} is not an area (or prefix) of this map")

    # probes
    probes = scn.get("probes") or {}
    if expect is None:
        expect = DEFAULT_EXPECT.get(path.stem, {})
    for pname, probe in probes.items():
        words = probe.get("match") or []
        knowers = set()
        leaks = []
        for aid, data in agents.items():
            texts = memory_texts(data.get("memories")) + memory_texts(scn_mem.get(aid))
            if any(matches(t, words) for t in texts):
                knowers.add(aid)
            other = {k: v for k, v in data.items() if k != "memories"}
            for t in all_text(other):
                if matches(t, words):
                    leaks.append((aid, t))
        rep.info(f"probe {pname!r} {words}: known at start by {sorted(knowers) or 'nobody'}")
        want = expect.get(pname)
        if want is not None and knowers != set(want):
            rep.error(f"probe {pname!r}: expected exactly {sorted(want)}, got {sorted(knowers)}")
        for aid, t in leaks:
            if want is None or aid not in want:
                rep.error(f"probe {pname!r}: {aid}'s agent file text would match: {t[:80]!r}")
        # single-word mentions by others: a hint, not an error
        for aid, data in agents.items():
            if want is not None and aid in want:
                continue
            texts = all_text(data) + memory_texts(scn_mem.get(aid))
            hit = sorted({w for w in words for t in texts if str(w).lower() in t.lower()})
            if hit:
                rep.info(f"  note: {aid} mentions {hit} (not all probe words)")

    print(
        f"  summary: map {len(rows[0])} x {len(rows)}, {len(areas)} areas "
        f"({len(sectors)} sectors), {len(objects)} objects, {len(agents)} agents"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="*", type=Path)
    ap.add_argument(
        "--expect", action="append", default=[], help="PROBE=id1,id2: who should know the probe at the start"
    )
    ap.add_argument("-q", "--quiet", action="store_true", help="only problems and summaries")
    args = ap.parse_args(argv)
    expect = None
    if args.expect:
        expect = {}
        for e in args.expect:
            name, _, ids = e.partition("=")
            expect[name] = {i for i in ids.split(",") if i}
    paths = args.scenarios or sorted((REPO / "scenarios").glob("*.yaml"))
    total_err = total_warn = 0
    for p in paths:
        rep = Report(args.quiet)
        check_scenario(p, expect, rep)
        total_err += len(rep.errors)
        total_warn += len(rep.warnings)
    print(f"{len(paths)} scenario(s): {total_err} error(s), {total_warn} warning(s)")
    return 1 if total_err else 0


if __name__ == "__main__":
    sys.exit(main())
