"""The replay page: one self-contained HTML file that animates a run (no network requests)."""

from __future__ import annotations

import json
from pathlib import Path

from smallville import events
from smallville.errors import RunError
from smallville.replay.record import RunRecord
from smallville.world import Grid

_TEMPLATE = Path(__file__).with_name("page.html")


def page_data(run: RunRecord) -> dict:
    """Everything the page shows, as plain JSON: map, agents, their tracks and what they did."""
    if run.scenario is None:
        raise RunError(f"cannot draw {run.path}: {run.scenario_note}")
    spec = run.scenario.map
    grid = Grid(spec.grid, spec.legend)
    names = run.agents
    tracks: dict[str, list] = {a: [] for a in names}
    doing: dict[str, list] = {a: [] for a in names}
    plans: dict[str, list] = {a: [] for a in names}
    memories: dict[str, list] = {a: [] for a in names}
    speech = []
    for e in run.events:
        t, a, d, kind = e["t"], e["agent"], e["data"], e["kind"]
        if kind == events.SPAWN:
            tracks[a].append([t, *d["tile"]])
        elif kind == events.MOVE:
            if not tracks[a]:
                tracks[a].append([0, *d["from"]])
            path = grid.path(tuple(d["from"]), tuple(d["to"])) or [tuple(d["from"]), tuple(d["to"])]
            tracks[a].extend([t + i * spec.tile_time, c, r] for i, (c, r) in enumerate(path))
            doing[a].append([t, f"walking to {d['area']}"])
        elif kind == events.ACTION:
            doing[a].append([t, d["action"]])
        elif kind == events.SLEEP:
            doing[a].append([t, "sleeping"])
        elif kind == events.TALK_START:
            doing[a].append([t, f"talking with {names.get(d['with'], d['with'])}"])
            doing[d["with"]].append([t, f"talking with {names.get(a, a)}"])
        elif kind == events.SAY:
            speech.append([t, a, d["to"], d["text"]])
        elif kind == events.PLAN:
            plans[a].append([t, d["date"], d["blocks"]])
        elif kind == events.MEMORY:
            memories[a].append([t, d["id"], d["kind"], d["importance"], d["text"], events.get(e, "links")])
    for agent_id, track in tracks.items():
        if not track:                                  # never moved: stand where they started
            spec_agent = next(s for s in run.scenario.agents if s.id == agent_id)
            tiles = grid.tiles_in(spec_agent.start_at or spec_agent.home)
            track.append([0, *tiles[0]] if tiles else [0, 0, 0])
    m = run.manifest
    return {
        "title": f"{m.scenario['name']} — {m.run_id}",
        "start": m.sim_start, "end": max([e["t"] for e in run.events] + [0]),
        "tick": run.scenario.tick,
        "map": {"rows": list(spec.grid), "legend": spec.legend,
                "objects": [[o.name, *o.at] for o in spec.objects]},
        "agents": [{"id": a, "name": n} for a, n in sorted(names.items())],
        "tracks": tracks, "doing": doing, "plans": plans, "memories": memories, "speech": speech,
        "note": run.scenario_note,
    }


def render_page(run: RunRecord) -> str:
    data = json.dumps(page_data(run), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return _TEMPLATE.read_text(encoding="utf-8").replace("/*DATA*/null", data)
