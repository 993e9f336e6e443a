"""Interviews: every agent of a run asked every question of the protocol at one simulated
time, from the run's state restored in memory (`Run.state_at`: a checkpoint, no
re-simulation of the run). The requests of all runs are gathered first, then answered
together, so the model's calls go out as many at once as the brain allows."""

from __future__ import annotations

from dataclasses import dataclass, field

from smallville.brain import requests as rq
from smallville.brain.base import fallbacks_of
from smallville.evaluate.knowledge import (
    Knowledge,
    claims_to_know,
    knowledge_at,
    strangers,
)
from smallville.evaluate.protocol import Protocol, Question
from smallville.evaluate.subjects import Subject
from smallville.mind import interview_request

RECALL_K = 10  # memories an answer may draw on (as `smallville interview`)
LIVED_K = RECALL_K  # memories the judge is shown per version and question (recalled even when ablated)


@dataclass
class Asked:
    """One question put to one agent of one run, before and after its answer."""

    subject: Subject
    question: Question
    request: rq.Interview
    time: str
    lived: tuple[str, ...]  # what the run holds on the question, for the judge
    answer: rq.Reply | None = None
    fallback: str | None = None
    row: dict = field(default_factory=dict)


def prepare(
    subject: Subject, protocol: Protocol, at: float, vectors: dict | None = None
) -> tuple[list[Asked], Knowledge]:
    """The interview requests of every agent of a run at `at`, and what its log says each
    agent knew then. Nothing of the run changes: the state is rebuilt in memory. `vectors`
    keeps the questions' embeddings by embedder across runs (the runs of an experiment ask
    the same questions: each is embedded once)."""
    run = subject.run
    out: list[Asked] = []
    with run.state_at(at, strict=True) as sim:
        when = sim.now_datetime()
        asks = {a: protocol.questions_for(run.scenario, a, when) for a in sorted(sim.agents)}
        known = embedded(
            sim.embedder,
            [q.text for qs in asks.values() for q in qs],
            (vectors if vectors is not None else {}).setdefault(_name(run), {}),
        )
        for agent_id, questions in asks.items():
            agent = sim.agents[agent_id]
            queries = [known[q.text] for q in questions]
            # One pass for all of an agent's questions, recalled as the run's memory model
            # recalls: each is asked of the same mind, not of one that the questions before
            # it have just reminded of things.
            hits = sim.memory.retrieve_many(sim, agent, queries, RECALL_K)
            for question, found in zip(questions, hits):
                request = interview_request(sim, agent, question.text, found if sim.config.retrieval else ())
                out.append(
                    Asked(
                        subject,
                        question,
                        request,
                        when.strftime("%Y-%m-%d %H:%M"),
                        tuple(h.memory.text for h in found[:LIVED_K]),
                    )
                )
    return out, knowledge_at(run, at)


def embedded(embedder, texts: list[str], known: dict) -> dict:
    """`known` (text -> vector) with `texts` added, those it lacked embedded in one batch."""
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
        known.update(zip(missing, embedder.embed(missing)))
    return known


def _name(run) -> str:
    import json

    return json.dumps(run.manifest.embedder, sort_keys=True)


def settle(asked: list[Asked], answers, knowledge: dict[str, Knowledge], brain_name: dict[str, str]) -> None:
    """Put each answer in its place and its row (the JSONL line): the answer, the memories it
    drew on, and the checks that need no judge."""
    errors = {f.index: f.error for f in fallbacks_of(answers)}
    for i, (a, answer) in enumerate(zip(asked, answers)):
        a.answer, a.fallback = answer, errors.get(i)
        known = knowledge[a.subject.name]
        scenario = a.subject.run.scenario
        texts = {mid: text for mid, _, text in a.request.memories}
        row = {
            "run": a.subject.name,
            "condition": a.subject.condition,
            "group": a.subject.group,
            "agent": a.request.agent,
            "name": a.request.name,
            "time": a.time,
            "question_id": a.question.id,
            "category": a.question.category,
            "question": a.question.text,
            "answer": answer.text,
            "memories": [{"id": m, "text": texts[m]} for m in dict.fromkeys(answer.cites) if m in texts],
            "brain": brain_name[a.subject.name],
            "strangers": strangers(answer.text, a.request.agent, scenario, known),
        }
        if a.question.fact:
            knew = known.knew(a.request.agent, a.question.fact)
            row.update(
                fact=a.question.fact, knew=knew, agrees=claims_to_know(answer.text, a.question.fact, scenario) == knew
            )
        if a.fallback:
            row["fallback"] = a.fallback
        a.row = row
