"""What each prompt gives the model, rendered from real moments of towns: the date and time
where an agent acts or speaks, recalled memories dated and cleaned, the fixed identity line,
the encounter and the last talk, schemas in JSON Schema's own words, an example answer in
prompt mode, room for the answer, and nothing of the_ville in another town's prompts."""

from __future__ import annotations

import json
import re

import pytest

from smallville.brain import kinds
from smallville.brain import requests as rq
from smallville.brain.offline import OfflineBrain
from smallville.brain.prompts import load_templates
from smallville.embed import make_embedder
from smallville.scenario import load_scenario
from smallville.sim import SimConfig, Simulation
from smallville.sim.recall import is_object_state

from conftest import ROOT, THE_VILLE

WHEN = r"(?:(?:today|yesterday) \d\d:\d\d|background|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} [A-Z][a-z]{2} \d\d:\d\d)"
NOW = r"(?:Monday|Tuesday|Wednesday), February 1[345], 2023, \d\d:\d\d"
ACTS = ("plan_day", "decompose", "react", "speak", "after_talk", "interview", "summarize")
RECALLED = {
    "summarize": ("core", "occupation", "progress"),
    "plan_day": ("memories",),
    "decompose": ("memories",),
    "react": ("memories", "doing"),
    "after_talk": ("memories",),
    "reflect_questions": ("memories",),
    "insights": ("evidence",),
    "speak": ("memories",),
}


class Listening(OfflineBrain):
    """The offline brain, keeping every request it is asked."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.asked: dict[str, list[rq.Message]] = {}

    def _answer(self, request):
        self.asked.setdefault(request.kind, []).append(request)
        return super()._answer(request)


def moment(path, hours: float, memory: str = "paper"):
    """A town lived offline for `hours` (reflecting early, so every kind is asked), and every
    request it asked, with an interview, a judge and a salience model's tags of its last moment."""
    from smallville.memory.models import memory_model
    from smallville.mind import interview_request
    from smallville.scenario.memorymodel import MemoryModel

    scenario = load_scenario(path)
    brain = Listening(scenario.seed)
    config = SimConfig(reflection_threshold=40, talk_cooldown=1800)  # reflections and second talks come soon
    sim = Simulation(scenario, brain, make_embedder("lexical"), config=config)
    sim.run(hours * 3600)
    agent = next(a for a in sim.agents.values() if len(a.stream) > 20)
    question = "What are you looking forward to this week?"
    brain.asked["interview"] = [interview_request(sim, agent, question, sim.retrieve(agent, question, 10))]
    answers = (("A", "I am busy."), ("B", "No idea."))
    lived = (("A", agent.stream[0].text), ("B", agent.stream[1].text))
    brain.asked["judge"] = [rq.Judge(agent.id, agent.name, agent.persona(), question, answers, lived)]
    tags = memory_model(MemoryModel.of("salience")).rating_request(
        agent, (agent.stream[0].text, agent.stream[1].text), [agent.stream[0].kind, agent.stream[1].kind]
    )
    brain.asked["tag_memories"] = [tags]
    return sim, brain.asked


@pytest.fixture(scope="module")
def ville():
    return moment(THE_VILLE, 5)


@pytest.fixture(scope="module")
def other_town(tmp_path_factory):
    from smallville.town import generate_town, write_town

    path = tmp_path_factory.mktemp("town") / "town.yaml"
    write_town(generate_town(10, seed=4), path)
    return moment(path, 5)


def user(request: rq.Message, mode: str = "json_schema") -> str:
    return load_templates()[request.kind].render(request, mode)[1]["content"]


def test_every_kind_is_asked_at_a_real_moment(ville, other_town):
    for _, asked in (ville, other_town):
        assert set(asked) == set(kinds.REQUEST_KINDS)


def test_prompts_that_act_or_speak_carry_the_date_and_time(ville):
    sim, asked = ville
    for kind in ACTS:
        for request in asked[kind][:40]:
            assert re.search(NOW, user(request)), (kind, user(request)[:300])


def test_recalled_memories_are_dated_and_cleaned(ville):
    sim, asked = ville
    for kind, fields in RECALLED.items():
        for request in asked[kind][:40]:
            prompt = user(request)
            for field in fields:
                for when, text, *_ in getattr(request, field):
                    assert re.fullmatch(WHEN, when), (kind, when)
                    assert f"[{when}] {text}" in prompt, (kind, text)
                    assert not is_object_state(sim, text), (kind, text)  # "sofa is idle" is not recalled
    dated = [when for r in asked["speak"] for when, *_ in r.memories]
    assert "background" in dated and any(w.startswith("today ") for w in dated)
    for request in asked["speak"]:  # no unexplained columns, each text once
        assert "importance" not in user(request) and " | seed" not in user(request)
        assert len({text for _, text, *_ in request.memories}) == len(request.memories)
        own = [t for _, t, *_ in request.memories if t.startswith(request.name + " is ")]
        assert len(own) == len({re.sub(r" \(.*\)", "", t) for t in own})  # one's own action once
    interview = asked["interview"][0]
    assert interview.memories and all(
        f"[{mid}] {when}: {text}" in user(interview) for mid, when, text in interview.memories
    )
    assert "[0] " not in user(interview) or any(mid == 0 for mid, *_ in interview.memories)  # numbered once, by id


def test_the_fixed_identity_line_leads_what_the_model_reads_of_the_agent(ville):
    sim, asked = ville
    for kind in ("rate_importance", "decompose", "summarize", "plan_day", "react", "speak"):
        requests = asked[kind][:40]
        assert requests
        for request in requests:
            identity = sim.agents[request.agent].identity()
            assert identity in user(request), kind
    isabella = sim.agents["isabella_rodriguez"]
    assert isabella.identity().startswith("Isabella Rodriguez (34): ") and "Currently: " in isabella.identity()
    assert isabella.summary.startswith(isabella.identity())
    rated = asked["rate_importance"]
    assert any("| seen |" not in user(r) and "| said |" not in user(r) for r in rated)
    assert any(
        r.kinds and set(r.kinds) <= {"observation", "chat", "conversation", "plan", "thought", "reflection", "seed"}
        for r in rated
    )
    assert all(len(r.kinds) == len(r.texts) for r in rated)


def test_a_conversation_is_rated_once_its_lines_taking_its_summary_s_rating(ville):
    sim, asked = ville
    assert not any(" said to " in t for r in asked["rate_importance"] for t in r.texts)
    memories = [r for r in sim.log.records if r["kind"] == "memory"]
    talks = [m for m in memories if m["data"]["kind"] == "conversation"]
    assert talks
    for talk in talks:
        lines = [
            m for m in memories if m["agent"] == talk["agent"] and m["t"] == talk["t"] and m["data"]["kind"] == "chat"
        ]
        assert lines and {m["data"]["importance"] for m in lines} == {talk["data"]["importance"]}


def test_react_reasons_first_and_knows_when_they_last_talked(ville):
    sim, asked = ville
    templates = load_templates()
    for request in asked["react"][:40]:
        schema = templates["react"].schema_for(request)
        assert list(schema["properties"])[0] == "thought"
        assert request.where and f"at {request.where}" in user(request)
        for person in request.people:
            assert person[3] == "never talked" or re.match(WHEN + r": ", person[3]), person
    assert any(p[3] != "never talked" for r in asked["react"] for p in r.people)  # they met again after a talk
    assert "Most of the time people carry on" not in templates["react"].system


def test_speak_gives_the_encounter_and_the_last_talk_not_raw_lines(ville):
    sim, asked = ville
    speaks = asked["speak"]
    first = [r for r in speaks if not r.history]
    assert first and all("is opening the conversation" in user(r) for r in first)
    for request in speaks:
        prompt = user(request)
        assert request.where and request.doing and request.listener_doing
        assert f"{request.name} was {request.doing}; {request.listener_name} was {request.listener_doing}" in prompt
        assert "earlier conversations" not in prompt and (
            len(request.earlier) < 2
            or not any(f"{a}\n{b}" in prompt for a, b in zip(request.earlier, request.earlier[1:]))
        )  # not the raw lines
    again = [r for r in speaks if r.last_talk]
    assert again and all(re.match(WHEN + r": ", r.last_talk) for r in again)
    assert all(f"Their last conversation: {r.last_talk}" in user(r) for r in again)


def test_after_a_talk_the_next_breakdown_knows_what_was_said_and_agreed(ville):
    sim, asked = ville
    after = [r for r in asked["decompose"] if "has just talked with" in r.reason]
    assert after
    for request in after:
        assert re.search(
            r"talked with .+ about ", request.reason
        ) and "Reason for re-planning: " + request.reason in user(request)
        assert re.search(r"from \d\d:\d\d to \d\d:\d\d \(\d+ minutes\)", user(request))
    assert any(r.before and r.after for r in asked["decompose"])


def test_schemas_sent_use_only_json_schema_s_keywords_and_openai_s_strict_form(ville):
    """A stray key (an unquoted YAML description once put `"or null": null` into two schemas)
    would have a strict provider refuse every request of that kind."""
    keywords = {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "description",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
    }
    templates = load_templates()

    def check(schema: dict, where: str) -> None:
        assert set(schema) <= keywords, (where, set(schema) - keywords)
        if schema.get("type") == "object":
            assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])
        for name, sub in schema.get("properties", {}).items():
            check(sub, f"{where}.{name}")
        if "items" in schema:
            check(schema["items"], f"{where}[]")

    for kind, requests in ville[1].items():
        for request in requests[:20]:
            for mode in ("json_schema", "json_object"):
                sent = templates[kind].response_format(mode, request)
                check(sent["json_schema"]["schema"] if mode == "json_schema" else sent["schema"], kind)


def test_prompt_mode_carries_one_example_answer_of_the_kind_s_form(ville):
    import jsonschema

    templates = load_templates()
    for kind, requests in ville[1].items():
        template = templates[kind]
        assert template.example is not None, kind
        jsonschema.validate(template.example, template.schema)
        prompt = user(requests[0], "prompt")
        assert json.dumps(template.example, separators=(",", ":"), ensure_ascii=False) in prompt
        example = json.dumps(template.example, separators=(",", ":"))
        for mode in ("json_schema", "json_object"):  # not where the server holds the model to the schema
            assert example not in user(requests[0], mode)


def test_max_tokens_leave_room_for_the_largest_answer(ville):
    """An answer cut at max_tokens is invalid JSON: each kind's room, derived from the request's
    schema, holds the offline brain's answers written out with indents, and a capable model's
    whole day of 24 blocks of 15-word activities."""
    import litellm

    from smallville.brain.prompts import to_model_json

    sim, asked = ville
    templates = load_templates()
    brain = OfflineBrain(sim.seed)
    for kind, requests in asked.items():
        for request in requests[:60]:
            answer = json.dumps(to_model_json(brain.answer([request])[0]), indent=2)
            used = litellm.token_counter(model="gpt-4o-mini", text=answer)
            assert used <= 0.8 * templates[kind].max_tokens_for(request), (kind, used)
    plan = asked["plan_day"][0]
    words = "walking down to the print shop to set the type for the spring market posters and cards"
    day = {
        "broad": [f"{words} at 07:00"] * 8,
        "blocks": [
            {"start": 420 + 60 * i, "end": 480 + 60 * i, "activity": words, "where": plan.places[0], "sleep": False}
            for i in range(24)
        ],
    }
    used = litellm.token_counter(model="gpt-4o-mini", text=json.dumps(day, indent=4))
    assert used <= templates["plan_day"].max_tokens_for(plan)
    assert templates["speak"].temperature > templates["plan_day"].temperature > 0
    assert all(templates[k].temperature == 0 for k in ("rate_importance", "tag_memories", "react", "judge"))


def test_another_town_s_prompts_hold_nothing_of_the_ville(other_town):
    ville = load_scenario(THE_VILLE)
    names = {a.name for a in ville.agents} | {a.name.split()[0] for a in ville.agents}
    places = {p.split(" / ")[0] for p in ville.map.legend.values() if p != "wall"}
    sim, asked = other_town
    own = " ".join(a.persona() + " ".join(m.text for m in a.spec.memories) for a in sim.agents.values())
    own += " ".join(sim.scenario.map.legend.values())
    leaks = {w for w in names | places | {"Valentine", "Ville"} if w not in own}  # (generated towns have a college
    assert len(leaks) > 40  # of the_ville's name: their own)
    for kind, requests in asked.items():
        for request in requests[:30]:
            for mode in ("json_schema", "prompt"):
                system, prompt = (m["content"] for m in load_templates()[kind].render(request, mode))
                found = [w for w in leaks if re.search(rf"\b{re.escape(w)}\b", system + prompt)]
                assert not found, (kind, found)
    for template in load_templates().values():  # nor any town's events in what every town gets
        fixed = template.system + template.user + json.dumps(template.example) + json.dumps(template.schema)
        assert not re.search(r"(?i)\b(party|election|mayor|valentine)", fixed), template.kind


def test_a_plan_covers_the_day_from_when_it_is_asked_and_copied_text_is_no_answer():
    """SmolLM2, asked at 07:00, planned 20:34 to 07:19 with the activity "what the character
    does": the morning comes from the routine, and the copied activity is no answer."""
    from smallville.brain.kinds import repaired as repair

    templates = load_templates()
    routine = (
        (360, "wake up and get ready", "Home"),
        (480, "work at the shop", "Shop"),
        (1320, "go to bed and sleep", "Home"),
    )
    request = rq.PlanDay("ann", "Ann Lee", "", "Monday, February 13, 2023", routine, (), ("Home", "Shop"), asked=420)
    broad = ["what the character does", "work", "rest"]
    answer = templates["plan_day"].parse(
        request,
        json.dumps(
            {
                "broad": broad,
                "blocks": [
                    {"start": 1234, "end": 1879, "activity": "what the character does", "where": "", "sleep": False},
                    {
                        "start": 1234,
                        "end": 1300,
                        "activity": "reading a novel on the sofa",
                        "where": "Home",
                        "sleep": False,
                    },
                    {"start": 1300, "end": 1879, "activity": "going to bed", "where": "Home", "sleep": False},
                ],
            }
        ),
    )
    plan, notes = repair(request, answer, templates["plan_day"].canned())
    assert plan.blocks[0].start == 420 and plan.blocks[0].activity == "waking up and getting ready"
    assert [b.activity for b in plan.blocks if b.start >= 480][:1] == ["working at the shop"]
    assert "what the character does" not in {b.activity for b in plan.blocks} and plan.broad == ("work", "rest")
    assert [b.sleep for b in plan.blocks if b.activity == "going to bed"] == [True]
    assert any("text of the prompt" in n for n in notes) and any("07:00-20:34 was not planned" in n for n in notes)
    steps = rq.Actions(
        (
            rq.Step(10, "What the character does, e.g. 'oiling the hinges of the press'"),
            rq.Step(10, "stocking the shelves"),
        )
    )
    block = rq.Decompose("ann", "Ann Lee", "working at the shop", "Shop", 480, 500, (), ())
    fixed, notes = repair(block, steps, templates["decompose"].canned())
    assert [s.description for s in fixed.steps] == ["working at the shop", "stocking the shelves"] and notes
    assert repair(block, fixed, templates["decompose"].canned()) == (fixed, ())


class NightOwl(OfflineBrain):
    """Plans as the offline brain does, but calls the night "turning in": only its flag says sleep."""

    def _plan_day(self, req, rng):
        plan = super()._plan_day(req, rng)
        return rq.DayPlan(
            tuple(
                rq.Block(b.start, b.end, "turning in" if b.sleep else b.activity, b.where, b.sleep) for b in plan.blocks
            ),
            plan.broad,
        )


def test_a_block_the_plan_says_is_sleep_is_slept_whatever_its_words():
    from smallville.sim.agent import PlanBlock

    scenario = load_scenario(ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml")
    sim = Simulation(scenario, NightOwl(0), make_embedder("lexical"))
    sim.run(20 * 3600)
    slept = {r["agent"] for r in sim.log.records if r["kind"] == "sleep"}
    assert "bob_ray" in slept  # his night, from the default routine, is "turning in"
    assert any(b.activity == "turning in" and b.sleep for a in sim.agents.values() for b in a.plan)
    assert PlanBlock.of_state([0.0, 60.0, "going to bed and sleeping", ""]).sleep  # a state saved before
    assert not PlanBlock.of_state([0.0, 60.0, "reading in bed", ""]).sleep
