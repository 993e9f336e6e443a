"""Why an agent did what it did, from a run's records alone: the decision, the request it
answered, the memories that request was shown with their scores, and where each memory came
from (perceived, told, reflected, planned, a seed), followed back `depth` steps.

Everything is read from the log (`Trail`) and, for what a request was shown, the answer
record; no state is restored and no model is asked. The result is plain JSON: the command
line renders it (`smallville.why.text`), the page shows it, and `Run.why` returns it.
"""

from __future__ import annotations

from smallville import events as ev
from smallville.errors import UsageError
from smallville.why.trail import Trail

TERMS = ("recency", "importance", "relevance")
FOLLOWED = 3  # memories followed back per request beyond the first step (the best scored)


class Accounts:
    """Accounts of one run's decisions. `shown(key)` gives the texts of the request with
    that key (from the answer record), or None when the record lacks it."""

    def __init__(self, trail: Trail, shown=None, weights=(1.0, 1.0, 1.0)) -> None:
        self.trail = trail
        self.shown = shown or (lambda key: None)
        self.weights = tuple(weights)

    def why(self, agent: str, line: int, depth: int = 1) -> dict:
        """The account of the agent's event at `line` of the log, followed back `depth` steps."""
        if not 1 <= line <= len(self.trail.log):
            raise UsageError(f"--event {line} is not in the log, which has {len(self.trail.log):,} events")
        e = self.trail[line]
        if e["agent"] != agent:
            raise UsageError(f"event {line} ({e['kind']}) is {e['agent'] or 'nobody'}'s, not {agent}'s")
        self.trail.require_recall()
        out = {"agent": agent, **self.moment(line), "kind": e["kind"], "data": e["data"]}
        if e["kind"] == ev.LEARNED:
            out["memory"] = self.memory(agent, e["data"]["memory"], depth)
        elif e["kind"] == ev.MEMORY and e["data"].get("id") is not None:
            out["memory"] = self.memory(agent, e["data"]["id"], depth)
        req = e["data"].get("req")
        out["request"] = self.request(agent, req, depth) if req is not None else None
        return out

    def moment(self, line: int) -> dict:
        e = self.trail[line]
        return {"line": line, "t": e["t"], "time": e["time"]}

    def request(self, agent: str, req: int, depth: int, best: int | None = None) -> dict:
        """Request number `req` of the agent: its kind and key, and per query the memories
        retrieval brought back (best first) with their scores and origins; `best`: only the
        best scored that many, over all queries."""
        line = self.trail.recalls.get((agent, req))
        if line is None:
            return {
                "req": req,
                "kind": None,
                "queries": [],
                "note": "this request was built from no retrieved memories",
            }
        data = self.trail[line]["data"]
        shown = self.shown(data["key"])
        rows = [(q, rank, row) for q, (_, hits) in enumerate(data["queries"]) for rank, row in enumerate(hits, 1)]
        if best is not None:
            rows = sorted(rows, key=lambda r: -r[2][1])[:best]
        queries = [{"query": query, "memories": []} for query, _ in data["queries"]]
        for q, rank, row in rows:
            queries[q]["memories"].append(self.recalled(agent, rank, row, shown, depth))
        return {
            "req": req,
            "kind": data["request"],
            "key": data["key"],
            **self.moment(line),
            "queries": [q for q in queries if q["memories"] or best is None],
        }

    def recalled(self, agent: str, rank: int, row: list, shown: str | None, depth: int) -> dict:
        """One memory of a request's recall: rank, scores, the term that weighed most, text and origin."""
        mid, score, *terms = row
        weighted = [w * x for w, x in zip(self.weights, terms)]
        item = {
            "rank": rank,
            "id": mid,
            "score": score,
            **dict(zip(TERMS, terms)),
            "ranked_by": [t for t, w in zip(TERMS, weighted) if w >= max(weighted) - 1e-9],
        }
        memory = self.memory(agent, mid, depth - 1) if mid >= 0 else {"origin": {"how": "working memory"}}
        if shown is not None and "text" in memory:
            item["shown"] = memory["text"] in shown
        return {**item, **memory}

    def memory(self, agent: str, mid: int | None, depth: int) -> dict:
        """A memory of the agent: its text, kind, when, and where it came from (followed back
        `depth` more steps)."""
        line = self.trail.memories.get((agent, mid)) if mid is not None else None
        if line is None:
            return {"origin": {"how": "unknown"}}
        d = self.trail[line]["data"]
        return {
            "text": d["text"],
            "kind": d["kind"],
            "rating": d["importance"],
            **self.moment(line),
            "origin": self.origin(agent, line, depth),
        }

    def origin(self, agent: str, line: int, depth: int) -> dict:
        """Where the memory at `line` came from."""
        d, kind = self.trail[line]["data"], self.trail[line]["data"]["kind"]
        if kind == "seed":
            return {"how": "seed"}
        if kind == "observation":
            return {"how": "perceived", "where": self.trail.area(agent, line)}
        if kind == "chat" and "speaker" in d:
            return self.told(agent, line, d, depth)
        if kind == "reflection":
            return {
                "how": "reflected",
                "from": [{"id": i, **self.memory(agent, i, depth - 1 if depth > 1 else 0)} for i in d.get("links", [])]
                if depth > 0
                else d.get("links", []),
            }
        how = {"plan": "planned", "thought": "thought", "conversation": "thought"}.get(kind, kind)
        out = {"how": how, "req": d.get("req")}
        if depth > 0 and d.get("req") is not None:
            out["request"] = self.request(agent, d["req"], depth, best=FOLLOWED)
        return out

    def told(self, agent: str, line: int, d: dict, depth: int) -> dict:
        """A chat line's origin: who said it to whom, in which conversation, and (followed
        back) what the speaker recalled for it."""
        speaker, listener = d["speaker"], d["listener"]
        said = self.trail.said(speaker, listener, d["line"], line)
        talk = self.trail.talk_of(speaker, listener, said or line)
        out = {
            "how": "said" if speaker == agent else "told",
            "by": speaker,
            "to": listener,
            "line": d["line"],
            "said": self.moment(said) if said else None,
            "conversation": {
                **self.moment(talk),
                "began": self.trail[talk]["agent"],
                "with": self.trail[talk]["data"]["with"],
                "area": self.trail[talk]["data"]["area"],
            }
            if talk
            else None,
        }
        req = self.trail[said]["data"].get("req") if said else None
        if depth > 0 and req is not None:
            out["request"] = self.request(speaker, req, depth, best=FOLLOWED)
        return out
