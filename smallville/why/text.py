"""`smallville why` for people: an account (`Accounts.why`) or a probe's chain as plain lines."""

from __future__ import annotations

INDENT = "  "


def decision(kind: str, d: dict) -> str:
    """What an event says the agent did, in a few words."""
    if kind == "plan":
        return (
            f"planned {d['date']}: "
            + "; ".join(f"{b[0]} {b[2]}" for b in d["blocks"][:4])
            + ("; ..." if len(d["blocks"]) > 4 else "")
        )
    if kind == "action":
        return f"began {d['action']!r} in {d['area']} until {d['until']}"
    if kind == "replan":
        return f"re-planned ({d['reason']}): " + "; ".join(f"{a[0]} {a[1]}" for a in d["actions"])
    if kind == "say":
        return f"said to {d['to']}: {d['text']!r}"
    if kind == "talk_start":
        return f"began talking with {d['with']} in {d['area']}"
    if kind == "reflect":
        return "reflected on: " + " / ".join(d["questions"])
    if kind == "learned":
        return f"came to know {d['probe']!r}"
    if kind == "memory":
        return f"kept a {d['kind']} memory: {d['text']!r}"
    return kind


def account_lines(a: dict) -> list[str]:
    """An account as lines: the decision, where its memory came from, the request and its recall."""
    lines = [f"{a['agent']} at {a['time']} (event {a['line']}): {decision(a['kind'], a['data'])}"]
    if "memory" in a:
        lines += memory_lines(a["memory"], 1)
    if a.get("request"):
        lines += request_lines(a["request"], 1)
    elif "memory" not in a:
        lines.append(
            f"{INDENT}(no brain request produced this event: only plans, actions, re-plans, lines, talks "
            "begun, reflections and the memories they made name one)"
        )
    if a.get("chain"):
        lines += [
            INDENT + line
            for line in chain_lines({"agent": a["agent"], "probe": a["data"]["probe"], "chain": a["chain"]})
        ]
    return lines


def request_lines(r: dict, level: int) -> list[str]:
    pad = INDENT * level
    if not r.get("kind"):
        return [f"{pad}request #{r['req']}: {r.get('note', 'not recorded')}"]
    out = [f"{pad}answering request #{r['req']} ({r['kind']}, key {r['key']}), which recalled:"]
    for q in r["queries"]:
        out.append(f"{pad}{INDENT}for {q['query']!r}:")
        for m in q["memories"]:
            out += recalled_lines(m, level + 2)
    return out


def recalled_lines(m: dict, level: int) -> list[str]:
    pad = INDENT * level
    shown = {True: "", False: " (left out of the prompt)"}.get(m.get("shown"), "")
    head = (
        f"{pad}{m['rank']:>2}. #{m['id']} score {m['score']:.2f} = recency {m['recency']:.2f} + importance "
        f"{m['importance']:.2f} + relevance {m['relevance']:.2f} (most: {' and '.join(m['ranked_by'])}){shown}"
    )
    return [head] + memory_lines(m, level + 1)


def memory_lines(m: dict, level: int) -> list[str]:
    pad = INDENT * level
    if "text" not in m:
        return [f"{pad}({m['origin']['how']})"]
    out = [f"{pad}{m['kind']} of {m['time']}: {m['text']!r}", f"{pad}{origin_text(m['origin'])}"]
    o = m["origin"]
    for evidence in o.get("from", []) if o["how"] == "reflected" else []:
        if isinstance(evidence, dict) and "text" in evidence:
            out += [f"{pad}{INDENT}#{evidence['id']}:"] + memory_lines(evidence, level + 2)
    if o.get("request"):
        out += request_lines(o["request"], level + 1)
    return out


def origin_text(o: dict) -> str:
    how = o["how"]
    if how == "seed":
        return "<- a seed memory: known from the start"
    if how == "perceived":
        return f"<- perceived in {o['where'] or 'an unknown place'}"
    if how in ("told", "said"):
        talk = o.get("conversation")
        where = (
            f" in the conversation {talk['began']} began with {talk['with']} at {talk['time']} ({talk['area']})"
            if talk
            else ""
        )
        said = f", said at {o['said']['time']}" if o.get("said") else ""
        who = f"told by {o['by']}" if how == "told" else f"said to {o['to']}"
        return f"<- {who}{where}{said}"
    if how == "reflected":
        ids = [e["id"] if isinstance(e, dict) else e for e in o["from"]]
        return "<- reflected from memories " + ", ".join(f"#{i}" for i in ids)
    if how in ("planned", "thought"):
        return f"<- {how} (request #{o['req']})" if o.get("req") is not None else f"<- {how}"
    return f"<- {how}"


def chain_lines(c: dict) -> list[str]:
    """A probe's chain to an agent, one hop a line, from the source."""
    if not c["chain"]:
        return [f"{c['agent']} never came to know {c['probe']!r}"]
    out = [f"How {c['agent']} came to know {c['probe']!r}:"]
    for hop in c["chain"]:
        if "from" not in hop:
            how = {
                "seed": "knew it from the start",
                "untold": "heard it from someone this log does not name",
            }.get(hop["source"], f"had it first ({hop['source']})")
            out.append(f"{INDENT}{hop['time']}  {hop['agent']} {how}: memory #{hop['memory']} {hop['text']!r}")
            continue
        talk = f" in the conversation of {hop['conversation']['time']}" if hop.get("conversation") else ""
        via = {
            "recalled": f"{hop['from']} recalled it (memory #{hop.get('recalled')})",
            "fresh": f"{hop['from']} had it in mind without recalling it",
            "unrecorded": "recall not recorded",
        }[hop["via"]]
        out.append(f"{INDENT}{hop['time']}  {hop['agent']} was told by {hop['from']}{talk}: {hop['text']!r} [{via}]")
    return out
