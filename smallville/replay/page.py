"""The replay page: one self-contained HTML file that animates a run (no network requests).

What it draws comes from `Drawing`, which turns events into tracks, doings and speech one
at a time: the replay page feeds it the whole log, `smallville serve` the lines a running
run appends. The drawing code itself (town.js) is shared by both pages.
"""

from __future__ import annotations

import json
from pathlib import Path

from smallville import events
from smallville.errors import RunError
from smallville.replay.accounts import accounts, spreads
from smallville.replay.initials import initials
from smallville.replay.record import RunRecord
from smallville.world import Grid

_HERE = Path(__file__).parent
_TEMPLATE = _HERE / "page.html"
TOWN_JS, WHY_JS, CONTROLS = _HERE / "town.js", _HERE / "why.js", _HERE / "controls.html"


class Drawing:
    """What the page draws of a run, built event by event: each agent's track (`[t, column,
    row]` per tile walked), what it is doing, what is said; with `minds`, plans and memories
    too. `take()` hands over what was added since the last `take()`."""

    def __init__(self, scenario, names: dict[str, str], minds: bool = True, from_start: bool = True) -> None:
        self.grid = Grid(scenario.map.grid, scenario.map.legend)
        self.tile_time = scenario.map.tile_time
        self.names = names
        self.minds = minds
        self.placed = set() if from_start else set(names)  # agents whose track has begun
        self.end = 0.0
        self._fresh()

    def _fresh(self) -> None:
        self.tracks: dict[str, list] = {a: [] for a in self.names}
        self.doing: dict[str, list] = {a: [] for a in self.names}
        self.plans: dict[str, list] = {a: [] for a in self.names}
        self.memories: dict[str, list] = {a: [] for a in self.names}
        self.speech: list = []

    def add(self, e: dict) -> None:
        t, a, d, kind = e["t"], e["agent"], e["data"], e["kind"]
        self.end = max(self.end, t)
        if kind == events.SPAWN:
            self.tracks[a].append([t, *d["tile"]])
            self.placed.add(a)
        elif kind == events.MOVE:
            if a not in self.placed:
                self.tracks[a].append([0, *d["from"]])
                self.placed.add(a)
            path = self.grid.path(tuple(d["from"]), tuple(d["to"])) or [tuple(d["from"]), tuple(d["to"])]
            self.tracks[a].extend([t + i * self.tile_time, c, r] for i, (c, r) in enumerate(path))
            self.doing[a].append([t, f"walking to {d['area']}"])
        elif kind == events.ACTION:
            self.doing[a].append([t, d["action"]])
        elif kind == events.SLEEP:
            self.doing[a].append([t, "sleeping"])
        elif kind == events.TALK_START:
            self.doing[a].append([t, f"talking with {self.names.get(d['with'], d['with'])}"])
            self.doing[d["with"]].append([t, f"talking with {self.names.get(a, a)}"])
        elif kind == events.SAY:
            self.speech.append([t, a, d["to"], d["text"]])
        elif self.minds and kind == events.PLAN:
            self.plans[a].append([t, d["date"], d["blocks"]])
        elif self.minds and kind == events.MEMORY:
            self.memories[a].append([t, d["id"], d["kind"], d["importance"], d["text"], events.get(e, "links")])

    def take(self) -> dict:
        """What was added since the last take: only the agents with something new."""
        out = {"end": self.end, "speech": self.speech}
        for name in ("tracks", "doing") + (("plans", "memories") if self.minds else ()):
            out[name] = {a: items for a, items in getattr(self, name).items() if items}
        self._fresh()
        return out


def start_tiles(scenario) -> dict[str, list]:
    """Where each agent stands before its first event: its start area's (or home's) first tile."""
    grid = Grid(scenario.map.grid, scenario.map.legend)
    out = {}
    for spec in scenario.agents:
        tiles = grid.tiles_in(spec.start_at or spec.home)
        out[spec.id] = list(tiles[0]) if tiles else [0, 0]
    return out


def agent_list(names: dict[str, str]) -> list[dict]:
    """The people as the page draws them, by id: id, name and a label unique in the town."""
    labels = initials(names)
    return [{"id": a, "name": n, "label": labels[a]} for a, n in sorted(names.items())]


def town_data(scenario) -> dict:
    """The map as the page draws it."""
    spec = scenario.map
    return {"rows": list(spec.grid), "legend": spec.legend, "objects": [[o.name, *o.at] for o in spec.objects]}


def page_data(run: RunRecord) -> dict:
    """Everything the page shows, as plain JSON: map, agents, their tracks and what they did."""
    if run.scenario is None:
        raise RunError(f"cannot draw {run.path}: {run.scenario_note}")
    from smallville.why import Trail

    names = run.agents
    trail = Trail.of(run.events)
    drawing = Drawing(run.scenario, names)
    for e in run.events:
        drawing.add(e)
    starts = start_tiles(run.scenario)
    for agent_id, track in drawing.tracks.items():
        if not track:  # never moved: stand where they started
            track.append([0, *starts[agent_id]])
    m = run.manifest
    return {
        "title": f"{m.scenario['name']} — {m.run_id}",
        "start": m.sim_start,
        "end": max([e["t"] for e in run.events] + [0]),
        "tick": run.scenario.tick,
        "map": town_data(run.scenario),
        "agents": agent_list(names),
        "tracks": drawing.tracks,
        "doing": drawing.doing,
        "plans": drawing.plans,
        "memories": drawing.memories,
        "speech": drawing.speech,
        "note": run.scenario_note,
        "why": accounts(run, trail),
        "spreads": spreads(run, trail),
    }


def inline(template: str) -> str:
    """A page's HTML with the shared drawing code, accounts and controls put in their places."""
    return (
        template.replace("/*TOWN_JS*/", TOWN_JS.read_text(encoding="utf-8"))
        .replace("/*WHY_JS*/", WHY_JS.read_text(encoding="utf-8"))
        .replace("<!--CONTROLS-->", CONTROLS.read_text(encoding="utf-8").rstrip("\n"))
    )


def render_page(run: RunRecord) -> str:
    data = json.dumps(page_data(run), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return inline(_TEMPLATE.read_text(encoding="utf-8")).replace("/*DATA*/null", data)
