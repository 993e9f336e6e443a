"""Loading a valid scenario: typed values, defaults, agent lookup and overrides, and the hash."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest

import smallville.scenario as scenario_module
from smallville.scenario import (
    MapObject,
    Probe,
    RoutineItem,
    Scenario,
    SeedMemory,
    WorldEvent,
    load_scenario,
    validate_files,
)

TINY_TOWN = Path(__file__).parent / "fixtures" / "tiny_town"

MINIMAL = """\
name: Minimal
start: 2023-02-13 07:00
map:
  legend: {"#": wall, ".": Square}
  grid: |
    ###
    #.#
    ###
agents: [solo]
"""


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Scenario:
    """The fixture town, loaded by a path relative to its folder."""
    monkeypatch.chdir(TINY_TOWN)
    return load_scenario("scenarios/tiny.yaml")


@pytest.fixture
def town_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of the fixture town, as the current folder."""
    shutil.copytree(TINY_TOWN, tmp_path / "town")
    monkeypatch.chdir(tmp_path / "town")
    return tmp_path / "town"


def test_public_api():
    assert sorted(scenario_module.__all__) == sorted(
        [
            "load_scenario",
            "validate_files",
            "Scenario",
            "AgentSpec",
            "MapSpec",
            "MapObject",
            "RoutineItem",
            "SeedMemory",
            "WorldEvent",
            "Probe",
            "Problem",
        ]
    )


def test_top_level_values(tiny):
    assert tiny.path == "scenarios/tiny.yaml"
    assert tiny.name == "Tiny Town"
    assert tiny.description == "Two neighbours and a cafe."
    assert tiny.start == datetime(2023, 2, 13, 7, 0)
    assert tiny.duration == 86400.0
    assert tiny.tick == 600.0
    assert tiny.seed == 7
    assert tiny.brain == {"model": "ollama/llama3", "temperature": 0.7}


def test_map(tiny):
    assert tiny.map.tile_time == 10.0
    assert tiny.map.vision == 3
    assert tiny.map.legend["c"] == "Hobbs Cafe / cafe"
    assert list(tiny.map.legend) == ["#", ".", "c", "k", "h", "b", "p"]
    assert tiny.map.grid == ("##########", "#cccck...#", "#........#", "#hhh.bbpp#", "##########")
    assert (tiny.map.width, tiny.map.height) == (10, 5)
    assert tiny.map.objects == (MapObject("coffee machine", (5, 1), "brewing"), MapObject("bench", (7, 3), "idle"))
    assert tiny.map.area_at((5, 1)) == "Hobbs Cafe / kitchen"


def test_areas(tiny):
    assert tiny.areas() == (
        "Ann's house",
        "Ann's house / bedroom",
        "Bob's flat",
        "Hobbs Cafe",
        "Hobbs Cafe / cafe",
        "Hobbs Cafe / kitchen",
        "Johnson Park",
        "Tiny Town",
        "Tiny Town / street",
    )
    assert tiny.area_exists("Hobbs Cafe/ cafe")
    assert not tiny.area_exists("Hobbs Cafe / bar")
    assert tiny.is_area_prefix("Hobbs Cafe")
    assert not tiny.is_area_prefix("Hobbs")


def test_agents_in_file_order_with_their_files_values(tiny):
    ann, bob = tiny.agents
    assert (ann.id, ann.name, ann.age, ann.traits) == ("ann_lee", "Ann Lee", 30, "curious, kind")
    assert ann.backstory == "Ann bakes bread and knows everyone on her street."
    assert (ann.currently, ann.lifestyle) == ("", "")
    assert (ann.home, ann.start_at) == ("Ann's house", "Ann's house / bedroom")
    assert ann.relationships == {"bob_ray": "a neighbour who talks too much"}
    assert ann.source == "agents/ann_lee.yaml"
    assert tiny.agent("bob_ray") is bob


def test_routine_minutes_from_quoted_and_unquoted_clock_times(tiny):
    # "12:30" quoted; 06:00 unquoted (a string to YAML); 20:00 unquoted (sexagesimal 1200 to YAML 1.1).
    assert tiny.agent("ann_lee").routine == (
        RoutineItem(360, "wake up", None),
        RoutineItem(750, "lunch at the cafe", "Hobbs Cafe / cafe"),
        RoutineItem(1200, "walk in the park", "Johnson Park"),
    )


def test_seed_memories_are_timed_relative_to_the_start(tiny):
    assert tiny.agent("ann_lee").memories == (
        SeedMemory("Ann knows that Bob is repainting his flat.", None, None),
        SeedMemory("Ann lost her keys yesterday.", 3, -23 * 3600.0),
    )
    assert tiny.memories == {
        "ann_lee": (
            SeedMemory("Ann heard that the cafe opens early on Mondays.", None, None),
            SeedMemory("Ann promised to meet Bob at the park.", 7, -12 * 3600.0),
        )
    }


def test_scenario_overrides_replace_the_agent_files_values(tiny):
    bob = tiny.agent("bob_ray")
    assert bob.age == 41
    assert bob.start_at == "Hobbs Cafe / cafe"
    assert (bob.name, bob.home, bob.lifestyle) == ("Bob Ray", "Bob's flat", "sleeps late, works nights")


def test_events_sorted_by_time_and_probes_lower_cased(tiny):
    assert tiny.events == (
        WorldEvent(7200.0, "Bob decides to repaint his flat.", None, "bob_ray"),
        WorldEvent(18000.0, "A brass band starts playing in the park.", "Johnson Park", None),
    )
    assert tiny.probes == (Probe("band", "Did you hear the brass band?", ("brass", "band")),)


def test_defaults(town_copy):
    Path("scenarios/minimal.yaml").write_text(MINIMAL)
    Path("agents/solo.yaml").write_text("name: Solo\nhome: Square\n")
    minimal = load_scenario(Path("scenarios/minimal.yaml"))
    assert (minimal.duration, minimal.tick, minimal.seed, minimal.description) == (86400.0, 60.0, 0, "")
    assert (minimal.map.tile_time, minimal.map.vision, minimal.map.objects) == (10.0, 4, ())
    assert (minimal.memories, minimal.events, minimal.probes, minimal.brain) == ({}, (), (), {})
    solo = minimal.agents[0]
    assert (solo.age, solo.traits, solo.start_at, solo.routine, solo.relationships, solo.memories) == (
        None,
        "",
        "Square",
        (),
        {},
        (),
    )


def test_start_at_defaults_to_home(town_copy):
    Path("scenarios/minimal.yaml").write_text(
        MINIMAL.replace("[solo]", "[bob_ray]")
        .replace('".": Square', '".": Square, "b": "Bob\'s flat"')
        .replace("#.#", "#b#")
    )
    bob = load_scenario("scenarios/minimal.yaml").agents[0]
    assert (bob.home, bob.start_at, bob.age) == ("Bob's flat", "Bob's flat", 40)


def test_agents_are_looked_up_beside_the_scenario_before_its_parent(town_copy):
    assert load_scenario("scenarios/tiny.yaml").agent("ann_lee").source == "agents/ann_lee.yaml"
    (town_copy / "scenarios" / "agents").mkdir()
    shutil.copy("agents/ann_lee.yaml", "scenarios/agents/ann_lee.yaml")
    Path("scenarios/agents/ann_lee.yaml").write_text(
        Path("agents/ann_lee.yaml").read_text().replace("name: Ann Lee", "name: Ann Local")
    )
    ann = load_scenario("scenarios/tiny.yaml").agent("ann_lee")
    assert (ann.name, ann.source) == ("Ann Local", "scenarios/agents/ann_lee.yaml")
    assert load_scenario("scenarios/tiny.yaml").agent("bob_ray").source == "agents/bob_ray.yaml"


def test_sha256_covers_the_scenario_and_its_agent_files(town_copy):
    first = load_scenario("scenarios/tiny.yaml").sha256
    assert len(first) == 64
    assert load_scenario("scenarios/tiny.yaml").sha256 == first
    Path("agents/bob_ray.yaml").write_text(Path("agents/bob_ray.yaml").read_text() + "currently: painting\n")
    second = load_scenario("scenarios/tiny.yaml").sha256
    assert second != first
    Path("scenarios/tiny.yaml").write_text(Path("scenarios/tiny.yaml").read_text() + "\n# a comment\n")
    assert load_scenario("scenarios/tiny.yaml").sha256 not in (first, second)


def test_validate_files_accepts_the_fixture_scenario_and_agent_files(monkeypatch):
    monkeypatch.chdir(TINY_TOWN)
    assert validate_files(["scenarios/tiny.yaml", "agents/ann_lee.yaml", "agents/bob_ray.yaml"]) == []


def test_an_agent_file_is_recognised_by_its_keys_outside_agents(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("person.yaml").write_text("name: Pat\nhome: Somewhere\nage: old\n")
    assert [str(p) for p in validate_files(["person.yaml"])] == [
        "person.yaml:3:6: age must be a non-negative integer, got 'old' (at age)"
    ]
