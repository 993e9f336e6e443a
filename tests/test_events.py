"""Event kinds: smallville/events.py, docs/run-format.md's table and what a run writes agree."""

from __future__ import annotations

import json

import pytest

from smallville import events
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT

DOC = ROOT / "docs" / "run-format.md"


def doc_table() -> dict[str, tuple[str, list[tuple[str, str, bool]]]]:
    """The event table of docs/run-format.md: kind -> (agent, [(field, type, optional)])."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index("| kind | agent | fields | data |")
    table = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        kind, agent, fields, _ = (cell.strip() for cell in line.strip("|").split(" | "))
        parsed = []
        for part in fields.split(", "):
            name, type_name = part.split(" ")
            parsed.append((name.strip("`"), type_name.rstrip("?"), type_name.endswith("?")))
        table[kind.strip("`")] = (agent, parsed)
    return table


def test_the_doc_table_has_every_kind_of_the_module_with_the_same_fields():
    table = doc_table()
    assert sorted(table) == sorted(events.KINDS)
    for name, kind in events.KINDS.items():
        agent, fields = table[name]
        assert agent == kind.agent, name
        assert fields == [(f.name, f.type, f.optional) for f in kind.fields], name


def test_the_kind_names_are_the_constants():
    constants = {v for k, v in vars(events).items() if k.isupper() and isinstance(v, str)}
    assert constants == set(events.KINDS)


@pytest.fixture(scope="module")
def trio_run(tmp_path_factory):
    """cafe_trio until just after its party begins, as written to disk."""
    result = run_scenario(
        load_scenario(CAFE_TRIO), runs_dir=tmp_path_factory.mktemp("runs"), duration=35 * 3600, embedder="lexical"
    )
    with open(result.path / "events.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_a_run_writes_only_known_kinds_with_exactly_their_fields(trio_run):
    assert {e["kind"] for e in trio_run} >= {
        events.PLAN,
        events.ACTION,
        events.MOVE,
        events.OBJECT,
        events.MEMORY,
        events.REFLECT,
        events.TALK_START,
        events.SAY,
        events.TALK_END,
        events.RELATIONSHIP,
        events.REPLAN,
        events.SLEEP,
        events.WAKE,
        events.EVENT,
        events.LEARNED,
        events.SPAWN,
    }
    for e in trio_run:
        assert list(e) == ["t", "time", "kind", "agent", "data"]
        assert events.problems(e) == [], e


def test_a_chat_memory_names_speaker_and_listener_and_the_line_said(trio_run):
    said = [e for e in trio_run if e["kind"] == events.SAY]
    chats = [e for e in trio_run if e["kind"] == events.MEMORY and e["data"]["kind"] == "chat"]
    assert said and len(chats) == 2 * len(said)  # both sides remember every line
    lines = {(e["agent"], e["data"]["to"], e["data"]["text"]) for e in said}
    for e in chats:
        line = events.said(e)
        assert (line.speaker, line.listener, line.line) in lines
        assert e["agent"] in (line.speaker, line.listener)
        assert e["data"]["text"].endswith(": " + line.line)
    assert all(events.said(e) is None for e in trio_run if e not in chats)


def test_the_golden_log_is_well_formed():
    for line in (ROOT / "tests" / "golden" / "cafe_trio_3h.jsonl").read_text(encoding="utf-8").splitlines():
        assert events.problems(json.loads(line)) == []


def test_data_orders_the_fields_and_leaves_out_absent_optional_ones():
    assert list(events.data(events.MOVE, tiles=3, arrive="09:00", area="cafe", to=[1, 2], from_=[0, 0])) == [
        "from",
        "to",
        "area",
        "tiles",
        "arrive",
    ]
    assert events.data(events.EVENT, what="a party", where="cafe", present=[], whisper=None) == {
        "what": "a party",
        "where": "cafe",
        "present": [],
    }
    assert events.data(events.ACTION, action="reading", area="home", object=None, until="10:00")["object"] is None


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"to": "bob"}, "needs its field 'text'"),
        ({"to": "bob", "text": "hi", "loud": True}, "no field 'loud'"),
        ({"to": "bob", "text": 3}, "'text' is str, not 3"),
        ({"to": True, "text": "hi"}, "'to' is str, not True"),
    ],
)
def test_data_refuses_missing_unknown_and_mistyped_fields(fields, message):
    with pytest.raises(ValueError, match=message):
        events.data(events.SAY, **fields)


def test_an_unknown_kind_is_refused_and_reported():
    with pytest.raises(ValueError, match="no event kind 'shout'"):
        events.data("shout", text="hi")
    assert events.problems({"kind": "shout", "data": {}}) == ["unknown kind 'shout'"]


def test_problems_names_what_is_wrong_with_a_line_read_back():
    e = {"kind": events.SAY, "data": {"text": "hi", "to": "bob"}}
    assert events.problems(e) == ["say: fields out of order: ['text', 'to']"]
    e = {"kind": events.TALK_END, "data": {"with": "bob", "lines": 1.5}}
    assert events.problems(e) == ["talk_end: missing 'reason'", "talk_end: 'lines' is int, not 1.5"]


def test_get_gives_an_absent_optional_field_its_empty_value_and_refuses_a_stranger():
    memory = {"kind": events.MEMORY, "data": {"id": 0, "kind": "seed", "importance": 3, "text": "x"}}
    whisper = {"kind": events.EVENT, "data": {"what": "a thought", "whisper": True}}
    assert events.get(memory, "links") == [] and events.get(memory, "speaker") is None
    assert events.get(whisper, "whisper") is True and events.get(whisper, "injected") is False
    with pytest.raises(KeyError):
        events.get(memory, "to")
    assert events.said(memory) is None
