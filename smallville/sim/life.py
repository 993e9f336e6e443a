"""What an agent does with its time: perceive -> store -> reflect -> plan -> act.

Each function here is a SimPy generator run inside an agent's process (`yield from`);
`sim` is the `Simulation` that owns the clock, the world, the brain and the log. Every
wait that lets simulated time pass goes through `sim.wait`, which records in the agent's
`Doing` what the agent is in the middle of and what follows; `carry_on` finishes that for
an agent restored from a checkpoint, as its own process would have.
"""

from __future__ import annotations

import simpy

from smallville import events
from smallville.brain import requests as rq
from smallville.brain.dayplan import hourly
from smallville.brain.text import mentions_sleep
from smallville.sim.agent import Action, Agent, Doing, Phase, PlanBlock
from smallville.sim.recall import cleaned, dated, noticed, recall, since
from smallville.world.grid import in_area, room_open_to

KNOWN_INSIGHTS = 20  # the agent's latest insights a reflection is shown, so it gives new ones


def live(sim, agent: Agent, restored: bool = False):
    """The agent's whole life: plan each day, then act it out block by block."""
    if restored:
        yield from carry_on(sim, agent)
    while True:
        now = sim.env.now
        if not agent.plan or now >= agent.plan[-1].end:
            yield from plan_day(sim, agent, agent.plan_day + 1 if agent.plan else sim.day_of(now))
            if not agent.plan:
                yield from idle(sim, agent, now + 3600)
                continue
        block = agent.block_at(now)
        if block is None:
            nxt = agent.next_block(now)
            yield from idle(sim, agent, nxt.start if nxt else agent.plan[-1].end)
            continue
        if block is not agent.block:
            agent.block = block
            agent.queue.clear()
        if block.where and not in_area(
            sim.world.area_of(agent.id), sim.place_of(block.where) if agent.queue else block.where
        ):
            if (yield from walk(sim, agent, sim.pick_tile(agent, block.where))):  # actions choose their rooms
                continue
        if block.sleep:
            yield from sleep(sim, agent, block)
            continue
        if not agent.queue:
            yield from decompose(sim, agent, block)
            if not agent.queue:
                yield from idle(sim, agent, block.end)
                continue
        action = agent.queue.popleft()
        if action.end > sim.env.now:
            yield from act(sim, agent, action)


# ---- plan ---------------------------------------------------------------------------


def describe(sim, agent: Agent):
    """The agent summary description, from what three queries retrieve (who the agent is,
    what it does these days, how it feels about its progress), after the agent's fixed
    identity line (name, age, traits, what occupies them: the model's paraphrase cannot
    lose it), given the day's plan once made (`agent.yesterday` holds it until the next
    day's); kept in `agent.summary` for the prompts of planning, reacting and talking
    until the next refresh (each day's plan, each reflection)."""
    name = agent.name
    queries = (
        f"{name}'s core characteristics",
        f"{name}'s current daily occupation",
        f"{name}'s feeling about their recent progress in life",
    )
    yield sim.recalling(agent, queries)
    core, occupation, progress = (recall(sim, agent, q, sim.config.retrieve_k) for q in queries)
    answer = yield sim.ask(
        agent,
        rq.Summarize(
            agent.id,
            name,
            agent.background(),
            core,
            occupation,
            progress,
            sim.moment(),
            agent.identity(),
            agent.yesterday,
        ),
    )
    agent.summary = " ".join([agent.identity(), *answer.parts()])


def plan_day(sim, agent: Agent, day: int):
    """Plan the day: broad strokes from the agent's summary and yesterday, refined to hourly
    blocks (5-15 minute actions come block by block, `decompose`); remember the plan, then
    write the day's summary, which knows it. The plan is made from the summary the agent
    holds (the paper's order); one is written first for a run's first plan."""
    date = sim.date_text(day)
    routine = routine_of(agent)
    if not agent.summary:
        yield from describe(sim, agent)
    midnight = sim.midnight(day)
    if sim.config.planning:
        query = f"{agent.name}'s plans for {date}"
        yield sim.recalling(agent, [query])
        memories = recall(sim, agent, query, sim.config.plan_k)
        plan = yield sim.ask(
            agent,
            rq.PlanDay(
                agent.id,
                agent.name,
                agent.summary,
                date,
                routine,
                memories,
                agent.known_places(),
                agent.yesterday,
                asked=max(0, int((sim.env.now - midnight) // 60)),
            ),
        )
    else:
        plan = routine_plan(routine)
    req = sim.asked(agent) if sim.config.planning else None
    agent.plan = plan_blocks(sim, midnight, plan.blocks)
    agent.plan_day = day
    agent.block = None
    expect_blocks(sim, agent)
    sim.emit(
        events.PLAN,
        agent.id,
        date=date,
        blocks=[[sim.clock(b.start), sim.clock(b.end), b.activity, b.where] for b in agent.plan],
        req=req,
    )
    summary = f"{agent.name}'s plan for {date}: " + "; ".join(plan.broad or broad_strokes(sim, agent.plan))
    agent.day_before, agent.yesterday = agent.yesterday, summary
    yield from remember(sim, agent, [summary], "plan", reqs=[req])
    yield from describe(sim, agent)


def replan(sim, agent: Agent, reason: str):
    """A reaction: the plan from now to the end of the day made again (the paper's whole-plan
    regeneration), what is done so far kept. Without planning, only the block's rest."""
    agent.reason = reason
    agent.queue.clear()
    if not sim.config.planning:
        return
    now, day0 = sim.env.now, sim.midnight(agent.plan_day)
    minute = int((now - day0) // 60)
    rest = tuple(
        (int((b.start - day0) // 60), int((b.end - day0) // 60), b.activity, b.where) for b in agent.plan if b.end > now
    )
    yield sim.recalling(agent, [reason])
    memories = recall(sim, agent, reason, sim.config.plan_k)
    routine = routine_of(agent)
    plan = yield sim.ask(
        agent,
        rq.PlanDay(
            agent.id,
            agent.name,
            agent.summary,
            sim.date_text(agent.plan_day),
            routine,
            memories,
            agent.known_places(),
            agent.day_before,
            minute,
            reason,
            rest,
            minute,
        ),
    )
    done = [b if b.end <= now else b._replace(end=now) for b in agent.plan if b.start < now]
    new = [b._replace(start=max(now, b.start)) for b in plan_blocks(sim, day0, plan.blocks) if b.end > now]
    agent.plan = [b for b in done if b.end > b.start] + new
    agent.block = None
    expect_blocks(sim, agent)


def expect_blocks(sim, agent: Agent) -> None:
    """The queries the plan's blocks to come will be broken into actions with (`decompose`
    recalls by a block's activity), embedded ahead of the hours they start."""
    if sim.config.planning:
        now = sim.env.now
        sim.expect(agent, list(dict.fromkeys(b.activity for b in agent.plan if b.end > now and not b.sleep)))


def plan_blocks(sim, midnight: float, blocks) -> list[PlanBlock]:
    """A plan's blocks as the engine keeps them, in seconds from `midnight` of its day: a
    block of several hours (a model may merge hours of one activity in one place) is cut
    into hours, so each is broken into actions an hour at a time; sleep stays whole."""
    out = []
    for block in blocks:
        where = sim.known_area(block.where)
        pieces = [block] if block.sleep else hourly(block.start, block.end, block.activity, block.where)
        out += [
            PlanBlock(midnight + b.start * 60, midnight + b.end * 60, b.activity, where, block.sleep) for b in pieces
        ]
    return out


def broad_strokes(sim, plan: list[PlanBlock]) -> list[str]:
    """A plan's runs of one activity, each with its start: the plan in brief."""
    broad: list[str] = []
    last = None
    for b in plan:
        if b.activity != last:
            broad.append(f"{sim.clock(b.start)} {b.activity}")
            last = b.activity
    return broad


def routine_of(agent: Agent) -> tuple[tuple[int, str, str], ...]:
    """The agent's routine as requests carry it: (minute of day, what, where)."""
    return tuple((r.at, r.do, r.where or "") for r in agent.spec.routine)


def routine_plan(routine) -> rq.DayPlan:
    """The day as the routine has it, one block per step, with no brain (planning switched off)."""
    steps = sorted(routine) or [(7 * 60, "waking up", ""), (23 * 60, "going to bed and sleeping", "")]
    ends = [at for at, _, _ in steps[1:]] + [steps[0][0] + 24 * 60]
    return rq.DayPlan(
        tuple(
            rq.Block(at, end, what, where, mentions_sleep(what))
            for (at, what, where), end in zip(steps, ends)
            if end > at
        )
    )


def decompose(sim, agent: Agent, block: PlanBlock):
    """Break what is left of the current block into 5-15 minute actions."""
    now = sim.env.now
    if not sim.config.planning:  # one action for the rest of the block
        agent.reason = ""
        agent.queue.clear()
        agent.queue.append(Action(now, block.end, block.activity, None))
        return
    reason, agent.reason = agent.reason, ""
    area = sim.world.area_of(agent.id)
    objects = tuple(t.name for t in sim.world.objects_in(area))
    elsewhere = other_rooms(sim, agent, block.where or area, area)
    yield sim.recalling(agent, [block.activity])
    memories = recall(sim, agent, block.activity, sim.config.retrieve_k)
    day0 = sim.midnight(agent.plan_day)

    def minutes(b: PlanBlock) -> tuple[int, int, str]:
        return int((b.start - day0) // 60), int((b.end - day0) // 60), b.activity

    i = agent.plan.index(block)
    answer = yield sim.ask(
        agent,
        rq.Decompose(
            agent.id,
            agent.name,
            block.activity,
            block.where or area,
            int((now - day0) // 60),
            int((block.end - day0) // 60),
            objects,
            memories,
            reason,
            tuple(elsewhere),
            agent.identity(),
            sim.moment(),
            tuple(minutes(b) for b in agent.plan[max(0, i - 1) : i]),
            tuple(minutes(b) for b in agent.plan[i + 1 : i + 2]),
        ),
    )
    req = sim.asked(agent)
    agent.queue.clear()
    t = now
    for step in answer.steps:
        end = min(t + step.minutes * 60, block.end)
        room, thing = elsewhere.get(step.object, (area, step.object))
        agent.queue.append(Action(t, end, step.description, thing, room, req))
        t = end
        if t >= block.end:
            break
    if reason:
        sim.count("replans")
        sim.emit(
            events.REPLAN,
            agent.id,
            reason=reason,
            actions=[[sim.clock(a.start), a.description] for a in agent.queue],
            req=req,
        )
    if agent.queue:
        steps = "; ".join(f"{sim.clock(a.start)} {a.description}" for a in agent.queue)
        yield from remember(
            sim, agent, [f"{agent.name}'s plan until {sim.clock(block.end)}: {steps}"], "plan", reqs=[req]
        )


def other_rooms(sim, agent: Agent, where: str, here: str) -> dict[str, tuple[str, str]]:
    """The objects of the other rooms of `where`'s place that are open to the agent (not
    someone else's room), each as the brain is offered it ("bed (Eddy Lin's bedroom)")
    with its room and name: an action that uses one goes to that room."""
    offered: dict[str, tuple[str, str]] = {}
    for thing in sim.world.objects_within(sim.place_of(where)):
        if thing.area != here and room_open_to(thing.area, agent.name):
            offered.setdefault(rq.object_label(thing.name, thing.area.rsplit(" / ", 1)[-1]), (thing.area, thing.name))
    return offered


# ---- act ----------------------------------------------------------------------------


def act(sim, agent: Agent, action: Action):
    """Do one action: go to its object (if it is free), or to its room if it has none,
    perceive, maybe react, then wait it out."""
    agent.action = action
    area = sim.world.area_of(agent.id)
    thing = sim.world.find_object(action.area or area, action.object)
    if thing is not None and thing.user is None:
        yield from walk(sim, agent, thing.tile, then="use", thing=sim.world.things.index(thing))
        yield from use(sim, agent, thing)
        return
    if action.object is None and action.area and action.area != area:  # back to the block's room
        yield from walk(sim, agent, sim.pick_tile(agent, action.area), then="use")
    yield from use(sim, agent, None)


def use(sim, agent: Agent, thing):
    """The action itself, with the object walked to (if any, and still free)."""
    action = agent.action
    if sim.env.now >= action.end:  # the walk took the whole action: a look around on arrival
        yield from perceive(sim, agent)
        return
    if thing is not None:
        if thing.user is None:  # nobody took it while we walked over
            thing.user, thing.state = agent.id, f"in use by {agent.name}"
            agent.holding = sim.world.things.index(thing)
            sim.emit(events.OBJECT, agent.id, object=thing.name, area=thing.area, state=thing.state)
        else:
            thing = None
    agent.become(Phase.ACTING, action.description)
    sim.count("actions")
    sim.emit(
        events.ACTION,
        agent.id,
        action=action.description,
        area=sim.world.area_of(agent.id),
        object=thing.name if thing else None,
        until=sim.clock(action.end),
        req=action.req,
    )
    yield from attend(sim, agent)
    put_down(sim, agent)


def attend(sim, agent: Agent):
    """Perceive (and maybe react) now and every few minutes until the action ends, so that
    who walks in mid-action is noticed; stop when a reaction takes the agent away."""
    while True:
        if (yield from perceive(sim, agent)) or sim.env.now >= agent.action.end:
            return
        until = min(agent.action.end, sim.env.now + sim.config.perceive_every)
        if (yield from wait_free(sim, agent, until, then="attend")):
            return


def put_down(sim, agent: Agent) -> None:
    """Leave the object in use (if any) as it was found."""
    if agent.holding is not None:
        thing = sim.world.things[agent.holding]
        agent.holding = None
        thing.user, thing.state = None, thing.idle_state
        sim.emit(events.OBJECT, agent.id, object=thing.name, area=thing.area, state=thing.state)


def wait_free(sim, agent: Agent, until: float, order: int | None = None, then: str = "live"):
    """Wait until `until`, open to being drawn into a conversation; returns True if one came.
    `then` is what follows: "attend" (the action goes on) or "live"."""
    agent.free_to_talk = True
    try:
        yield sim.wait(agent, Doing(Phase.WAITING, max(sim.env.now, sim.align(until)), then=then), order)
    except simpy.Interrupt as stop:
        agent.free_to_talk = False
        yield from listen(sim, agent, stop.cause)
        return True
    agent.free_to_talk = False
    return False


def listen(sim, agent: Agent, talk):
    """Be drawn into the conversation `talk` until it ends."""
    agent.doing = Doing(Phase.LISTENING, talk=talk.id)
    yield talk.done
    agent.queue.clear()


def idle(sim, agent: Agent, until: float):
    agent.become(Phase.IDLE, "idling")
    yield from wait_free(sim, agent, until)


def walk(sim, agent: Agent, tile, then: str = "live", thing: int | None = None, where: str = "") -> bool:
    """Walk to a tile: n tiles take n x tile_time, arriving on the tick grid.
    Returns whether the agent moved. `then`, `thing` and `where` say what follows."""
    here = sim.world.position(agent.id)
    path = sim.world.grid.path(here, tile)
    if not path or len(path) < 2:
        return False
    arrive = sim.align(sim.env.now + (len(path) - 1) * sim.world.tile_time)
    destination = sim.world.grid.area_at(tile)
    agent.become(Phase.WALKING, f"walking to {destination}")
    sim.emit(
        events.MOVE,
        agent.id,
        from_=list(here),
        to=list(tile),
        area=destination,
        tiles=len(path) - 1,
        arrive=sim.clock(arrive),
    )
    yield sim.wait(agent, Doing(Phase.WALKING, arrive, tile=tuple(tile), then=then, thing=thing, where=where))
    arrived(sim, agent)
    return True


def arrived(sim, agent: Agent) -> None:
    sim.world.place(agent.id, agent.doing.tile)
    agent.places.add(sim.place_of(sim.world.area_of(agent.id)))  # a place it has seen
    agent.become(Phase.IDLE)


def sleep(sim, agent: Agent, block: PlanBlock):
    """Go to bed and sleep through the block: one event, no work while asleep. The bed is
    one in the room the block names, or, for a block at a whole place (or anywhere), in the
    room the agent is in or another of the place open to it."""
    area = sim.world.area_of(agent.id)
    rooms = (
        [area]
        if " / " in block.where
        else [area]
        + [
            r
            for r in sim.world.grid.arenas_in(sim.place_of(block.where or area))
            if r != area and room_open_to(r, agent.name)
        ]
    )
    bed = next((t for r in rooms for t in sim.world.objects_in(r) if "bed" in t.name and t.user is None), None)
    if bed is not None:
        area = bed.area
        yield from walk(sim, agent, bed.tile, then="sleep", thing=sim.world.things.index(bed), where=area)
    yield from fall_asleep(sim, agent, block, bed, area)


def fall_asleep(sim, agent: Agent, block: PlanBlock, bed, area: str):
    if bed is not None:
        bed.user, bed.state = agent.id, f"in use by {agent.name}"
        agent.holding = sim.world.things.index(bed)
    agent.become(Phase.SLEEPING, "sleeping")
    sim.emit(events.SLEEP, agent.id, area=area, until=sim.clock(block.end))
    yield from sim.memory.at_sleep(sim, agent)  # the salience model's night reflection
    agent.seen.clear()
    yield sim.wait(agent, Doing(Phase.SLEEPING, max(sim.env.now, sim.align(block.end)), where=area))
    wake_up(sim, agent, area)


def wake_up(sim, agent: Agent, area: str) -> None:
    if agent.holding is not None:  # the bed: no event, as for going to bed
        bed = sim.world.things[agent.holding]
        agent.holding = None
        bed.user, bed.state = None, bed.idle_state
    agent.become(Phase.IDLE, "waking up")
    sim.emit(events.WAKE, agent.id, area=area)


def carry_on(sim, agent: Agent):
    """Finish what a restored agent was in the middle of (`agent.doing`), exactly as its
    own process would have, up to where that process would loop back in `live`."""
    doing = agent.doing
    if doing.phase == Phase.WAITING:
        if (
            not (yield from wait_free(sim, agent, doing.until, order=doing.order, then=doing.then))
            and doing.then == "attend"
        ):
            yield from attend(sim, agent)
        put_down(sim, agent)
    elif doing.phase == Phase.LISTENING:
        yield from listen(sim, agent, sim.conversations[doing.talk])
        put_down(sim, agent)
    elif doing.phase == Phase.TALKING:
        yield sim.wait(agent, doing, doing.order)
        yield from talk_on(sim, sim.conversations[doing.talk])
        put_down(sim, agent)
    elif doing.phase == Phase.WALKING:
        yield sim.wait(agent, doing, doing.order)
        arrived(sim, agent)
        thing = sim.world.things[doing.thing] if doing.thing is not None else None
        if doing.then == "use":
            yield from use(sim, agent, thing)
        elif doing.then == "sleep":
            yield from fall_asleep(sim, agent, agent.block, thing, doing.where)
    elif doing.phase == Phase.SLEEPING:
        yield sim.wait(agent, doing, doing.order)
        wake_up(sim, agent, doing.where)
    else:
        raise ValueError(f"agent {agent.id} was restored doing {doing.phase!r}, which this version cannot go on with")


# ---- perceive, store, reflect -------------------------------------------------------


def perceive(sim, agent: Agent):
    """See who and what is near, and oneself; remember what changed; react to what is new.
    Returns True when the reaction took the agent away from its action."""
    seen: list[tuple[str, str]] = [(agent.id, f"{agent.name} is {agent.activity}")]
    people = sim.world.agents_near(agent.id)
    for other in people:
        seen.append((other, f"{sim.agents[other].name} is {sim.agents[other].activity}"))
    for thing in sim.world.objects_near(agent.id):
        seen.append((f"{thing.area}:{thing.name}", f"{thing.name} is {thing.state}"))
    new = [(key, text) for key, text in seen if agent.seen.get(key) != text]
    agent.seen.update(new)
    alerts, agent.alerts = agent.alerts, []
    new_keys = {key for key, _ in new}
    observations = alerts + [text for key, text in new if key != agent.id]

    def free_now() -> list[str]:
        return [o for o in people if o in new_keys and sim.can_talk(agent, sim.agents[o])]

    free = free_now()  # a reaction is likely: its queries embedded with what is seen
    sim.expect(agent, react_queries(sim, agent, observations, free) if free or alerts else (), [t for _, t in new])
    if new:
        yield from remember(sim, agent, [text for _, text in new], "observation")
    yield from reflect(sim, agent)
    free = free_now()
    if not free and not alerts:
        return False
    reaction = yield from react(sim, agent, observations, free)
    req = sim.asked(agent)
    if reaction.action == "talk" and reaction.target in free and sim.can_talk(agent, sim.agents[reaction.target]):
        yield from converse(sim, agent, sim.agents[reaction.target], req)
        return True
    if reaction.action == "wait":  # a wait, then the rest of the action
        action = agent.action
        until = min(action.end, sim.align(sim.env.now + reaction.minutes * 60))
        rest = (
            [Action(until, action.end, action.description, action.object, req=action.req)] if until < action.end else []
        )
        agent.queue.extendleft(
            rest
            + [
                Action(
                    sim.env.now, until, f"waiting ({reaction.reason})" if reaction.reason else "waiting", None, req=req
                )
            ]
        )
        return True
    if reaction.action == "replan" and agent.block is not None:
        yield from replan(sim, agent, reaction.reason or "something happened")
        return True
    return False


def react(sim, agent: Agent, observations: list[str], free: list[str]):
    """Ask what to do about what was observed, with the paper's context: the agent's summary,
    the time, what it is doing, and what it remembers of whom (or what) it observed and of
    what they are doing (two queries)."""
    queries = react_queries(sim, agent, observations, free)
    yield sim.recalling(agent, queries)
    about, doing = (recall(sim, agent, q, sim.config.react_k) for q in queries)
    return (
        yield sim.ask(
            agent,
            rq.React(
                agent.id,
                agent.name,
                agent.activity,
                tuple(noticed(sim, agent, observations)),
                tuple(
                    (o, sim.agents[o].name, sim.agents[o].activity, last_talk(sim, agent, o) or "never talked")
                    for o in free
                ),
                tuple(sorted((o, agent.relationships[o]) for o in free if o in agent.relationships)),
                about,
                agent.summary,
                sim.moment(),
                tuple(m for m in doing if m not in about),
                sim.world.area_of(agent.id),
            ),
        )
    )


def react_queries(sim, agent: Agent, observations: list[str], free: list[str]) -> tuple[str, str]:
    """A reaction's two queries: the agent's relationship with whom it could talk to (or
    with what it observed first), and what it observed."""
    focus = [sim.agents[o].name for o in free] or observations[:1]
    return f"{agent.name}'s relationship with " + ", ".join(focus), " ".join(observations[:3])


def last_talk(sim, agent: Agent, other: str) -> str:
    """The agent's last conversation with `other`, dated ("yesterday 18:30: Ann talked with
    Bob about the fair"), or "" if they never talked."""
    if other not in agent.last_talk:
        return ""
    return f"{since(sim, agent.last_talk[other])}: {agent.talked.get(other) or 'they talked'}"


def remember(
    sim,
    agent: Agent,
    texts: list[str],
    kind,
    importances=None,
    links=None,
    created=None,
    said=None,
    rated_as=None,
    reqs=None,
):
    """Store memories, asking the brain to rate those without an importance (all of them
    in one request). `kind` is the memories' kind, or a list of one per text; `links`,
    `created` (creation times) and `said` (for chat lines: who said what to whom) give one
    entry per text; so does `rated_as`: the index of another text whose rating a text takes
    (a conversation's lines take its summary's), or None; and `reqs`: the request each text
    is the answer of (a plan, a thought, an insight), or None."""
    importances = list(importances) if importances is not None else [None] * len(texts)
    kinds = [kind] * len(texts) if isinstance(kind, str) else kind
    borrowed = rated_as or [None] * len(texts)
    unrated = [i for i, (imp, other) in enumerate(zip(importances, borrowed)) if imp is None and other is None]
    if unrated:
        ratings = sim.memory.local_ratings(sim, agent, tuple(texts[i] for i in unrated))  # a keyword tagger
        if ratings is None:
            sim.expect(agent, stored=texts)  # embedded while the rating is asked for
            answer = yield sim.ask(
                agent, sim.memory.rating_request(agent, tuple(texts[i] for i in unrated), [kinds[i] for i in unrated])
            )
            ratings = sim.memory.ratings(answer)
        for i, rating in zip(unrated, ratings):
            importances[i] = rating
    importances = [
        imp if imp is not None or other is None else importances[other] for imp, other in zip(importances, borrowed)
    ]
    for i, (text, importance) in enumerate(zip(texts, importances)):
        sim.store(
            agent,
            text,
            kinds[i],
            importance,
            links[i] if links else (),
            created[i] if created else None,
            said[i] if said else None,
            reqs[i] if reqs else None,
        )


def reflect(sim, agent: Agent):
    """When the perceived events since the last reflection add up to the threshold (the memory
    model says when: `reflect_due`), ask three questions of the latest memories and store at
    most five insights for each, linked to the evidence they cite (insights may rest on
    earlier insights; one the agent already holds is not stored again); then the agent's
    summary is written again."""
    if not sim.memory.reflect_due(sim, agent):
        return
    trigger, agent.since_reflection, agent.since_count = agent.since_reflection, 0.0, 0
    n = len(agent.stream)
    newest_first = [agent.stream[i] for i in reversed(range(max(0, n - sim.config.reflection_window), n))]
    recent = cleaned(sim, agent, newest_first)[::-1]  # a repeated sight kept at its latest
    questions = yield sim.ask(
        agent, rq.ReflectQuestions(agent.id, agent.name, dated(sim, recent), sim.config.reflection_questions)
    )
    req = sim.asked(agent)
    asked = questions.questions[: sim.config.reflection_questions]
    held = [t for t, kind in zip(agent.stream.texts(), agent.stream.kinds()) if kind == "reflection"]
    known = tuple(dict.fromkeys(reversed(held)))[:KNOWN_INSIGHTS][::-1]
    asks, evidence, numbers = [], [], []
    yield sim.recalling(agent, asked)
    for q in asked:  # each question's evidence retrieved just before its request, which records it
        ev = cleaned(sim, agent, [h.memory for h in sim.retrieve(agent, q, sim.config.evidence_k)])
        asks.append(sim.ask(agent, rq.Insights(agent.id, agent.name, q, dated(sim, ev), known)))
        evidence.append(ev)
        numbers.append(sim.asked(agent))
    answers = yield sim.env.all_of(asks)
    texts, links, reqs, have = [], [], [], set(held)
    each = sim.config.memory.reflection.insights_per_question
    for ask, ev, number in zip(asks, evidence, numbers):
        for insight in answers[ask].insights[:each]:
            cited = tuple(sorted({ev[i].id for i in insight.because if 0 <= i < len(ev)}))
            if cited and sim.memory.too_deep(agent.stream, cited):
                continue  # `reflection.max_depth`: insights on insights stop there
            if cited and insight.text not in have:  # an insight stands on its evidence, and is new
                have.add(insight.text)
                texts.append(insight.text)
                links.append(cited)
                reqs.append(number)
    sim.emit(events.REFLECT, agent.id, importance=trigger, questions=list(asked), req=req)
    yield from remember(sim, agent, texts, "reflection", links=links, reqs=reqs)
    yield from describe(sim, agent)


# ---- talk ---------------------------------------------------------------------------


def converse(sim, a: Agent, b: Agent, req: int | None = None):
    """A conversation of alternating lines, one a tick; both remember every line. `req`: the
    request (a reaction) whose answer began it."""
    talk = sim.begin_talk(a, b)
    a.free_to_talk = b.free_to_talk = False
    b.process.interrupt(talk)
    for x, y in ((a, b), (b, a)):
        x.become(Phase.TALKING, f"talking with {y.name}")
    sim.emit(events.TALK_START, a.id, with_=b.id, area=sim.world.area_of(a.id), req=req)
    yield from talk_on(sim, talk)


def talk_on(sim, talk):
    """The conversation's turns from where it stands, then its end: a speaker says goodbye,
    repeats a line, or the turns run out."""
    a, b = sim.agents[talk.a], sim.agents[talk.b]
    history = talk.lines
    while talk.ending is None and talk.turn < sim.config.max_turns:
        speaker, listener = (a, b) if talk.turn % 2 == 0 else (b, a)
        recalled = []
        if sim.config.sharing:
            queries = talk_queries(speaker, listener, history)
            yield sim.recalling(speaker, queries)
            recalled = talk_memories(sim, speaker, queries)
        doing = talk.doing if speaker is a else talk.doing[::-1]
        line = yield sim.ask(
            speaker,
            rq.Speak(
                speaker.id,
                speaker.name,
                listener.id,
                listener.name,
                speaker.relationships.get(listener.id, ""),
                tuple(history),
                tuple(recalled),
                tuple(speaker.earlier_lines.get(listener.id, ())[-sim.config.earlier_lines :]),
                speaker.summary,
                sim.moment(),
                sim.world.area_of(speaker.id),
                *doing,
                last_talk(sim, speaker, listener.id),
            ),
        )
        repeated = any(_same_line(line.text, said) for _, said in history)
        history.append((speaker.name, line.text))
        sim.emit(events.SAY, speaker.id, to=listener.id, text=line.text, req=sim.asked(speaker))
        if line.topic:  # what others see of the talk
            for x, y in ((a, b), (b, a)):
                x.activity = f"talking with {y.name} about {line.topic}"
        talk.turn += 1
        talk.ending = "goodbye" if line.end else "repeat" if repeated else None
        if talk.ending is None and talk.turn < sim.config.max_turns and sim.config.sharing:
            sim.expect(listener, talk_queries(listener, speaker, history))  # the next line's, a tick ahead
        yield sim.wait(a, Doing(Phase.TALKING, sim.env.now + sim.tick, talk=talk.id))
    reason = talk.ending or "turn_limit"
    said = [events.Said(*((a.id, b.id) if name == a.name else (b.id, a.id)), text) for name, text in history]
    yield sim.env.all_of([sim.env.process(look_back(sim, x, y, history, said)) for x, y in ((a, b), (b, a))])
    sim.count("conversations")
    sim.emit(events.TALK_END, a.id, with_=b.id, lines=len(history), reason=reason)
    sim.end_talk(talk)


def talk_queries(speaker: Agent, listener: Agent, history: list) -> list[str]:
    """What the speaker recalls by for its next line, the paper's focal points: its view of
    the listener, what the listener is doing and the last four lines."""
    view = speaker.relationships.get(listener.id, "")
    queries = [f"{listener.name}, {view}" if view else listener.name, f"{listener.name} is {listener.activity}"]
    if history:
        queries.append("\n".join(f"{name}: {line}" for name, line in history[-4:]))
    return queries


def talk_memories(sim, speaker: Agent, queries: list[str]) -> list[tuple[str, str, int, str]]:
    """What the speaker recalls for its next line (`talk_queries`): `talk_k` memories for
    each query, in that order, cleaned (`recall.cleaned`: each text once), as (when, text,
    importance, kind)."""
    hits = [h.memory for found in sim.retrieve_many(speaker, queries, sim.config.talk_k) for h in found]
    kept = cleaned(sim, speaker, hits)
    return [(when, m.text, m.importance, m.kind) for (when, _), m in zip(dated(sim, kept), kept)]


def look_back(sim, x: Agent, y: Agent, history: list, said: list):
    """One side of a conversation that is over: its lines, a summary, a planning thought
    and a memo remembered (rated in one request), and the view of the other written again
    from memory."""
    yield sim.recalling(x, [y.name])
    recalled = recall(sim, x, y.name, sim.config.talk_k)
    notes = yield sim.ask(
        x,
        rq.AfterTalk(
            x.id,
            x.name,
            y.id,
            y.name,
            x.relationships.get(y.id, ""),
            tuple(history),
            recalled,
            sim.moment(),
            sim.world.area_of(x.id),
        ),
    )
    req = sim.asked(x)
    lines = [f"{sim.agents[s.speaker].name} said to {sim.agents[s.listener].name}: {s.line}" for s in said]
    kept = [(notes.summary, "conversation"), (notes.thought, "thought"), (notes.memo, "thought")]
    kept = [(text.strip(), kind) for text, kind in kept if text.strip()]
    whole = sim.memory.talks_rated_whole and kept and kept[0][1] == "conversation"
    rated_as = [len(lines) if whole else None] * len(lines)  # the talk rated once, from its summary
    yield from remember(
        sim,
        x,
        lines + [t for t, _ in kept],
        ["chat"] * len(lines) + [k for _, k in kept],
        said=said + [None] * len(kept),
        rated_as=rated_as + [None] * len(kept),
        reqs=[None] * len(lines) + [req] * len(kept),
    )
    x.last_talk[y.id] = sim.env.now
    x.talked[y.id] = notes.summary.strip() or (
        f"they talked about {notes.topic.strip()}" if notes.topic.strip() else ""
    )
    x.talks[y.id] = x.talks.get(y.id, 0) + 1
    x.earlier_lines.setdefault(y.id, []).extend(text for _, text in history)
    x.relationships[y.id] = notes.view.strip() or x.relationships.get(y.id) or f"someone {x.name} has talked with"
    sim.emit(events.RELATIONSHIP, x.id, with_=y.id, talks=x.talks[y.id], view=x.relationships[y.id])
    # both go on from a new breakdown of their block, which responds to what was said and agreed
    x.reason = " ".join(
        [f"{x.name} has just talked with {y.name}."] + [t if t.endswith((".", "!", "?")) else t + "." for t, _ in kept]
    )
    x.queue.clear()
    x.become(Phase.IDLE)


def _same_line(a: str, b: str) -> bool:
    """Whether two lines say the same (case, spacing and punctuation aside): a model that
    repeats itself ends the conversation rather than spending requests on it."""

    def norm(text: str) -> str:
        return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())

    return norm(a) == norm(b)
