"""An agent's mind at a moment of a run: where it is, what it plans, what it would recall,
what it has concluded and why; and interviews, answered from its memories.

Both work on the run's state rebuilt in memory from its nearest checkpoint
(`Run.state_at`), never on the stored run.
"""

from __future__ import annotations

from smallville.brain import requests as rq
from smallville.errors import UnknownAgent
from smallville.sim.recall import cleaned, dated


def _agent(sim, agent_id: str):
    if agent_id not in sim.agents:
        raise UnknownAgent(f"unknown agent {agent_id!r}; the run has {', '.join(sorted(sim.agents))}")
    return sim.agents[agent_id]


def inspect_agent(sim, agent_id: str, query: str | None = None, k: int = 10) -> dict:
    """Everything worth knowing about one agent now, as plain JSON. Without a `query`, what
    it would recall of what it is doing, as it perceives its own action ("Ann Lee is
    reading"): a text the run embedded when the action began."""
    agent = _agent(sim, agent_id)
    query = query or f"{agent.name} is {agent.activity}"
    hits = sim.retrieve(agent, query, k) if len(agent.stream) else []
    stream = agent.stream
    reflections = [stream[i] for i in range(len(stream)) if stream[i].kind == "reflection"][-5:]
    return {
        "agent": agent.id,
        "name": agent.name,
        "time": sim.now_datetime().strftime("%Y-%m-%d %H:%M"),
        "area": sim.world.area_of(agent.id),
        "tile": list(sim.world.position(agent.id)),
        "status": agent.status.value,
        "activity": agent.activity,
        "plan": [[sim.clock(b.start), sim.clock(b.end), b.activity, b.where] for b in agent.plan],
        "now": [sim.clock(agent.block.start), sim.clock(agent.block.end), agent.block.activity]
        if agent.block
        else None,
        "next": [[sim.clock(a.start), a.description] for a in list(agent.queue)[:5]],
        "query": query,
        "recall": [
            {
                "id": h.memory.id,
                "kind": h.memory.kind,
                "text": h.memory.text,
                "score": round(h.score, 4),
                "recency": round(h.recency, 4),
                "importance": round(h.importance, 4),
                "relevance": round(h.relevance, 4),
            }
            for h in hits
        ],
        "reflections": [
            {"id": m.id, "text": m.text, "because": [{"id": i, "text": stream[i].text} for i in m.links]}
            for m in reversed(reflections)
        ],
        "relationships": {
            other: {
                "name": sim.agents[other].name if other in sim.agents else None,
                "view": view,
                "talks": agent.talks.get(other, 0),
            }
            for other, view in sorted(agent.relationships.items())
        },
        "knows": sorted(agent.knows),
        "memories": len(stream),
    }


def interview_request(sim, agent, question: str, hits) -> rq.Interview:
    """The question put to `agent` now, with the memories it brought back (`hits`), cleaned
    and dated as every prompt's (`smallville.sim.recall`)."""
    kept = cleaned(sim, agent, [h.memory for h in hits])
    return rq.Interview(
        agent.id,
        agent.name,
        agent.persona(),
        question,
        tuple((m.id, when, text) for m, (when, text) in zip(kept, dated(sim, kept))),
        sim.moment(),
    )


def interview(sim, agent_id: str, question: str, k: int = 10) -> dict:
    """The agent's answer to a question, from the memories the question brings back."""
    agent = _agent(sim, agent_id)
    request = interview_request(sim, agent, question, sim.retrieve(agent, question, k))
    reply = sim.brain.answer([request])[0]
    cited = [i for i in reply.cites if 0 <= i < len(agent.stream)]
    return {
        "agent": agent.id,
        "name": agent.name,
        "time": sim.now_datetime().strftime("%Y-%m-%d %H:%M"),
        "question": question,
        "answer": reply.text,
        "brain": sim.brain.name,
        "memories": [{"id": i, "text": agent.stream[i].text} for i in cited],
    }
