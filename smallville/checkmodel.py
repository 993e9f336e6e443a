"""`smallville check-model`: every kind of request tried once on a model, before a paid run.

A real moment of a town: the scenario is simulated offline until it has asked each kind of
request it asks (the first of each kind is kept: a whole day's plan, the seed memories'
ratings, a first conversation, a first reflection), and an interview and a judge's
comparison are built from the state then. Each goes to the model once, as a run sends it
(after the preflight, so in the run's structured-output mode; no retry, no fallback: the
point is to see failures), all at once, and is read as a run reads it: `valid` as sent,
`repaired` (made to fit by `repair.py`, or a slip of its text mended), or not usable:
`refused` by the server, `cut` at max_tokens, `invalid` (off its schema) or `no answer`.
A request that got no answer in time while the others were in flight is sent again alone:
a local server answering one call at a time queues them, and its row is then what the model
does alone, with a note of how many calls the server answered in time when sent together
(the `max_concurrency` to start a run at).
While the model answers, a day of the town is estimated offline (`estimate`), its
completions scaled to the sizes this model wrote: what a day would cost at these rates.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field

from smallville.brain import requests as rq
from smallville.brain.base import Brain, Failed, Wrapper, override
from smallville.brain.kinds import REQUEST_KINDS, repaired

USABLE = ("valid", "repaired")
DAY = 24 * 3600.0
HORIZON = 2 * DAY  # the offline town's time to ask every kind it asks


@dataclass
class Row:
    """One kind's request and how the model answered it."""

    kind: str
    result: str  # valid, repaired, refused, cut, invalid, no answer
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    max_tokens: int
    seconds: float
    note: str = ""  # what was repaired, or the error
    mend: str = ""  # for a kind not usable: the setting that mends it
    model: str = ""  # the model that answered it

    @property
    def usable(self) -> bool:
        return self.result in USABLE


@dataclass
class Check:
    model: str
    scenario: str
    agents: int
    structured: str  # the mode the requests went in (the preflight's choice)
    rows: list[Row]
    day: dict | None  # a day of the town at this model's rates (None: not estimated)
    notes: list[str] = field(default_factory=list)  # what the preflight found and said
    missing: list[str] = field(default_factory=list)  # kinds the town did not ask within HORIZON
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(row.usable for row in self.rows)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "scenario": self.scenario,
            "agents": self.agents,
            "ok": self.ok,
            "structured": self.structured,
            "notes": self.notes,
            "kinds": [asdict(r) for r in self.rows],
            "missing": self.missing,
            "day": self.day,
            "seconds": round(self.seconds, 1),
        }


def check_model(
    scenario,
    settings,
    *,
    seed: int | None = None,
    embedder: str = "use",
    said: Callable[[str], None] = lambda line: None,
) -> Check:
    """Try every request kind of `scenario` once on the model of `settings` (an `LLMConfig`),
    or on each kind's own model; every model used is checked (the preflight of each). `said`
    hears each step as it happens: a small local model may take minutes a kind."""
    from smallville.brain.bykind import model_brain, notes_of
    from smallville.brain.ledger import Ledger
    from smallville.estimate import estimate

    began = time.perf_counter()
    seed = scenario.seed if seed is None else seed
    brain = model_brain(settings, Ledger())
    try:
        said(f"{settings.label}: checking the server and how it answers")
        brain.preflight()
        notes = notes_of(brain.describe())
        said(f"{scenario.name}: finding a request of each kind (offline)")
        asked, missing = moment(scenario, seed, embedder)
        said(f"sending {len(asked)} requests, one of each kind, at once")
        with ThreadPoolExecutor(max(1, len(asked)), thread_name_prefix="smallville-check") as pool:
            sent = {pool.submit(brain.attempt, request): request.kind for request, _ in asked}
            day = estimate(scenario, brain.config, duration=DAY, seed=seed, embedder=embedder)  # meanwhile
            for done in as_completed(sent):
                came = "no answer in time" if timed_out(done.result()) else "answered"
                said(f"  {sent[done]}: {came} after {time.perf_counter() - began:.0f} s")
            tries = [future.result() for future in sent]
        crowded = [i for i, t in enumerate(tries) if timed_out(t)] if len(tries) > 1 else []
        for i in crowded:
            said(f"  {tries[i].request.kind}: no answer in time among {len(tries)} sent at once; sending it alone")
            tries[i] = brain.attempt(tries[i].request)
        rows = [row_of(t, brain) for t in tries]
        if crowded:
            notes.append(crowding(len(tries), len(crowded), brain.brain_for(tries[crowded[0]].request.kind).config))
            for i in crowded:
                rows[i].note = "; ".join(
                    filter(None, [f"sent alone after no answer in time among {len(tries)}", rows[i].note])
                )
        return Check(
            settings.label,
            scenario.name,
            len(scenario.agents),
            brain.brain_for("").config.structured,
            rows,
            day_at_these_rates(day, tries, [a for _, a in asked], brain),
            notes,
            missing,
            time.perf_counter() - began,
        )
    finally:
        brain.close()


def moment(scenario, seed: int, embedder: str) -> tuple[list[tuple[rq.Message, rq.Message]], list[str]]:
    """The first request of each kind the town asks (simulated offline), then an interview
    and a judge's comparison from the state then; each with the offline brain's answer. And
    the kinds it did not ask within `HORIZON`."""
    from smallville.brain.offline import OfflineBrain
    from smallville.embed import make_embedder
    from smallville.sim import Simulation
    from smallville.sim.log import EventLog, Nowhere

    watch = _FirstOfEach(OfflineBrain(seed))
    with Simulation(
        scenario, watch, make_embedder(embedder), seed=seed, log=EventLog(scenario.start, Nowhere())
    ) as sim:
        wanted = {kind for kind, cls in REQUEST_KINDS.items() if cls.simulated and kind != "judge"}
        if not sim.memory.salience:
            wanted.discard("tag_memories")
        while not wanted <= watch.first.keys() and sim.env.now < HORIZON:
            sim.run(sim.env.now + 3600)
        asked = [watch.first[kind] for kind in sorted(wanted & watch.first.keys())]
        speaker = watch.first["speak"][0].agent if "speak" in watch.first else sorted(sim.agents)[0]
        asked += interview_and_judge(sim, watch.inner, speaker)
    return asked, sorted(wanted - watch.first.keys())


class _FirstOfEach(Wrapper):
    """The offline brain, keeping the first request of each kind and its answer."""

    def __init__(self, inner: Brain) -> None:
        super().__init__(inner)
        self.first: dict[str, tuple[rq.Message, rq.Message]] = {}

    @override
    def answer(self, requests):
        answers = self.inner.answer(requests)
        for request, answer in zip(requests, answers):
            self.first.setdefault(request.kind, (request, answer))
        return answers


def interview_and_judge(sim, offline, agent_id: str) -> list[tuple[rq.Message, rq.Message]]:
    """A question of the interview protocol put to the agent, from what it recalls; and the
    judge's comparison of that answer with one given without its memories (the paper's
    no-retrieval condition), with the memories it lived."""
    from smallville.evaluate.interviews import RECALL_K
    from smallville.evaluate.protocol import load_protocol
    from smallville.mind import interview_request

    agent = sim.agents[agent_id]
    questions = load_protocol().questions_for(sim.scenario, agent_id, sim.now_datetime())
    question = next((q for q in questions if q.category == "memory"), questions[0]).text
    hits = sim.retrieve(agent, question, RECALL_K)
    asked, bare = interview_request(sim, agent, question, hits), interview_request(sim, agent, question, ())
    full, plain = offline.answer([asked, bare])
    lived = tuple(h.memory.text for h in hits)
    judge = rq.Judge(
        agent.id,
        agent.name,
        agent.persona(),
        question,
        (("A", full.text), ("B", plain.text)),
        tuple((label, text) for label in "AB" for text in lived),
    )
    return [(asked, full), (judge, offline.answer([judge])[0])]


def row_of(attempt, brain) -> Row:
    """What one attempt says about its kind."""
    reply, kind = attempt.reply, attempt.request.kind
    tokens = (
        (reply.prompt_tokens, reply.completion_tokens, reply.reasoning_tokens)
        if reply is not None
        else (brain.prompt_tokens(attempt.request), 0, 0)
    )
    row = Row(kind, "valid", *tokens, attempt.max_tokens, round(attempt.seconds, 2), model=brain.brain_for(kind).name)
    if isinstance(attempt.answer, Failed):
        row.result, row.note = outcome(attempt.answer), attempt.answer.error
        row.mend = mend(kind, attempt.answer, attempt.max_tokens, brain.brain_for(kind).config)
        return row
    notes = attempt.notes + repaired(attempt.request, attempt.answer, brain.brain_for(kind).templates[kind].canned())[1]
    if notes:
        row.result, row.note = "repaired", "; ".join(notes)
    return row


def timed_out(attempt) -> bool:
    return isinstance(attempt.answer, Failed) and attempt.answer.reason == "timeout"


def crowding(sent: int, late: int, settings) -> str:
    """What a server that answered only some of the requests sent together says of the calls
    a run should have in flight."""
    now = (
        f"the brain settings pin max_concurrency at {settings.max_concurrency}"
        if settings.max_concurrency
        else f"a run starts with {settings.concurrency_start} calls in flight and cuts them when a round times out"
    )
    return (
        f"the server answered {sent - late} of {sent} requests sent at once within the timeout "
        f"({settings.timeout:g} s), the others only alone: it answers few calls at a time; {now}: "
        f"set max_concurrency: {max(1, sent - late)} in the brain settings to keep up with it from the start"
    )


def outcome(failed: Failed) -> str:
    """A failed attempt in a word: refused, cut, invalid or no answer."""
    if failed.reason == "refused":
        return "refused"
    if failed.reason in ("schema", "bad_json"):
        return "cut" if "cut off at max_tokens" in failed.error else "invalid"
    return "no answer"


def mend(kind: str, failed: Failed, room: int, settings) -> str:
    """What is wrong with a kind's answer and the setting that mends it, in a line."""
    from smallville.brain.llm import names_format
    from smallville.brain.prompts import STRUCTURED_MODES
    from smallville.brain.wrappers import cut_setting, fix_for

    mode = settings.structured
    if names_format(failed.error) and mode != STRUCTURED_MODES[-1]:
        after = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
        return f"{mode} refused ({failed.error}): set structured: {after}"
    if outcome(failed) == "cut":
        return f"cut at max_tokens {room}: raise {cut_setting(failed, kind)}"
    if failed.reason == "timeout":
        return f"no answer within {settings.timeout:g} s, sent alone: raise timeout (a slow model or server)"
    if failed.reason in ("connection", "server", "rate_limit"):
        return f"{failed}: check the server, then try again"
    return f"{failed}: {fix_for(failed, kind)}"


def day_at_these_rates(day, tries, offline_answers, brain) -> dict:
    """The estimate of a day, its completions scaled by kind to what this model wrote (its
    completion tokens over the offline brain's for the same request, reasoning included)."""
    from smallville.brain.calls import import_litellm
    from smallville.brain.prompts import to_model_json
    from smallville.errors import BrainError

    litellm = import_litellm()
    scale = {}
    for attempt, answer in zip(tries, offline_answers):
        model = brain.brain_for(attempt.request.kind).config.base_model
        offline = litellm.token_counter(model=model, text=json.dumps(to_model_json(answer), ensure_ascii=False))
        if attempt.reply is not None and attempt.reply.completion_tokens and offline:
            scale[attempt.request.kind] = attempt.reply.completion_tokens / offline
    rows = day.to_dict()["by_kind"]
    written = {kind: round(row["completion_tokens"] * scale.get(kind, 1.0)) for kind, row in rows.items()}
    prompt, completion = sum(row["prompt_tokens"] for row in rows.values()), sum(written.values())
    try:  # each kind at its own model's price
        cost = round(sum(brain.price(row["prompt_tokens"], written[kind], kind) for kind, row in rows.items()), 4)
    except BrainError:
        cost = None
    return {
        "hours": DAY / 3600,
        "requests": sum(row["requests"] for row in rows.values()),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": cost,
    }
