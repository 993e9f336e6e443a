"""The paper's agent step by step (Park et al. 2023, sections 4-5): the summary description,
the plan hierarchy, reacting with context, what a conversation leaves behind, perceiving
oneself, the places an agent knows, and what counts toward a reflection. Offline, and
through the local test server (tests/llmserver.py)."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from smallville.brain import requests as rq
from smallville.brain.offline import OfflineBrain
from smallville.embed import make_embedder
from smallville.scenario import load_scenario
from smallville.sim import Simulation
from smallville.sim.recall import recall
from smallville.world.grid import room_open_to

from conftest import CAFE_TRIO, ROOT

TINY = ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml"


class Listening(OfflineBrain):
    """The offline brain, keeping every request it is asked (and what it answered)."""

    def __init__(self, seed: int = 0, **kw) -> None:
        super().__init__(seed, **kw)
        self.asked: list[tuple[rq.Message, rq.Message]] = []

    def _answer(self, request):
        answer = super()._answer(request)
        self.asked.append((request, answer))
        return answer

    def of(self, kind: str, agent: str | None = None) -> list[tuple[rq.Message, rq.Message]]:
        return [(r, a) for r, a in self.asked if r.kind == kind and (agent is None or r.agent == agent)]


def run(path, seconds, brain=None, seed=None):
    scenario = load_scenario(path)
    brain = brain or Listening(scenario.seed if seed is None else seed)
    sim = Simulation(scenario, brain, make_embedder("lexical"), seed=seed)
    sim.run(seconds)
    return sim, brain


@pytest.fixture(scope="module")
def trio():
    """Cafe Trio for a day and a half, with every request kept."""
    return run(CAFE_TRIO, 36 * 3600)


def memories(agent, kind=None):
    return [agent.stream[i] for i in range(len(agent.stream)) if kind is None or agent.stream[i].kind == kind]


# ---- the agent summary description ------------------------------------------------------


def test_the_summary_is_asked_each_day_and_after_each_reflection_and_reaches_the_prompts(trio):
    sim, brain = trio
    for agent in sim.agents.values():
        asked = brain.of("summarize", agent.id)
        reflections = sum(1 for r in sim.log.records if r["kind"] == "reflect" and r["agent"] == agent.id)
        plans = sum(1 for r in sim.log.records if r["kind"] == "plan" and r["agent"] == agent.id)
        assert len(asked) == 1 + plans + reflections  # one for the run's first plan, one after each; cached between
        request = asked[0][0]
        assert request.identity == agent.identity() and request.persona == agent.background()
        assert request.core and request.occupation and request.now.startswith("Monday, February 13, 2023, ")
        described = {" ".join([agent.identity(), *a.parts()]) for _, a in asked}
        assert agent.summary == " ".join([agent.identity(), *asked[-1][1].parts()])
        for kind in ("plan_day", "react", "speak"):
            for r, _ in brain.of(kind, agent.id):
                summary = r.persona if kind == "plan_day" else r.summary
                assert summary in described and summary.startswith(agent.identity()), kind
    # what an agent lived through changes how it is described
    assert any(len({a.progress for _, a in brain.of("summarize", aid)}) > 1 for aid in sim.agents)


# ---- planning -----------------------------------------------------------------------------


def test_a_day_is_planned_in_broad_strokes_then_hours_then_5_to_15_minute_actions(trio):
    sim, brain = trio
    for request, plan in brain.of("plan_day"):
        if not request.start:
            assert 5 <= len(plan.broad) <= 8
            assert all(b.end - b.start <= 75 or b.sleep for b in plan.blocks)
    second = [r for r, _ in brain.of("plan_day", "isabella_rodriguez") if not r.start][1]
    assert second.yesterday.startswith("Isabella Rodriguez's plan for Monday, February 13, 2023: ")
    for request, actions in brain.of("decompose"):
        from smallville.brain.kinds import repaired as repair

        fixed, _ = repair(request, actions)
        assert all(5 <= s.minutes <= 15 for s in fixed.steps[:-1])
    for r in sim.log.records:
        if r["kind"] == "action":
            h, m = map(int, r["data"]["until"].split(":"))
            assert ((h * 60 + m) - (int(r["t"]) // 60 + 7 * 60)) % 1440 <= 15, r


def test_plans_are_memories_retrieval_surfaces(trio):
    sim, _ = trio
    isabella = sim.agents["isabella_rodriguez"]
    plans = memories(isabella, "plan")
    assert any(m.text.startswith("Isabella Rodriguez's plan for Tuesday, February 14, 2023: ") for m in plans)
    assert any("'s plan until " in m.text for m in plans)
    early, _ = run(CAFE_TRIO, 3600)
    found = [
        text for _, text in recall(early, early.agents["klaus_mueller"], "Klaus Mueller's plan for the morning", 10)
    ]
    assert any("Klaus Mueller's plan for Monday" in text for text in found)
    assert any("Klaus Mueller's plan until " in text for text in found)


class Replanning(Listening):
    """Reacts to the first thing it notices by re-planning; a re-plan goes dancing."""

    def _react(self, req, rng):
        if not self.of("react"):
            return rq.Reaction("replan", reason="a brass band is playing outside")
        return super()._react(req, rng)

    def _plan_day(self, req, rng):
        if req.start:
            return rq.DayPlan(
                (
                    rq.Block(req.start, req.start + 60, "dancing to the band", ""),
                    *(rq.Block(max(s, req.start + 60), e, a, w) for s, e, a, w in req.current if e > req.start + 60),
                )
            )
        return super()._plan_day(req, rng)


def test_a_reaction_plans_the_rest_of_the_day_again_and_keeps_what_was_done():
    # Whether Ann and Bob notice each other in eight hours turns on their walks: the first seed in which they do.
    sim, brain = next(
        (sim, brain) for sim, brain in (run(TINY, 8 * 3600, Replanning(s)) for s in range(10)) if brain.of("react")
    )
    [(request, _)] = [(r, a) for r, a in brain.of("plan_day") if r.start]
    agent = sim.agents[request.agent]
    assert request.reason == "a brass band is playing outside" and request.current
    day0 = sim.midnight(agent.plan_day)
    at = day0 + request.start * 60
    assert [b for b in agent.plan if b.start == at] and agent.plan[
        [b.start for b in agent.plan].index(at)
    ].activity == "dancing to the band"
    assert all(b.end <= at for b in agent.plan if b.start < at)  # what was done is kept, cut at then
    replans = [r for r in sim.log.records if r["kind"] == "replan" and r["agent"] == agent.id]
    assert replans[0]["data"]["reason"] == "a brass band is playing outside"
    assert any(
        r["kind"] == "action" and r["agent"] == agent.id and "dancing" in r["data"]["action"] for r in sim.log.records
    )


# ---- reacting -----------------------------------------------------------------------------


def test_a_reaction_is_asked_with_the_summary_the_time_and_two_queries_of_context(trio):
    sim, brain = trio
    reacts = brain.of("react")
    assert reacts
    for request, _ in reacts:
        assert request.summary and request.now.startswith(
            ("Monday, February 13, 2023, ", "Tuesday, February 14, 2023, ")
        )
        assert request.where and all(
            last == "never talked" or last.startswith(("today ", "yesterday ")) for *_, last in request.people
        )
        assert request.observations and request.activity
        assert not set(request.memories) & set(request.doing)
    assert any(r.memories and r.doing for r, _ in reacts)
    # nothing new perceived, no question: fewer reactions than actions by far
    actions = sum(1 for r in sim.log.records if r["kind"] == "action")
    assert len(reacts) < actions / 4


class Waiting(Listening):
    """Waits 2 minutes the first time each agent reacts, and carries on after that (no talks)."""

    def _react(self, req, rng):
        if not self.of("react", req.agent):
            return rq.Reaction("wait", reason="the band is loud", minutes=2)
        return rq.Reaction("continue")


def test_a_reaction_may_wait_and_then_the_action_goes_on():
    sim, brain = run(CAFE_TRIO, 4 * 3600, Waiting(0))
    acts = [r for r in sim.log.records if r["kind"] == "action"]
    mid_action = 0
    for i, waiting in enumerate(acts):
        if waiting["data"]["action"] != "waiting (the band is loud)":
            continue
        before = next(
            r
            for r in reversed(acts[:i])
            if r["agent"] == waiting["agent"] and r is not waiting and not r["data"]["action"].startswith("waiting")
        )
        after = next(r for r in acts[i + 1 :] if r["agent"] == waiting["agent"])
        assert after["t"] - waiting["t"] <= 2 * 60
        if waiting["data"]["until"] < before["data"]["until"]:  # the wait ended within the action
            mid_action += 1
            assert after["data"]["action"] == before["data"]["action"]  # which goes on after it
    assert mid_action


# ---- conversations ------------------------------------------------------------------------


def test_each_side_keeps_a_summary_a_thought_a_memo_and_a_new_view_of_the_other(trio):
    sim, brain = trio
    after = brain.of("after_talk")
    ends = [r for r in sim.log.records if r["kind"] == "talk_end"]
    assert len(after) == 2 * len(ends) > 0
    for request, notes in after:
        agent = sim.agents[request.agent]
        texts = {m.text: m.kind for m in memories(agent)}
        assert texts[notes.summary] == "conversation" and texts[notes.thought] == "thought"
        assert request.lines and request.other_name == sim.agents[request.other].name
    views = [r for r in sim.log.records if r["kind"] == "relationship"]
    assert {(v["agent"], v["data"]["view"]) for v in views} == {(r.agent, n.view) for r, n in after}
    memos = [n.memo for _, n in after if n.memo]
    assert memos and all("Valentine's Day party" in m for m in memos)
    isabella = sim.agents["isabella_rodriguez"]
    assert any(isabella.relationships[o] != isabella.spec.relationships.get(o) for o in isabella.relationships)


def test_a_speaker_recalls_by_the_paper_s_focal_points_and_keeps_its_news_in_mind(trio):
    """Each line is said with what the speaker recalls of its view of the listener, of what the
    listener is doing and of the last lines (`talk_k` each), so news of one's own stays among
    what one recalls in talk after talk (test_engine's two days in the Ville: Sam's candidacy)."""
    sim, brain = trio
    k = sim.config.talk_k
    speaks = brain.of("speak")
    assert speaks and all(len(r.memories) <= 3 * k for r, _ in speaks)
    assert all(len({m for _, m, _, _ in r.memories}) == len(r.memories) for r, _ in speaks)
    hosts = brain.of("speak", "isabella_rodriguez")
    assert len(hosts) >= 4
    assert all(any("Valentine's Day party" in m for _, m, _, _ in r.memories) for r, _ in hosts)


def test_own_news_is_told_in_the_first_person_and_others_see_the_topic(trio):
    sim, _ = trio
    said = [r["data"]["text"] for r in sim.log.records if r["kind"] == "say" and r["agent"] == "isabella_rodriguez"]
    assert any("Guess what? I'm planning a Valentine's Day party" in s for s in said)
    seen = [m.text for a in sim.agents.values() for m in memories(a, "observation")]
    assert any(" is talking with " in t and " about " in t for t in seen)


# ---- perceiving oneself, places known ------------------------------------------------------


def test_agents_perceive_their_own_actions(trio):
    sim, _ = trio
    for agent in sim.agents.values():
        actions = {r["data"]["action"] for r in sim.log.records if r["kind"] == "action" and r["agent"] == agent.id}
        own = {
            m.text.removeprefix(agent.name + " is ")
            for m in memories(agent, "observation")
            if m.text.startswith(agent.name + " is ")
        }
        assert len(actions & own) > len(actions) / 2


def test_an_agent_plans_with_the_places_it_knows_and_learns_more():
    scenario = load_scenario(ROOT / "scenarios" / "the_ville.yaml")
    brain = Listening(scenario.seed)
    sim = Simulation(scenario, brain, make_embedder("lexical"))
    klaus = sim.agents["klaus_mueller"]
    start = set(klaus.places)
    assert start == {
        sim.place_of(w) for w in (klaus.spec.home, klaus.spec.start_at, *(r.where or "" for r in klaus.spec.routine))
    } & set(sim.places)
    assert start < set(sim.places)
    sim.run(12 * 3600)
    [(first, _)] = brain.of("plan_day", "klaus_mueller")[:1]
    told = " ".join(m.text for m in memories(klaus, "seed")).lower()
    assert set(first.places) == start | {p for p in sim.places if p.lower() in told}
    assert klaus.places >= set(first.places)
    unknown = sorted(set(sim.places) - klaus.places)[0]
    sim.store(klaus, f"Maria Lopez said to Klaus Mueller: have you been to {unknown}?", "chat", 3)
    assert unknown in klaus.places  # told of it


def test_an_agent_file_may_name_the_places_known(tmp_path):
    folder = ROOT / "tests" / "fixtures" / "tiny_town"
    text = (folder / "agents" / "ann_lee.yaml").read_text()
    (tmp_path / "agents").mkdir()
    for f in (folder / "agents").iterdir():
        (tmp_path / "agents" / f.name).write_text(f.read_text())
    scenario_text = (folder / "scenarios" / "tiny.yaml").read_text()
    (tmp_path / "tiny.yaml").write_text(scenario_text)
    first = load_scenario(tmp_path / "tiny.yaml")
    home = first.agents[0].home
    (tmp_path / "agents" / "ann_lee.yaml").write_text(text + f"places: [{home}]\n")
    scenario = load_scenario(tmp_path / "tiny.yaml")
    ann = next(a for a in scenario.agents if a.id == "ann_lee")
    assert ann.places == (home,)
    sim = Simulation(scenario, OfflineBrain(0), make_embedder("lexical"))
    assert sim.agents["ann_lee"].places == {sim.place_of(home)}


# ---- rooms, action by action ---------------------------------------------------------------


def test_each_action_chooses_its_room_among_the_rooms_of_the_place_open_to_the_agent(trio):
    sim, brain = trio
    went = set()  # (agent, room, object) of actions using another room's object
    for request, answer in brain.of("decompose"):
        name = sim.agents[request.agent].name
        for label in request.elsewhere:  # other rooms of the place, never someone else's
            room = label.removesuffix(")").split(" (", 1)[1]
            assert room_open_to(f"{sim.place_of(request.where)} / {room}", name), (name, label)
        here = set(request.objects)
        for step in answer.steps:
            if step.object in request.elsewhere:
                thing, room = step.object.removesuffix(")").split(" (", 1)
                went.add((request.agent, room, thing))
            else:
                assert step.object is None or step.object in here
    assert went
    used = {
        (r["agent"], r["data"]["area"].rsplit(" / ", 1)[-1], r["data"]["object"])
        for r in sim.log.records
        if r["kind"] == "action" and r["data"]["object"]
    }
    assert went & used  # the action took its agent to the object's room
    for r in sim.log.records:  # and no one went into someone else's room
        if r["kind"] in ("action", "sleep"):
            assert room_open_to(r["data"]["area"], sim.agents[r["agent"]].name), r


def test_a_room_named_as_someone_s_is_theirs_and_others_are_everyone_s():
    assert room_open_to("Lin family's house / Eddy Lin's bedroom", "Eddy Lin")
    assert not room_open_to("Lin family's house / Eddy Lin's bedroom", "Mei Lin")
    assert room_open_to("Lin family's house / John and Mei's bedroom", "Mei Lin")
    assert room_open_to("Lin family's house / kitchen", "Mei Lin")
    assert room_open_to("The Rose and Crown Pub / men's restroom", "Mei Lin")
    assert room_open_to("Moreno family's house", "Mei Lin")  # a place as a whole


def test_a_whole_place_sends_an_agent_to_a_room_open_to_it():
    sim = Simulation(load_scenario(CAFE_TRIO), OfflineBrain(1), make_embedder("lexical"))
    rooms = {
        who: {sim.world.grid.area_at(sim.pick_tile(sim.agents[who], "Oak Hill College Dorm")) for _ in range(300)}
        for who in ("maria_lopez", "isabella_rodriguez")
    }
    assert rooms["maria_lopez"] == {"Oak Hill College Dorm / common room", "Oak Hill College Dorm / Maria Lopez's room"}
    assert rooms["isabella_rodriguez"] == {"Oak Hill College Dorm / common room"}


class SleepsInTheDorm(Listening):
    """Plans an hour in the common room, then sleep somewhere in the dorm (a whole place)."""

    def _plan_day(self, req, rng):
        return rq.DayPlan(
            (
                rq.Block(7 * 60, 8 * 60, "reading", "Oak Hill College Dorm / common room"),
                rq.Block(8 * 60, 10 * 60, "going to bed and sleeping", "Oak Hill College Dorm"),
            )
        )


def test_sleeping_at_a_whole_place_finds_the_agent_s_own_bed_in_another_room():
    sim, _ = run(CAFE_TRIO, 2 * 3600, SleepsInTheDorm(1))
    sleeps = {r["agent"]: r["data"]["area"] for r in sim.log.records if r["kind"] == "sleep"}
    assert sleeps["maria_lopez"] == "Oak Hill College Dorm / Maria Lopez's room"
    assert sleeps["klaus_mueller"] == "Oak Hill College Dorm / Klaus Mueller's room"
    assert sleeps["isabella_rodriguez"] != sleeps["maria_lopez"] != sleeps["klaus_mueller"]


def test_an_action_saved_before_rooms_comes_back_in_the_room_the_agent_is_in(trio):
    sim, _ = trio
    state = json.loads(json.dumps(sim.get_state()))
    for agent in state["agents"].values():  # as a checkpoint written before actions had rooms
        agent["queue"] = [a[:4] for a in agent["queue"]]
        agent["action"] = agent["action"][:4] if agent["action"] else None
    again = Simulation(sim.scenario, OfflineBrain(sim.seed), make_embedder("lexical"))
    again.set_state(state, {a: sim.agents[a].stream for a in sim.agents})
    for who, agent in again.agents.items():
        assert [a[:4] for a in agent.queue] == [list(a[:4]) for a in sim.agents[who].queue]
        assert all(a.area == "" for a in agent.queue) and (agent.action is None or agent.action.area == "")


# ---- reflection ----------------------------------------------------------------------------


def test_only_perceived_events_count_toward_a_reflection(trio):
    sim, brain = trio
    for agent in sim.agents.values():
        kept = memories(agent)
        perceived = sum(m.importance for m in kept if m.kind == "observation")
        reflections = sum(1 for r in sim.log.records if r["kind"] == "reflect" and r["agent"] == agent.id)
        triggers = sum(
            r["data"]["importance"] for r in sim.log.records if r["kind"] == "reflect" and r["agent"] == agent.id
        )
        assert triggers + agent.since_reflection == pytest.approx(perceived)
        assert reflections == 0 or triggers >= reflections * sim.config.reflection_threshold
    for _request, answer in brain.of("reflect_questions"):
        assert len(answer.questions) <= 3
    for _request, answer in brain.of("insights"):
        assert len(answer.insights) <= 5 and all(i.because for i in answer.insights)


def test_an_agent_holds_each_insight_once_and_is_shown_the_ones_it_holds(trio):
    sim, brain = trio
    asked = brain.of("insights")
    assert any(request.known for request, _ in asked)  # later reflections see the earlier insights
    for request, answer in asked:
        assert not {i.text for i in answer.insights} & set(request.known)
    held = {agent.id: [m.text for m in memories(agent, "reflection")] for agent in sim.agents.values()}
    assert sum(map(len, held.values())) > len(held)
    for texts in held.values():
        assert len(texts) == len(set(texts))
    greeted = [(r, a) for r, a in brain.of("reflect_questions") if any(": Hi " in m for _, m in r.memories)]
    assert greeted  # chat lines open "Hi Maria! ..."
    for _, answer in greeted:  # a greeting is not a name to think about
        assert not [q for q in answer.questions if q.startswith("What do I think about Hi ")]


def test_seed_memories_plans_and_chat_do_not_start_a_reflection():
    scenario = load_scenario(CAFE_TRIO)
    sim = Simulation(scenario, OfflineBrain(1), make_embedder("lexical"))
    sim.run(60)
    for agent in sim.agents.values():
        assert memories(agent, "seed") and memories(agent, "plan")
        assert agent.since_reflection == sum(m.importance for m in memories(agent, "observation"))


# ---- state ---------------------------------------------------------------------------------


def test_the_summary_yesterday_and_places_are_state_and_come_back(trio):
    sim, _ = trio
    state = sim.get_state()
    isabella = state["agents"]["isabella_rodriguez"]
    assert isabella["mind"]["summary"] == sim.agents["isabella_rodriguez"].summary
    assert isabella["mind"]["yesterday"].startswith("Isabella Rodriguez's plan for Tuesday")
    assert isabella["mind"]["places"] == sorted(sim.agents["isabella_rodriguez"].places)
    again = Simulation(sim.scenario, OfflineBrain(sim.seed), make_embedder("lexical"))
    again.set_state(json.loads(json.dumps(state)), {a: sim.agents[a].stream for a in sim.agents})
    assert again.get_state()["agents"] == state["agents"]


# ---- through a model ------------------------------------------------------------------------


def test_every_new_request_goes_to_a_model_and_comes_back_valid(tmp_path, monkeypatch):
    """Against the local test server (random answers valid for each schema): every kind is
    asked, none falls back, actions keep to 5-15 minutes."""
    from smallville.brain import LLMConfig
    from smallville.run import run_scenario

    from llmserver import SOCIABLE, LLMServer

    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    with LLMServer(seed=3) as server:
        server.prefer = {
            **SOCIABLE,
            "where": "Hobbs Cafe",
            "summary": "we talked about the party at the cafe",
            "sleep": False,
        }
        config = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, retries=1)
        result = run_scenario(
            load_scenario(CAFE_TRIO), runs_dir=tmp_path, duration=3 * 3600, brain=config, embedder="lexical"
        )
        asked = Counter(p["kind"] for p in server.prompts)
    usage = result.manifest.usage["by_kind"]
    for kind in ("summarize", "plan_day", "decompose", "react", "speak", "after_talk", "rate_importance"):
        assert asked[kind] > 0, kind
        assert usage[kind]["fallbacks"] == 0, kind
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    views = [e for e in events if e["kind"] == "relationship"]
    assert views
    kinds = Counter(e["data"]["kind"] for e in events if e["kind"] == "memory")
    assert kinds["conversation"] > 0 and kinds["plan"] > 3
