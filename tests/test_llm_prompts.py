"""Prompt templates, answer parsing, and the wrappers every brain can wear (no network)."""

from __future__ import annotations

import io
import json

import pytest

from smallville.brain import kinds
from smallville.brain import requests as rq
from smallville.brain.base import Brain, Failed
from smallville.brain.kinds import safe_answer
from smallville.brain.ledger import Ledger
from smallville.brain.offline import OfflineBrain
from smallville.brain.prompts import AnswerError, load_templates, to_model_json
from smallville.brain.record import Recording, Replaying
from smallville.brain.wrappers import RatingMemo, Retrying, WithFallbacks
from smallville.errors import BrainError

from conftest import CAFE_TRIO


@pytest.fixture(scope="module")
def asked():
    """Every distinct request and offline answer of a short cafe_trio run."""
    from smallville.embed import make_embedder
    from smallville.scenario import load_scenario
    from smallville.sim import Simulation

    scenario = load_scenario(CAFE_TRIO)
    out = io.StringIO()
    sim = Simulation(scenario, Recording(OfflineBrain(scenario.seed), out), make_embedder("lexical"))
    sim.run(6 * 3600)
    pairs = {}
    for line in out.getvalue().splitlines():
        entry = json.loads(line)
        if "request" in entry:
            request = kinds.REQUEST_KINDS[entry["kind"]].from_dict(entry["request"])
            pairs[entry["key"]] = (request, rq.Message.registry[entry["answer"]["kind"]].from_dict(entry["answer"]))
    return list(pairs.values())


def test_every_kind_has_a_versioned_template_and_a_schema():
    templates = load_templates()
    assert set(templates) == set(kinds.REQUEST_KINDS)
    for kind, t in templates.items():
        assert t.version >= 1 and t.schema["type"] == "object" and t.schema["additionalProperties"] is False
        assert rq.Message.registry[t.answer] is kinds.ANSWER_OF[kinds.REQUEST_KINDS[kind]]


def test_every_request_type_is_a_declared_kind_with_an_offline_answer():
    """A kind is declared once (kinds.py): every message type is a declared kind's request or
    answer, or an item of an answer's list (a plan's block), or a request's frame, and the
    offline brain answers every kind; every kind that carries an agent's context has a
    four-part layout."""
    declared = set(kinds.REQUEST_KINDS.values()) | set(kinds.ANSWER_OF.values())
    items = {rq.Message.registry[item] for t in load_templates().values() for item in t.items.values()}
    assert set(rq.Message.registry.values()) - declared - items == {rq.Frame}
    framed = {kind for kind, request in kinds.REQUEST_KINDS.items() if request.framed}
    assert framed == {kind for kind, t in load_templates().items() if "four_part" in t.frames}
    for kind in kinds.KINDS:
        assert callable(getattr(OfflineBrain, "_" + kind, None)), kind


def test_offline_answers_round_trip_through_every_template(asked):
    templates = load_templates()
    assert {r.kind for r, _ in asked} >= {"rate_importance", "plan_day", "decompose", "react", "speak"}
    for request, answer in asked:
        reply = json.dumps(to_model_json(answer))
        assert templates[request.kind].parse(request, reply) == answer


def test_prompts_put_the_fixed_part_first_and_name_every_field(asked):
    templates = load_templates()
    for request, _ in asked:
        system, user = templates[request.kind].render(request, "json_schema")
        assert system["role"] == "system" and "{" not in system["content"]  # no request data in it
        assert request.name in user["content"] and "REQUEST_JSON" not in user["content"]
    request = asked[0][0]
    prompt = templates[request.kind].render(request, "prompt", echo=True)
    assert prompt[0] == templates[request.kind].render(request, "json_schema")[0]  # the fixed part stays fixed
    schema = json.dumps(templates[request.kind].schema_for(request), separators=(",", ":"))
    assert schema in prompt[1]["content"]  # the schema, for servers without one
    assert prompt[1]["content"].splitlines()[-1].startswith("REQUEST_JSON: {")


def test_replies_are_parsed_leniently_and_validated_strictly():
    template = load_templates()["rate_importance"]
    request = rq.RateImportance("a", "Ann", ("x", "y"))
    assert template.parse(request, 'Sure!\n```json\n{"scores": {"1": 9, "0": 3}}\n```').scores == (3, 9)
    cases = {
        "{'scores': {'0': 3, '1': 9}}": "bad_json",
        '{"scores": {"0": 3, "1": 9': "bad_json",
        "no idea": "bad_json",
        '{"scores": {"0": 3}}': "schema",
        '{"scores": {"0": 3, "1": 11}}': "schema",
        '{"score": {"0": 3, "1": 9}}': "schema",
        '{"scores": {"0": "3", "1": "9"}}': "schema",
        '{"scores": {"0": 3, "1": 9, "2": 4}}': "schema",
        '{"scores": [3, 9]}': "schema",
    }
    for reply, reason in cases.items():
        with pytest.raises(AnswerError) as err:
            template.parse(request, reply)
        assert err.value.reason == reason, reply


class Scripted(Brain):
    """A brain that answers from a script of answers (or Failed) per call, recording batches."""

    name = "scripted"

    def __init__(self, *script):
        self.script, self.batches = list(script), []

    def describe(self):
        return {"name": self.name}

    def answer(self, requests):
        self.batches.append(list(requests))
        step = self.script.pop(0) if self.script else None
        return [
            step(r) if callable(step) else step if step is not None else OfflineBrain(0).answer([r])[0]
            for r in requests
        ]


def test_retries_then_fallbacks_are_listed_and_counted():
    ledger = Ledger()
    broken = Failed("server", "HTTP 500")
    brain = WithFallbacks(Retrying(Scripted(broken, broken, broken), retries=2, backoff=0, ledger=ledger), ledger)
    requests = [rq.React("a", "Ann", "reading", ("Bob is here",), (), (), ()), rq.RateImportance("b", "Bob", ("x",))]
    answers = brain.answer(requests)
    assert answers == [rq.Reaction("continue"), rq.Importance((5,))]
    assert [(f.index, f.kind, f.error) for f in answers.fallbacks] == [
        (0, "react", "server: HTTP 500"),
        (1, "rate_importance", "server: HTTP 500"),
    ]
    assert ledger.total()["retries"] == 4 and ledger.total()["fallbacks"] == 2
    again = brain.answer(requests[1:])
    assert again == [rq.Importance((2,))] and again.fallbacks == ()


def test_retry_backoff_doubles_and_refusals_are_not_retried():
    waits = []
    inner = Scripted(Failed("rate_limit", "429"), Failed("rate_limit", "429"), None)
    assert Retrying(inner, retries=3, backoff=0.5, sleep=waits.append).answer(
        [rq.RateImportance("a", "A", ("x",))]
    ) == [rq.Importance((2,))]
    assert waits == [0.5, 1.0]
    inner = Scripted(Failed("refused", "401 bad key"))
    assert isinstance(Retrying(inner, retries=3, backoff=0).answer([rq.RateImportance("a", "A", ("x",))])[0], Failed)
    assert len(inner.batches) == 1


def test_a_model_that_never_connects_is_an_error_not_a_fallback():
    brain = WithFallbacks(Scripted(Failed("connection", "refused")))
    with pytest.raises(BrainError, match="unreachable"):
        brain.answer([rq.RateImportance("a", "A", ("x",))])


def test_safe_answers_are_valid_for_every_kind(asked):
    for request, _ in asked:
        assert isinstance(safe_answer(request), kinds.ANSWER_OF[type(request)])
    plan = safe_answer(
        rq.PlanDay("a", "Ann", "", "Monday", ((420, "wake up", "home"), (480, "open the shop", "Shop")), (), ("Shop",))
    )
    assert [(b.start, b.end, b.activity) for b in plan.blocks] == [
        (420, 480, "waking up"),
        (480, 1860, "opening the shop"),
    ]


def test_ratings_of_a_repeated_text_are_reused():
    inner, ledger = Scripted(), Ledger()
    memo = RatingMemo(inner, ledger)
    assert memo.answer([rq.RateImportance("a", "A", ("bed is idle", "a party tonight"))]) == [rq.Importance((1, 7))]
    both = memo.answer(
        [rq.RateImportance("a", "A", ("a party tonight", "news")), rq.RateImportance("b", "B", ("bed is idle",))]
    )
    assert both == [rq.Importance((7, 4)), rq.Importance((1,))]
    assert [r.texts for r in inner.batches[1]] == [("news",), ("bed is idle",)]  # per agent
    assert memo.answer([rq.RateImportance("a", "A", ("news", "bed is idle"))]) == [rq.Importance((4, 1))]
    assert len(inner.batches) == 2 and ledger.total()["reused"] == 3


def test_recording_and_replay_serve_repeated_requests_in_order(tmp_path):
    request = rq.Speak("a", "Ann", "b", "Bob", "", (), (), ())
    lines = iter([rq.Utterance("one"), rq.Utterance("two")])
    out = io.StringIO()
    recording = Recording(Scripted(lambda r: next(lines), lambda r: next(lines)), out)
    recording.answer([request]), recording.answer([request])
    (tmp_path / "answers.jsonl").write_text(out.getvalue())
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    assert ["request" in e for e in entries] == [True, False]
    replay = Replaying(tmp_path)
    assert replay.answer([request]) + replay.answer([request]) == [rq.Utterance("one"), rq.Utterance("two")]
    with pytest.raises(BrainError, match=rq.request_key(rq.Speak("z", "Zed", "b", "Bob", "", (), (), ()))):
        replay.answer([rq.Speak("z", "Zed", "b", "Bob", "", (), (), ())])


def test_settings_come_from_the_scenario_then_the_file_then_flags(tmp_path):
    from smallville.brain.config import load_config

    block = {"model": "ollama/llama3", "temperature": 0.7, "retries": 4}
    assert load_config(scenario=block).model == "offline"  # a town runs offline by default
    chosen = load_config(scenario=block, flags={"model": "llm"})
    assert (chosen.model, chosen.temperature, chosen.retries) == ("ollama/llama3", 0.7, 4)
    settings = tmp_path / "brain.yaml"
    settings.write_text("model: openai/gpt-4o-mini\nretries: 1\n")
    from_file = load_config(scenario=block, file=settings, flags={"api_base": "http://127.0.0.1:9/v1"})
    assert (from_file.model, from_file.temperature, from_file.retries) == ("openai/gpt-4o-mini", 0.7, 1)
    assert load_config(scenario=block, file=settings, flags={"model": "ollama/qwen2"}).model == "ollama/qwen2"
    with pytest.raises(BrainError, match="--brain llm"):
        load_config(flags={"model": "llm"})
    with pytest.raises(BrainError, match="structured='xml'"):
        load_config(flags={"model": "openai/x", "structured": "xml"})


def test_every_request_says_all_its_answer_must_be_in_every_mode(asked):
    template = load_templates()["rate_importance"]
    request = rq.RateImportance("klaus_mueller", "Klaus Mueller", ("a", "b", "c"))
    for mode in ("json_schema", "json_object"):
        sent = template.response_format(mode, request)
        scores = (sent["json_schema"]["schema"] if mode == "json_schema" else sent["schema"])["properties"]["scores"]
        assert scores["required"] == ["0", "1", "2"] and scores["additionalProperties"] is False
        assert all(p["enum"] == list(range(1, 11)) for p in scores["properties"].values())
    assert template.response_format("prompt", request) is None
    assert "properties" not in template.schema["properties"]["scores"]  # the template itself is untouched
    templates = load_templates()
    plan = next(r for r, _ in asked if r.kind == "plan_day")
    where = templates["plan_day"].schema_for(plan)["properties"]["blocks"]["items"]["properties"]["where"]
    assert set(plan.places) < set(where["enum"]) and "" in where["enum"]


def test_any_answer_that_follows_the_schema_sent_is_accepted(asked):
    """The schema is the whole contract: a model that obeys it is never refused."""
    import random

    from schemagen import instance

    templates = load_templates()
    rng = random.Random(3)
    for request, _ in asked:
        template = templates[request.kind]
        for _ in range(20):
            reply = json.dumps(instance(template.schema_for(request), rng))
            answer = template.parse(request, reply)
            assert isinstance(answer, kinds.ANSWER_OF[type(request)])


def test_a_plan_is_repaired_against_the_day_and_each_repair_is_named():
    from smallville.brain.kinds import repaired as repair

    routine = (
        (360, "wake up and get ready", "Isabella Rodriguez's apartment"),
        (480, "open Hobbs Cafe", "Hobbs Cafe"),
        (1200, "close up and go home", "Isabella Rodriguez's apartment"),
        (1380, "sleep", ""),
    )
    request = rq.PlanDay(
        "isabella_rodriguez",
        "Isabella Rodriguez",
        "",
        "Monday",
        routine,
        (),
        ("Hobbs Cafe", "Isabella Rodriguez's apartment", "Johnson Park"),
    )
    model = rq.DayPlan(
        (
            rq.Block(1, 480, "morning", "home"),
            rq.Block(60, 420, "morning", "hobbs cafe"),
            rq.Block(500, 450, "lunch", "Johnson Park"),
        )
    )  # SmolLM2's plan for Isabella
    plan, notes = repair(request, model)
    assert [(b.start, b.end, b.where) for b in plan.blocks] == [
        (1, 480, ""),
        (480, 1200, "Hobbs Cafe"),
        (1200, 1380, "Isabella Rodriguez's apartment"),
        (1380, 1800, ""),
    ]
    assert [b.activity for b in plan.blocks][1:] == ["opening Hobbs Cafe", "closing up and going home", "sleeping"]
    assert any("ends before it starts" in n for n in notes) and any("inside the block before it" in n for n in notes)
    assert any("'home' is not known: stay put" in n for n in notes)
    assert any("08:00-06:00 next day was not planned: filled from the routine" in n for n in notes)
    assert repair(request, plan) == (plan, ())  # a repaired plan needs nothing more


def test_actions_are_cut_to_their_block_and_talk_needs_someone_there():
    from smallville.brain.kinds import repaired as repair

    block = rq.Decompose("a", "Ann", "reading", "Library", 600, 630, (), ())
    actions, notes = repair(
        block,
        rq.Actions((rq.Step(15, "reading"), rq.Step(10, "more"), rq.Step(10, "even more"), rq.Step(5, "past the end"))),
    )
    assert [(s.minutes, s.description) for s in actions.steps] == [(15, "reading"), (10, "more"), (5, "even more")]
    assert len(notes) == 2
    assert repair(block, rq.Actions(()))[0] == rq.Actions((rq.Step(15, "reading"), rq.Step(15, "reading")))
    react = rq.React("a", "Ann", "reading", ("Bob is here",), (("bob", "Bob", "idle"),), (), ())
    assert repair(react, rq.Reaction("talk", "bob")) == (rq.Reaction("talk", "bob"), ())
    reaction, notes = repair(react, rq.Reaction("talk", None, "hi"))
    assert reaction == rq.Reaction("continue", None, "hi") and notes == (
        "talk to None, who is not here to talk: carry on",
    )


def test_numbers_out_of_their_bounds_are_clamped_not_refused():
    """Some servers' grammars ignore a schema's minimum and maximum (llama.cpp's did)."""
    from smallville.brain.kinds import repaired as repair

    templates = load_templates()
    request = rq.Decompose("a", "Ann", "reading", "Library", 600, 900, (), ())
    assert templates["decompose"].schema_for(request)["properties"]["steps"]["items"]["properties"]["minutes"] == {
        "type": "integer",
        "description": "duration in minutes, 5..15",
        "minimum": 5,
        "maximum": 15,
    }
    answer = templates["decompose"].parse(
        request,
        '{"steps": [{"minutes": 0, "description": "x", "object": null},'
        ' {"minutes": 40, "description": "y", "object": null}]}',
    )
    actions, notes = repair(request, answer)
    assert [(s.minutes, s.description) for s in actions.steps] == [(5, "x"), (15, "y"), (15, "y"), (10, "y")]
    assert len(notes) == 2
    plan = rq.PlanDay("a", "Ann", "", "Monday", ((420, "wake up", ""),), (), ())
    answer = templates["plan_day"].parse(
        plan,
        '{"broad": ["work"], "blocks": [{"start": 420, "end": 3456, "activity": "work", "where": "", "sleep": false}]}',
    )
    fixed, notes = repair(plan, answer)
    assert [(b.start, b.end) for b in fixed.blocks] == [(420, 2880)] and "clamped" in notes[0]


def test_names_not_offered_are_mapped_onto_what_was_offered_not_refused():
    """A small model names an object or a place it was not offered (SmolLM2 named a cafe
    of its own for Isabella's object): the rest of its answer is kept."""
    from smallville.brain.kinds import repaired as repair

    templates = load_templates()
    request = rq.Decompose(
        "a",
        "Ann",
        "cooking",
        "Ann's house / kitchen",
        600,
        630,
        ("stove",),
        (),
        "",
        ("bed (bedroom)", "fridge (pantry)"),
    )
    sent = templates["decompose"].schema_for(request)["properties"]["steps"]["items"]["properties"]["object"]
    assert sent["enum"] == ["bed (bedroom)", "fridge (pantry)", "stove", None]  # the server is told exactly
    answer = templates["decompose"].parse(
        request,
        json.dumps(
            {
                "steps": [
                    {"minutes": 10, "description": "x", "object": "Fridge"},
                    {"minutes": 10, "description": "y", "object": "stove!"},
                    {"minutes": 10, "description": "z", "object": "Bloomsbury Coffee Co."},
                ]
            }
        ),
    )
    actions, notes = repair(request, answer)
    assert [s.object for s in actions.steps] == ["fridge (pantry)", "stove", None]
    assert len(notes) == 3 and all("is not offered" in n for n in notes)
    plan = rq.PlanDay("a", "Ann", "", "Monday", ((420, "wake up", "Hobbs Cafe"),), (), ("Hobbs Cafe", "Johnson Park"))
    answer = templates["plan_day"].parse(
        plan,
        json.dumps(
            {
                "broad": ["work"],
                "blocks": [
                    {"start": 420, "end": 1860, "activity": "work", "where": "Hobbs cafe downtown", "sleep": False}
                ],
            }
        ),
    )
    fixed, notes = repair(plan, answer)
    assert fixed.blocks[0].where == "Hobbs Cafe" and "is not known" in notes[0]
    with pytest.raises(AnswerError):  # what is not a name is still checked
        templates["decompose"].parse(request, '{"steps": [{"minutes": 10, "description": "x", "object": 3}]}')


def test_prices_written_as_yaml_people_write_them_are_numbers(tmp_path):
    from smallville.brain.config import load_config

    settings = tmp_path / "brain.yaml"
    settings.write_text("model: openai/x\nprice: {prompt: 2e-6, completion: 8.0e-6}\n")  # YAML 1.1: 2e-6 is a string
    config = load_config(file=settings)
    assert (config.price_prompt, config.price_completion) == (2e-6, 8e-6)
    settings.write_text("model: openai/x\nprice_prompt: cheap\n")
    with pytest.raises(BrainError, match="price_prompt='cheap': must be a number"):
        load_config(file=settings)
