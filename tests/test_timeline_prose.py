"""The text replay reads as prose: where agents start, where they walk (not a walk 'to' the
room they are in), and no event shown as a raw dict."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from smallville.replay.record import RunRecord, load_run
from smallville.replay.timeline import describe, timeline

from conftest import ROOT

PEOPLE = SimpleNamespace(
    agents=[SimpleNamespace(id="ann_lee", name="Ann Lee"), SimpleNamespace(id="bob_ray", name="Bob Ray")]
)


def event(t: int, kind: str, agent: str | None, data: dict) -> dict:
    return {"t": t, "time": f"2023-02-13 07:{t // 60:02d}:00", "kind": kind, "agent": agent, "data": data}


def walk(t: int, agent: str, area: str, tiles: int = 3) -> dict:
    return event(
        t,
        "move",
        agent,
        {"from": [1, 1], "to": [2, 2], "area": area, "tiles": tiles, "arrive": f"07:{t // 60 + 1:02d}"},
    )


EVENTS = [
    event(0, "spawn", "ann_lee", {"tile": [1, 1], "area": "Ann's house / bedroom"}),
    event(0, "spawn", "bob_ray", {"tile": [9, 9], "area": "Bob's flat / kitchen"}),
    walk(60, "ann_lee", "Ann's house / bedroom", tiles=2),
    walk(120, "ann_lee", "Ann's house / kitchen"),
    event(
        180,
        "action",
        "ann_lee",
        {
            "action": "making tea (using the kettle)",
            "area": "Ann's house / kitchen",
            "object": "kettle",
            "until": "07:10",
        },
    ),
    walk(240, "bob_ray", "Bob's flat / kitchen"),
    walk(300, "ann_lee", "Ann's house / kitchen", tiles=1),
    event(360, "brain_fallback", "bob_ray", {"kind": "speak", "key": "abc", "error": "timeout"}),
    event(420, "brain_refused", "ann_lee", {"kind": "react", "ceiling": 60}),
    event(
        480,
        "recall",
        "ann_lee",
        {
            "req": 7,
            "request": "speak",
            "key": "abc",
            "queries": [["Bob Ray", [[4, 2.1, 1.0, 0.6, 0.5], [2, 1.5, 0.5, 0.5, 0.5]]]],
        },
    ),
]
RUN = RunRecord(Path("run"), {"agents": ["ann_lee", "bob_ray"]}, EVENTS, PEOPLE)


def test_the_timeline_reads_as_prose():
    assert list(timeline(RUN)) == [
        "2023-02-13 07:00  Ann Lee starts in Ann's house / bedroom",
        "2023-02-13 07:00  Bob Ray starts in Bob's flat / kitchen",
        "2023-02-13 07:02  Ann Lee walks to Ann's house / kitchen (3 tiles, arrives 07:03)",
        "2023-02-13 07:03  Ann Lee is making tea (using the kettle) in Ann's house / kitchen until 07:10",
        "2023-02-13 07:06  the model failed Bob Ray's speak request (timeout); the safe default was used",
        "2023-02-13 07:07  Ann Lee's react request was not sent: over 60 requests this simulated hour",
    ]


def test_a_walk_within_a_room_shows_with_all_only_and_says_so():
    lines = list(timeline(RUN, everything=True))
    assert "2023-02-13 07:01  Ann Lee moves within Ann's house / bedroom (2 tiles, arrives 07:02)" in lines
    assert "2023-02-13 07:04  Bob Ray moves within Bob's flat / kitchen (3 tiles, arrives 07:05)" in lines
    assert "2023-02-13 07:05  Ann Lee moves within Ann's house / kitchen (1 tile, arrives 07:06)" in lines
    assert not [line for line in lines if " walks to " in line and "07:02  Ann Lee" not in line]


def test_what_a_request_recalled_shows_with_all_only_as_the_memories_it_names():
    assert not [line for line in timeline(RUN) if "recall" in line]
    assert "2023-02-13 07:08  Ann Lee recalls for speak (request 7): #4, #2" in timeline(RUN, everything=True)


def test_where_an_agent_is_is_known_from_before_the_window_and_the_filter():
    """From 07:04, for Ann only: Ann's walk at 07:05 is still within the kitchen she reached at 07:02."""
    assert (
        list(timeline(RUN, agent="ann_lee", since=240, everything=True))[0]
        == "2023-02-13 07:05  Ann Lee moves within Ann's house / kitchen (1 tile, arrives 07:06)"
    )


def test_an_unknown_kind_of_event_is_still_a_sentence():
    line = describe(event(0, "waves", "ann_lee", {"to": "bob_ray", "times": 2}), {"ann_lee": "Ann Lee"})
    assert line == "Ann Lee waves: to bob_ray, times 2"


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    runs = tmp_path_factory.mktemp("runs")
    scenario = load_scenario(ROOT / "scenarios" / "cafe_trio.yaml")
    return load_run(run_scenario(scenario, runs_dir=runs, duration=4 * 3600, embedder="lexical").path)


def test_no_event_of_a_real_run_is_shown_as_a_dict(trio):
    lines = list(timeline(trio, everything=True))
    assert len(lines) == len(trio.events)
    assert not [line for line in lines if "{" in line or "': " in line or "[[" in line]
    where: dict[str, str] = {}
    across = within = 0
    for e in trio.events:
        if e["kind"] == "move":
            if where.get(e["agent"]) == e["data"]["area"]:
                within += 1
            else:
                across += 1
        if e["kind"] in ("spawn", "move"):
            where[e["agent"]] = e["data"]["area"]
    assert across and within
    assert sum(" walks to " in line for line in lines) == across
    assert sum(" moves within " in line for line in lines) == within
    assert sum(" walks to " in line or " moves within " in line for line in timeline(trio)) == across
