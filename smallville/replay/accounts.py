"""What the replay page, which has no server, carries of "why": the account of every line said
and plan made (`smallville why`'s, one step deep, each query's best `SHOWN` memories, their
texts left to the page's own memories) and each probe's spread (`probe_tree`)."""

from __future__ import annotations

from smallville import events
from smallville.replay.record import RunRecord
from smallville.why import Accounts, Trail, probe_tree, weights

SHOWN = 3  # memories per query in the page's accounts (`smallville why` lists them all)
SLIM = ("id", "score", "recency", "importance", "relevance", "t", "time", "origin")  # what the page shows of one


def accounts(run: RunRecord, trail: Trail) -> dict[str, dict] | None:
    """The account (`smallville why`'s, one step deep) of every line said and plan made, by
    "agent kind t", for the page's "why" without a server; each query keeps its best
    `SHOWN` memories and counts the rest. None for a run that did not record recall."""
    if not trail.records_recall:
        return None
    told = Accounts(trail, weights=weights(run.manifest))
    out = {}
    for line, e in enumerate(run.events, 1):
        if e["kind"] in (events.SAY, events.PLAN) and "req" in e["data"]:
            a = told.why(e["agent"], line, depth=0)
            data = {k: v for k, v in e["data"].items() if k != "blocks"}  # (the page has the plan)
            out[f"{e['agent']} {e['kind']} {seconds(e['t'])}"] = {**a, "data": data, "request": trimmed(a["request"])}
    return out


def trimmed(request: dict | None) -> dict | None:
    """A request's account with each query's best `SHOWN` memories, and how many more it had;
    a memory without its text, which the page has among the agent's memories (by id)."""
    if not request or not request.get("kind"):
        return request
    queries = [
        {"query": q["query"], "memories": [slim(m) for m in q["memories"][:SHOWN]], "more": len(q["memories"][SHOWN:])}
        for q in request["queries"]
    ]
    return {"req": request["req"], "kind": request["kind"], "queries": queries}


def seconds(t: float) -> str:
    """A time as the page's script writes it (3540, not 3540.0)."""
    return str(int(t)) if t == int(t) else repr(t)


def slim(memory: dict) -> dict:
    return {k: memory[k] for k in SLIM if k in memory}


def spreads(run: RunRecord, trail: Trail) -> dict[str, dict]:
    """Each probe's spread (`smallville.why.probe_tree`), for the page's tree of who told whom."""
    return {p.name: probe_tree(run, p.name, trail) for p in run.scenario.probes}
