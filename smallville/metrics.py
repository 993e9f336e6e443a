"""Metrics of a run, computed from its event log and manifest over simulated time.

`run_metrics(RUN_DIR)` reads a run directory (through `smallville.replay.load_run`) and returns
a `RunMetrics`: plain dicts and lists (JSON-ready), with `.flat()` for one row of numbers and
`.to_pandas()` when pandas is installed. Four families, after the paper's evaluation:

- diffusion: for each scenario probe, who knew it at the start and at the end, when each agent
  learned it and from whom (the chain of conversations back to the seed holder, from the chat
  memories' recorded speakers), a curve of knowers per simulated hour, the chains' `depth` (the
  most tellings in one; None for a log whose chat memories do not name their speaker) and
  `recalled_share`, the share of tellings whose teller was shown the news by retrieval
  (`smallville.why.spread`; None for a log without recall records);
- network: who knows of whom (relationships in the scenario) and who has talked with whom,
  as undirected pairs, and the density edges / (n (n - 1) / 2) at the start and at the end;
- coordination: for each scenario event that happens somewhere (a party), who was told of it
  before it began, who planned to be there during it, and who was there;
- activity: conversations, reflections, re-plans and memories per agent, brain requests by
  kind, and tokens and cost when a model answered.

`smallville.plots` draws them (diffusion, the network at start and end, attendance).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from smallville.errors import ExtraMissing
from smallville.events import (
    ACTION,
    LEARNED,
    MEMORY,
    MOVE,
    PLAN,
    REFLECT,
    RELATIONSHIP,
    REPLAN,
    SPAWN,
    TALK_START,
    said,
)
from smallville.why.spread import spread
from smallville.why.trail import Trail

_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
EVENT_WINDOW = 2 * 3600.0  # an event with no matching end lasts this long
SUMMARY_COLUMNS = (
    "known_end",
    "density_end",
    "attended",
    "told_and_attended",
    "conversations",
    "reflections",
    "replans",
    "memories_per_agent",
)
"""The measures an experiment's summary shows (printed and plotted): flat metrics ending in one of these."""


@dataclass
class RunMetrics:
    run: str
    diffusion: dict = field(default_factory=dict)
    network: dict = field(default_factory=dict)
    coordination: list = field(default_factory=list)
    activity: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "run": self.run,
            "info": self.info,
            "diffusion": self.diffusion,
            "network": self.network,
            "coordination": self.coordination,
            "activity": self.activity,
        }

    def flat(self) -> dict:
        """One row of numbers: the metrics an experiment compares across runs."""
        row: dict = {}
        n = max(1, len(self.info.get("agents", [])))
        for name, d in self.diffusion.items():
            row[f"{name}_known_start"] = len(d["start"])
            row[f"{name}_known_end"] = len(d["end"])
            row[f"{name}_known_end_fraction"] = round(len(d["end"]) / n, 4)
            row[f"{name}_longest_chain"] = max((len(c) - 1 for c in d["chains"].values()), default=0)
            row[f"{name}_chain_depth"] = d.get("depth")
            row[f"{name}_recalled_share"] = d.get("recalled_share")
            hours = [x["t"] / 3600 for x in d["learned"] if x["agent"] not in d["start"]]
            row[f"{name}_median_hours_to_learn"] = round(_median(hours), 3) if hours else None
        net = self.network
        for key in ("edges_start", "edges_end", "density_start", "density_end", "talked_pairs"):
            row[f"network_{key}"] = net.get(key)
        for ev in self.coordination:
            slug = ev["slug"]
            for key in ("told", "planned", "attended", "told_and_attended"):
                row[f"{slug}_{key}"] = len(ev[key])
        act = self.activity
        for key in ("conversations", "reflections", "reflect_sessions", "replans", "memories", "actions"):
            row[key] = act["totals"].get(key, 0)
        row["memories_per_agent"] = round(act["totals"].get("memories", 0) / n, 3)
        if "forgotten" in act["totals"]:
            row["forgotten_per_agent"] = round(act["totals"]["forgotten"] / n, 3)
        row["requests"] = act.get("requests_total", 0)
        usage = act.get("usage") or {}
        row["tokens"] = usage.get("tokens")
        row["cost"] = usage.get("cost")
        return row

    def to_pandas(self):
        """The flat row as a one-row pandas DataFrame (pandas is not a dependency of smallville)."""
        return require_pandas().DataFrame([{"run": self.run, **self.flat()}])


def summary_measures(summary: list[dict]) -> list[str]:
    """The measures of an experiment's summary rows (`METRIC_mean`, `METRIC_std`) that it
    shows (SUMMARY_COLUMNS), in the order first met."""
    keys: list[str] = []
    for r in summary:
        for k in r:
            base = k[:-5] if k.endswith("_mean") else None
            if base and base not in keys and any(base.endswith(c) for c in SUMMARY_COLUMNS):
                keys.append(base)
    return keys


def run_metrics(run_dir: str | Path) -> RunMetrics:
    """Every metric of one run directory."""
    from smallville.replay import load_run

    record = load_run(run_dir)
    return compute(record.manifest, record.events, record.scenario, run=Path(run_dir).name)


def compute(manifest, events: list[dict], scenario=None, run: str = "") -> RunMetrics:
    """The metrics of a run from its `Manifest`, its events and (if at hand) its scenario."""
    agents = manifest.agents or ([a.id for a in scenario.agents] if scenario is not None else [])
    agents = sorted(agents)
    names = {a.id: a.name for a in scenario.agents} if scenario is not None else {}
    by_name = {v: k for k, v in names.items()}
    for a in agents:  # without the scenario: "Ann Lee" <-> ann_lee
        by_name.setdefault(a.replace("_", " ").title(), a)
    start = _parse(manifest.sim_start) or (scenario.start if scenario is not None else None)
    reached = _seconds(start, manifest.sim_reached) if start else None
    end_t = reached if reached is not None else max((e["t"] for e in events), default=0.0)
    probes = {p.name: tuple(w.lower() for w in p.match) for p in scenario.probes} if scenario is not None else {}
    for name in manifest.probes or {}:
        probes.setdefault(name, ())
    out = RunMetrics(run=run or manifest.run_id)
    out.info = {
        "run_id": manifest.run_id,
        "status": manifest.status,
        "seed": manifest.seed,
        "scenario": (manifest.scenario or {}).get("name"),
        "agents": agents,
        "sim_start": manifest.sim_start,
        "sim_reached": manifest.sim_reached,
        "hours": round(end_t / 3600, 3),
        "config": manifest.config or {},
        "brain": (manifest.brain or {}).get("name"),
        "wall_seconds": (manifest.wall or {}).get("seconds"),
    }
    out.diffusion = _diffusion(events, probes, by_name, end_t)
    out.network = _network(events, agents, scenario)
    out.coordination = _coordination(events, scenario, probes, start) if scenario is not None and start else []
    out.activity = _activity(events, agents, manifest)
    return out


# ---- diffusion ------------------------------------------------------------------------


def _diffusion(events: list[dict], probes: dict, by_name: dict, end_t: float) -> dict:
    first_spawn = next((i for i, e in enumerate(events) if e["kind"] == SPAWN), None)
    memories = {(e["agent"], e["data"]["id"]): e for e in events if e["kind"] == MEMORY}
    result = {}
    trail = Trail.of(events)
    for probe in probes:
        told = spread(trail, probe, probes[probe])
        learned, source = [], {}
        start: list[str] = []
        for i, e in enumerate(events):
            if e["kind"] != LEARNED or e["data"].get("probe") != probe:
                continue
            agent = e["agent"]
            mem = memories.get((agent, e["data"].get("memory")))
            kind = mem["data"]["kind"] if mem else None
            text = mem["data"]["text"] if mem else ""
            at_start = (i < first_spawn) if first_spawn is not None else (kind == "seed" and e["t"] == 0)
            src = _told_by(mem, by_name) if mem else None
            if src == agent:
                src = None
            if at_start:
                start.append(agent)
            source[agent] = src
            learned.append(
                {
                    "agent": agent,
                    "t": e["t"],
                    "time": e.get("time"),
                    "via": kind,
                    "from": src,
                    "memory": e["data"].get("memory"),
                    "text": text,
                }
            )
        chains = {}
        for row in learned:
            chain, seen = [row["agent"]], {row["agent"]}
            while source.get(chain[-1]) and source[chain[-1]] not in seen:
                chain.append(source[chain[-1]])
                seen.add(chain[-1])
            chains[row["agent"]] = chain
        hours = int(math.ceil(end_t / 3600)) if end_t else 0
        curve = [[h, sum(1 for r in learned if r["agent"] in start or r["t"] <= h * 3600)] for h in range(hours + 1)]
        result[probe] = {
            "start": sorted(start),
            "end": sorted(r["agent"] for r in learned),
            "learned": learned,
            "chains": chains,
            "curve": curve,
            "depth": told["depth"],
            "tellings": told["tellings"],
            "recalled_share": told["recalled_share"],
        }
    return result


def _told_by(memory: dict, by_name: dict) -> str | None:
    """The agent who said the chat line a memory holds (None for any other memory). A log
    written before chat memories named their `speaker` has only the sentence to go by."""
    line = said(memory)
    if line is not None:
        return line.speaker
    if memory["data"]["kind"] == "chat" and " said to " in memory["data"]["text"]:
        return by_name.get(memory["data"]["text"].split(" said to ", 1)[0])
    return None


# ---- network --------------------------------------------------------------------------


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def _network(events: list[dict], agents: list[str], scenario) -> dict:
    members = set(agents)
    known = set()
    if scenario is not None:
        for spec in scenario.agents:
            for other in spec.relationships:
                if other in members and other != spec.id:
                    known.add(_pair(spec.id, other))
    talks: dict[tuple[str, str], int] = {}
    met = set()
    for e in events:
        if e["kind"] == TALK_START and e["agent"] and e["data"].get("with"):
            p = _pair(e["agent"], e["data"]["with"])
            talks[p] = talks.get(p, 0) + 1
        elif e["kind"] == RELATIONSHIP and e["data"].get("with"):
            met.add(_pair(e["agent"], e["data"]["with"]))
    end = known | set(talks) | met
    n = len(agents)
    possible = n * (n - 1) / 2
    return {
        "agents": n,
        "edges_start": len(known),
        "edges_end": len(end),
        "density_start": round(len(known) / possible, 4) if possible else 0.0,
        "density_end": round(len(end) / possible, 4) if possible else 0.0,
        "talked_pairs": len(talks),
        "talks": [[a, b, c] for (a, b), c in sorted(talks.items())],
        "start": [list(p) for p in sorted(known)],
        "end": [list(p) for p in sorted(end)],
    }


# ---- coordination -----------------------------------------------------------------------


def _coordination(events: list[dict], scenario, probes: dict, start: datetime) -> list[dict]:
    located = [ev for ev in scenario.events if ev.where]
    place_of = {ev.where: ev.where.split(" / ")[0] for ev in located}
    out = []
    used_ends = set()
    stays = _stays(events, start)
    plans = _plan_blocks(events, start)
    for ev in sorted(located, key=lambda e: e.at):
        if ev.at < 0 or id(ev) in used_ends or re.search(r"\b(ended|ends|is over|finished)\b", ev.what.lower()):
            continue
        place = place_of[ev.where]
        end_ev = next(
            (
                x
                for x in sorted(located, key=lambda e: e.at)
                if x.at > ev.at
                and x.where == ev.where
                and id(x) not in used_ends
                and re.search(r"\b(ended|ends|is over|finished)\b", x.what.lower())
            ),
            None,
        )
        if end_ev is not None:
            used_ends.add(id(end_ev))
        t0, t1 = ev.at, (end_ev.at if end_ev is not None else ev.at + EVENT_WINDOW)
        low_what = ev.what.lower()
        words = [w for name, ws in probes.items() if ws and all(x in low_what for x in ws) for w in ws]
        told = set()
        for e in events:
            if e["kind"] != MEMORY or e["t"] >= t0:
                continue
            text = e["data"]["text"].lower()
            if place.lower() in text and words and all(w in text for w in words):
                told.add(e["agent"])
        planned = {
            a
            for a, blocks in plans.items()
            if any(_inside(where, place) and s < t1 and f > t0 for s, f, where, at in blocks if at < t1)
        }
        attended = {
            a for a, spans in stays.items() if any(_inside(area, place) and s < t1 and f > t0 for s, f, area in spans)
        }
        slug = "event_" + (re.sub(r"[^a-z0-9]+", "_", place.lower()).strip("_") or str(len(out)))
        if any(o["slug"] == slug for o in out):
            slug += f"_{len(out) + 1}"
        out.append(
            {
                "what": ev.what,
                "where": ev.where,
                "slug": slug,
                "start": _fmt(start, t0),
                "end": _fmt(start, t1),
                "matched_end": end_ev is not None,
                "told": sorted(told),
                "planned": sorted(planned),
                "attended": sorted(attended),
                "told_and_planned": sorted(told & planned),
                "told_and_attended": sorted(told & attended),
            }
        )
    return out


def _inside(area: str | None, place: str) -> bool:
    return bool(area) and (area == place or area.startswith(place + " / "))


def _stays(events: list[dict], start: datetime) -> dict[str, list]:
    """Per agent: (from, to, area) spans of where they were, from spawn and move events."""
    spans: dict[str, list] = {}
    current: dict[str, tuple[float, str]] = {}
    end = max((e["t"] for e in events), default=0.0) + 1
    for e in events:
        a = e["agent"]
        if e["kind"] == SPAWN:
            current[a] = (e["t"], e["data"].get("area"))
        elif e["kind"] == MOVE and a in current:
            since, area = current[a]
            spans.setdefault(a, []).append((since, e["t"], area))
            arrive = _arrival(e, start)
            current[a] = (arrive, e["data"].get("area"))
    for a, (since, area) in current.items():
        spans.setdefault(a, []).append((since, max(end, since + 1), area))
    return spans


def _arrival(e: dict, start: datetime) -> float:
    arrive = e["data"].get("arrive")
    when = _parse(e.get("time"))
    if not arrive or when is None:
        return e["t"]
    hh, mm = map(int, arrive.split(":"))
    at = when.replace(hour=hh, minute=mm, second=0)
    if at < when.replace(second=0):
        at += timedelta(days=1)
    return e["t"] + max(0.0, (at - when).total_seconds())


def _plan_blocks(events: list[dict], start: datetime) -> dict[str, list]:
    """Per agent: (start, end, area, planned_at) in seconds for every block of every plan."""
    plans: dict[str, list] = {}
    for e in events:
        if e["kind"] != PLAN:
            continue
        try:
            day = datetime.strptime(e["data"]["date"], "%A, %B %d, %Y")
        except (KeyError, ValueError):
            continue
        base = (day - start.replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds() - (
            start.hour * 3600 + start.minute * 60 + start.second
        )
        last = -math.inf
        offset = 0.0
        for s, f, _activity, where in e["data"].get("blocks", []):
            bs = base + offset + _clock(s)
            if bs < last:
                offset += 86400
                bs += 86400
            bf = base + offset + _clock(f)
            if bf <= bs:
                bf += 86400
            last = bs
            plans.setdefault(e["agent"], []).append((bs, bf, where, e["t"]))
    return plans


# ---- activity -----------------------------------------------------------------------------


def _activity(events: list[dict], agents: list[str], manifest) -> dict:
    per = {
        a: {"conversations": 0, "reflections": 0, "reflect_sessions": 0, "replans": 0, "memories": 0, "actions": 0}
        for a in agents
    }
    totals = {k: 0 for k in ("conversations", "reflections", "reflect_sessions", "replans", "memories", "actions")}

    def bump(agent, key):
        per.setdefault(agent, {k: 0 for k in totals})[key] += 1

    for e in events:
        kind, a = e["kind"], e["agent"]
        if kind == TALK_START:
            totals["conversations"] += 1
            bump(a, "conversations")
            if e["data"].get("with"):
                bump(e["data"]["with"], "conversations")
        elif kind == MEMORY and e["data"]["id"] is None:  # salience model: held in working memory only
            totals["forgotten"] = totals.get("forgotten", 0) + 1
        elif kind == MEMORY:
            totals["memories"] += 1
            bump(a, "memories")
            if e["data"].get("kind") == "reflection":
                totals["reflections"] += 1
                bump(a, "reflections")
        elif kind == REFLECT:
            totals["reflect_sessions"] += 1
            bump(a, "reflect_sessions")
        elif kind == REPLAN:
            totals["replans"] += 1
            bump(a, "replans")
        elif kind == ACTION:
            totals["actions"] += 1
            bump(a, "actions")
    requests = dict(manifest.requests or {})
    usage = None
    if manifest.usage:
        total = manifest.usage.get("total", manifest.usage)
        tokens = (total.get("prompt_tokens") or 0) + (total.get("completion_tokens") or 0)
        usage = {
            "tokens": total.get("tokens", tokens),
            "cost": total.get("cost"),
            "calls": total.get("calls"),
            "fallbacks": total.get("fallbacks"),
        }
    return {
        "totals": totals,
        "per_agent": per,
        "requests": requests,
        "requests_total": sum(requests.values()),
        "usage": usage,
    }


# ---- helpers --------------------------------------------------------------------------------


def _parse(text) -> datetime | None:
    if isinstance(text, datetime):
        return text
    try:
        return datetime.strptime(text, _TIME_FORMAT)
    except (TypeError, ValueError):
        return None


def _seconds(start: datetime, text) -> float | None:
    when = _parse(text)
    return (when - start).total_seconds() if when is not None else None


def _fmt(start: datetime, t: float) -> str:
    return (start + timedelta(seconds=t)).strftime(_TIME_FORMAT)


def _clock(text: str) -> float:
    hh, mm = map(int, text.split(":")[:2])
    return hh * 3600 + mm * 60


def _median(values: list[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def require_pandas():
    """The pandas module, for `to_pandas()`; `ExtraMissing` when it is not installed."""
    try:
        import pandas
    except ImportError:
        raise ExtraMissing("to_pandas() needs pandas, which smallville does not install: pip install pandas") from None
    return pandas


def print_metrics(m: RunMetrics, console=None) -> None:
    """The metrics of a run as rich tables."""
    from rich.markup import escape

    from smallville.tables import Table, make_console, print_table

    console = console or make_console()
    info = m.info
    console.print(
        f"[bold]{escape(str(info.get('scenario') or m.run))}[/]: run {info.get('run_id')}, "
        f"seed {info.get('seed')}, {len(info.get('agents', []))} agents, {info.get('hours')} simulated hours, "
        f"status {info.get('status')}"
    )
    n = len(info.get("agents", []))
    table = Table(title="Diffusion of information")
    for col in ("probe", "known at start", "known at end", "of", "chain depth", "told via recall", "longest chain"):
        table.add_column(col)
    for name, d in m.diffusion.items():
        longest = max(d["chains"].values(), key=len, default=[])
        share = d.get("recalled_share")
        table.add_row(
            name,
            str(len(d["start"])),
            str(len(d["end"])),
            str(n),
            "-" if d.get("depth") is None else str(d["depth"]),
            f"{share:.0%} of {d['tellings']}" if share is not None else "-",
            " <- ".join(longest) if longest else "",
        )
    print_table(console, table)
    for name, d in m.diffusion.items():
        if not d["learned"]:
            continue
        table = Table(title=f"Who learned {name!r}, when, from whom")
        for col in ("agent", "when", "via", "from", "chain"):
            table.add_column(col)
        for r in d["learned"]:
            table.add_row(
                r["agent"],
                r["time"] or str(r["t"]),
                r["via"] or "",
                r["from"] or "",
                " <- ".join(d["chains"][r["agent"]]),
            )
        print_table(console, table)
        step = max(1, len(d["curve"]) // 24)
        console.print(f"{name}: knowers per simulated hour: " + " ".join(f"{h}h:{c}" for h, c in d["curve"][::step]))
    net = m.network
    console.print(
        f"Relationship network: {net['edges_start']} -> {net['edges_end']} pairs, "
        f"density {net['density_start']} -> {net['density_end']} "
        f"({net['talked_pairs']} pairs talked)"
    )
    if m.coordination:
        table = Table(title="Coordination around events")
        for col in ("event", "from", "to", "told", "planned", "attended", "told and attended"):
            table.add_column(col)
        for ev in m.coordination:
            table.add_row(
                ev["what"],
                ev["start"],
                ev["end"],
                str(len(ev["told"])),
                str(len(ev["planned"])),
                str(len(ev["attended"])),
                ", ".join(ev["told_and_attended"]),
            )
        print_table(console, table)
    act = m.activity
    table = Table(title="Activity")
    cols = ("conversations", "reflections", "reflect_sessions", "replans", "memories", "actions")
    table.add_column("agent")
    for col in cols:
        table.add_column(col.replace("_", " "), justify="right")
    for agent, row in sorted(act["per_agent"].items()):
        table.add_row(agent, *(str(row.get(c, 0)) for c in cols))
    table.add_row("total", *(str(act["totals"].get(c, 0)) for c in cols), style="bold")
    print_table(console, table)
    requests = ", ".join(f"{k} {v}" for k, v in sorted(act["requests"].items()))
    console.print(f"Brain requests: {act['requests_total']}" + (f" ({requests})" if requests else ""))
    if act.get("usage"):
        u = act["usage"]
        console.print(f"Tokens: {u.get('tokens')}, cost: {u.get('cost')}")
