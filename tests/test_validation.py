"""Broken scenario and agent files: every problem is reported with its exact FILE:LINE:COLUMN and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from smallville.errors import ScenarioError
from smallville.scenario import Problem, load_scenario, validate_files

# A valid town; tests break one thing at a time with str.replace. Line numbers on the right.
TOWN = """\
name: Test Town
start: 2023-02-13 07:00
map:
  legend:
    "#": wall
    ".": Town / street
    "c": Cafe / counter
  grid: |
    ##########
    #cccc....#
    #........#
    ##########
agents:
  - ann
  - bob
"""
#       1 name, 2 start, 3 map, 4 legend, 5-7 legend entries, 8 grid, 9-12 rows, 13 agents, 14 ann, 15 bob

ANN = "name: Ann\nhome: Cafe\n"
BOB = "name: Bob\nhome: Town / street\n"


@pytest.fixture
def town(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write scenarios/town.yaml and agents/*.yaml under tmp_path; return their problems as lines."""
    monkeypatch.chdir(tmp_path)

    def check(scenario: str = TOWN, **agents: str) -> list[str]:
        (tmp_path / "scenarios").mkdir(exist_ok=True)
        (tmp_path / "agents").mkdir(exist_ok=True)
        (tmp_path / "scenarios" / "town.yaml").write_text(scenario)
        for agent_id, text in {"ann": ANN, "bob": BOB, **agents}.items():
            (tmp_path / "agents" / f"{agent_id}.yaml").write_text(text)
        return [str(problem) for problem in validate_files(["scenarios/town.yaml"])]

    return check


def test_the_base_town_is_valid(town):
    assert town() == []


def test_yaml_syntax_error_is_one_problem_at_its_mark(town):
    assert town(TOWN.replace("  - bob", "  - [bob")) == [
        "scenarios/town.yaml:16:1: YAML syntax error: expected ',' or ']', but got '<stream end>'"
    ]


def test_empty_file_and_non_mapping_top(town):
    assert town("# only a comment\n") == ["scenarios/town.yaml:1:1: the file is empty: expected a mapping of keys"]
    assert town("- name\n- start\n") == ["scenarios/town.yaml:1:1: the file must be a mapping, got a list"]


def test_missing_required_keys_point_at_the_mapping_that_lacks_them(town):
    assert town(TOWN.replace("name: Test Town\n", "").split("agents:")[0]) == [
        "scenarios/town.yaml:1:1: missing required key 'name' (at name)",
        "scenarios/town.yaml:1:1: missing required key 'agents' (at agents)",
    ]
    assert town(TOWN.replace("  legend:", "  legnd:")) == [
        "scenarios/town.yaml:4:3: unknown key 'legnd' (did you mean 'legend'?) (at map.legnd)",
        "scenarios/town.yaml:4:3: missing required key 'legend' (at map.legend)",
    ]


def test_unknown_key_suggests_the_closest_known_one(town):
    assert town(TOWN.replace("start:", "strat:")) == [
        "scenarios/town.yaml:1:1: missing required key 'start' (at start)",
        "scenarios/town.yaml:2:1: unknown key 'strat' (did you mean 'start'?) (at strat)",
    ]
    assert town(TOWN + "colour: blue\n")[0].startswith(
        "scenarios/town.yaml:16:1: unknown key 'colour' (known keys: name, description, start,"
    )


def test_unknown_key_in_an_agent_override_is_reported_in_the_scenario(town):
    broken = TOWN.replace("  - bob", "  - id: bob\n    strat_at: Cafe")
    assert town(broken) == [
        "scenarios/town.yaml:16:5: unknown key 'strat_at' (did you mean 'start_at'?) (at agents[1].strat_at)"
    ]


@pytest.mark.parametrize(
    "where, line, column, key, expected",
    [
        (
            "  objects:\n    - name: cup\n      at: [1, 1]\n      colour: red\n",
            16,
            7,
            "map.objects[0].colour",
            "'colour'",
        ),
        (
            "events:\n  - at: 2023-02-13 08:00\n    what: rain\n    where: Town\n    whre: Cafe\n",
            20,
            5,
            "events[0].whre",
            "'whre' (did you mean 'where'?)",
        ),
        (
            "probes:\n  rain:\n    question: Rain?\n    match: [rain]\n    mach: [x]\n",
            20,
            5,
            "probes.rain.mach",
            "'mach' (did you mean 'match'?)",
        ),
        (
            "memories:\n  ann:\n    - text: hi\n      importance: 3\n      when: 2023-02-13 06:00\n",
            20,
            7,
            "memories.ann[0].when",
            "'when'",
        ),
    ],
)
def test_unknown_keys_in_objects_events_probes_and_memories(town, where, line, column, key, expected):
    scenario = TOWN.replace("agents:\n", where + "agents:\n") if where.startswith("  objects") else TOWN + where
    problems = town(scenario)
    assert len(problems) == 1
    assert problems[0].startswith(f"scenarios/town.yaml:{line}:{column}: unknown key {expected}")
    assert problems[0].endswith(f"(at {key})")


def test_unknown_key_in_a_routine_item_of_an_agent_file(town):
    ann = ANN + "routine:\n  - {at: '08:00', do: open up, wehre: Cafe}\n"
    assert town(ann=ann) == ["agents/ann.yaml:4:32: unknown key 'wehre' (did you mean 'where'?) (at routine[0].wehre)"]


def test_duplicate_key(town):
    assert town(TOWN.replace("start:", "name: Again\nstart:")) == [
        "scenarios/town.yaml:2:1: duplicate key 'name' (at name)"
    ]


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("  - ann\n  - bob\n", "  ann: {}\n", "14:3: agents must be a list, got a mapping (at agents)"),
        ("name: Test Town", "name: ''", "1:7: name must not be empty (at name)"),
        ("  legend:\n", "  legend: [wall]\n  old:\n", "4:11: legend must be a mapping, got a list (at map.legend)"),
        (
            "  grid: |",
            "  grid: [1, 2]\n  old: |",
            "8:9: grid must be rows of text (write `grid: |` then the rows), got a list",
        ),
    ],
)
def test_wrong_types(town, old, new, expected):
    assert town(TOWN.replace(old, new))[0].startswith(f"scenarios/town.yaml:{expected}")


def test_memory_index_must_be_exact_or_hnsw(town):
    assert town(TOWN + "memory:\n  index: hnsw\n") == []
    assert town(TOWN + "memory:\n  index: ivf\n") == [
        "scenarios/town.yaml:17:10: index must be one of exact, hnsw, got 'ivf' (at memory.index)"
    ]
    assert town(TOWN + "memory: {indx: hnsw}\n") == [
        "scenarios/town.yaml:16:10: unknown key 'indx' (did you mean 'index'?) (at memory.indx)"
    ]
    assert town(TOWN + "memory: hnsw\n") == [
        "scenarios/town.yaml:16:9: memory must be a mapping, got 'hnsw' (at memory)"
    ]


def test_wrong_types_in_an_agent_file(town):
    ann = "name: [Ann, Lee]\nage: thirty\nhome: Cafe\nrelationships: [bob]\n"
    assert town(ann=ann) == [
        "agents/ann.yaml:1:7: name must be text, got a list (at name)",
        "agents/ann.yaml:2:6: age must be a non-negative integer, got 'thirty' (at age)",
        "agents/ann.yaml:4:16: relationships must be a mapping, got a list (at relationships)",
    ]


@pytest.mark.parametrize(
    "old, new, expected",
    [
        (
            "start: 2023-02-13 07:00",
            "start: 2023-02-30 07:00",
            "2:8: start: bad date-time '2023-02-30 07:00': expected YYYY-MM-DD HH:MM (at start)",
        ),
        (
            "start: 2023-02-13 07:00",
            "start: 2023-02-13\nduration: 2 weeks",
            "2:8: start: bad date-time '2023-02-13': expected YYYY-MM-DD HH:MM (at start)",
        ),
        ("map:", "duration: 2 weeks\nmap:", "3:11: duration: bad duration '2 weeks'"),
        ("map:", "tick: 0m\nmap:", "3:7: tick: bad duration '0m'"),
        ("map:", "tick: 60\nmap:", "3:7: tick: bad duration '60'"),
    ],
)
def test_bad_durations_and_date_times(town, old, new, expected):
    assert town(TOWN.replace(old, new))[0].startswith(f"scenarios/town.yaml:{expected}")


def test_bad_clock_time_in_a_routine(town):
    ann = ANN + "routine:\n  - {at: 25:00, do: sleep}\n  - {at: 7am, do: wake}\n"
    assert town(ann=ann) == [
        "agents/ann.yaml:4:10: at: bad clock time '25:00': expected HH:MM between 00:00 and 23:59 (at routine[0].at)",
        "agents/ann.yaml:5:10: at: bad clock time '7am': expected HH:MM between 00:00 and 23:59 (at routine[1].at)",
    ]


@pytest.mark.parametrize(
    "old, new, expected",
    [
        (
            '    "c": Cafe / counter',
            '    "cc": Cafe / counter',
            "7:5: legend key 'cc' must be exactly one character (at map.legend.cc)",
        ),
        (
            '    "c": Cafe / counter',
            '    "c": ""',
            "7:10: legend value for 'c' is empty: expected 'wall' or an area path (at map.legend.c)",
        ),
        (
            '    "c": Cafe / counter',
            '    "c": Cafe /  / counter',
            "7:10: legend value 'Cafe /  / counter' for 'c' has an empty part in its area path (at map.legend.c)",
        ),
    ],
)
def test_legend_problems(town, old, new, expected):
    assert town(TOWN.replace(old, new))[0] == f"scenarios/town.yaml:{expected}"


def test_grid_rows_of_different_widths(town):
    assert town(TOWN.replace("    #........#", "    #.......#")) == [
        "scenarios/town.yaml:11:5: map.grid row 2 is 9 wide, expected 10 (at map.grid)"
    ]


def test_unknown_legend_character_points_into_the_grid(town):
    assert town(TOWN.replace("    #........#", "    #.x......#")) == [
        "scenarios/town.yaml:11:7: unknown legend character 'x' in map.grid row 2 (at map.grid)"
    ]
    assert town(TOWN.replace("    #........#", "    #.x..x...#")) == [
        "scenarios/town.yaml:11:7: unknown legend character 'x' in map.grid row 2 (and 1 more in the grid) (at map.grid)"
    ]


@pytest.mark.parametrize(
    "at, expected",
    [
        ("[12, 1]", "object 'cup' at [12, 1] is outside the 10x4 grid"),
        ("[1, -1]", "object 'cup' at [1, -1] is outside the 10x4 grid"),
        ("[0, 1]", "object 'cup' at [0, 1] stands on a wall tile"),
        ("[1]", "at must be a pair of integers [column, row], got [1]"),
        ("[a, 1]", "at must be a pair of integers [column, row], got [a, 1]"),
    ],
)
def test_object_positions(town, at, expected):
    scenario = TOWN.replace("agents:\n", f"  objects:\n    - name: cup\n      at: {at}\nagents:\n")
    assert town(scenario) == [f"scenarios/town.yaml:15:11: {expected} (at map.objects[0].at)"]


def test_agent_file_not_found_says_where_it_looked(town):
    assert town(TOWN.replace("  - bob", "  - carl")) == [
        "scenarios/town.yaml:15:5: agent file for 'carl' not found: "
        "looked for scenarios/agents/carl.yaml and agents/carl.yaml (at agents[1])"
    ]


def test_agent_id_must_be_lower_snake_case(town):
    assert town(TOWN.replace("  - bob", "  - Bob Smith")) == [
        "scenarios/town.yaml:15:5: agent id 'Bob Smith' is not lower_snake_case (like isabella_rodriguez) (at agents[1])"
    ]


def test_duplicate_agent_id(town):
    assert town(TOWN.replace("  - bob", "  - id: ann\n    age: 3")) == [
        "scenarios/town.yaml:15:9: agent 'ann' is listed twice in agents (first at agents[0]) (at agents[1].id)"
    ]


def test_places_must_be_areas_on_the_map_with_close_matches(town):
    ann = "name: Ann\nhome: Cafe / countr\nstart_at: Moon\nroutine:\n  - {at: '09:00', do: sweep, where: Town/strete}\n"
    assert town(ann=ann) == [
        "agents/ann.yaml:2:7: home 'Cafe / countr' is not an area on the map (close: 'Cafe / counter') (at home)",
        "agents/ann.yaml:3:11: start_at 'Moon' is not an area on the map (at start_at)",
        "agents/ann.yaml:5:37: where 'Town / strete' is not an area on the map (close: 'Town / street') (at routine[0].where)",
    ]


def test_an_agent_file_alone_is_checked_without_a_map(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agents").mkdir()
    Path("agents/tom.yaml").write_text("name: Tom\nhome: Nowhere /\n")
    Path("agents/ann.yaml").write_text("name: Ann\nhome: Moon\n")
    assert [str(p) for p in validate_files(["agents/tom.yaml", "agents/ann.yaml"])] == [
        "agents/tom.yaml:2:7: home area path 'Nowhere /' has an empty part (at home)"
    ]
    Path("agents/tom.yaml").write_text("# Tom\nname: Tom\n")
    assert [str(p) for p in validate_files(["agents/tom.yaml"])] == [
        "agents/tom.yaml:2:1: missing required key 'home' (at home)"
    ]


def test_importance_must_be_an_integer_from_1_to_10(town):
    ann = ANN + "memories:\n  - {text: fell over, importance: 11}\n  - {text: ate, importance: high}\n"
    assert town(ann=ann) == [
        "agents/ann.yaml:4:35: importance must be an integer from 1 to 10, got '11' (at memories[0].importance)",
        "agents/ann.yaml:5:29: importance must be an integer from 1 to 10, got 'high' (at memories[1].importance)",
    ]


def test_scenario_memories_must_name_agents_of_the_scenario(town):
    assert town(TOWN + "memories:\n  ann: [hello]\n  zoe: [hi]\n") == [
        "scenarios/town.yaml:18:3: memories name agent 'zoe', who is not in this scenario's agents (at memories.zoe)"
    ]


@pytest.mark.parametrize(
    "event, expected",
    [
        ("    what: rain\n", "17:5: event needs 'where' (an area on the map) or 'agent' (an agent id) (at events[0])"),
        (
            "    what: rain\n    where: Town\n    agent: ann\n",
            "17:5: event has both 'where' and 'agent': give exactly one (at events[0])",
        ),
        (
            "    what: a thought\n    agent: zoe\n",
            "19:12: event agent 'zoe' is not in this scenario's agents (at events[0].agent)",
        ),
        (
            "    what: rain\n    where: Cafe / kitchen\n",
            "19:12: where 'Cafe / kitchen' is not an area or area prefix on the map (close: 'Cafe / counter') (at events[0].where)",
        ),
    ],
)
def test_event_targets(town, event, expected):
    assert town(TOWN + "events:\n  - at: 2023-02-13 08:00\n" + event) == [f"scenarios/town.yaml:{expected}"]


def test_event_where_may_be_a_prefix_of_an_area(town):
    assert town(TOWN + "events:\n  - {at: 2023-02-13 08:00, what: rain, where: Cafe}\n") == []


def test_event_and_memory_times_must_be_date_times(town):
    scenario = (
        TOWN
        + "events:\n  - {at: 9am, what: rain, where: Town}\nmemories:\n  ann:\n    - {text: hi, at: '2023-13-01 08:00'}\n"
    )
    assert town(scenario) == [
        "scenarios/town.yaml:17:10: at: bad date-time '9am': expected YYYY-MM-DD HH:MM (at events[0].at)",
        "scenarios/town.yaml:20:22: at: bad date-time '2023-13-01 08:00': expected YYYY-MM-DD HH:MM (at memories.ann[0].at)",
    ]


def test_probe_needs_a_question_and_match_words(town):
    scenario = TOWN + "probes:\n  rain:\n    match: []\n  sun:\n    question: Sun?\n    match: [sun, [hot]]\n"
    assert town(scenario) == [
        "scenarios/town.yaml:18:5: missing required key 'question' (at probes.rain.question)",
        "scenarios/town.yaml:18:12: match must list at least one word (at probes.rain.match)",
        "scenarios/town.yaml:21:18: match[1] must be text, got a list (at probes.sun.match[1])",
    ]


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("map:", "seed: 1.5\nmap:", "3:7: seed must be an integer, got '1.5' (at seed)"),
        ("map:\n", "map:\n  vision: 0\n", "4:11: vision must be a positive integer, got '0' (at map.vision)"),
        ("map:\n", "map:\n  tile_time: fast\n", "4:14: tile_time: bad duration 'fast'"),
    ],
)
def test_seed_vision_and_tile_time(town, old, new, expected):
    assert town(TOWN.replace(old, new))[0].startswith(f"scenarios/town.yaml:{expected}")


def test_no_walkable_tile_and_no_agents(town):
    walls = TOWN.replace("#cccc....#", "##########").replace("#........#", "##########")
    assert town(walls.replace("  - ann\n  - bob\n", "  []\n")) == [
        "scenarios/town.yaml:9:5: map.grid has no walkable tile: every character is a wall (at map.grid)",
        "scenarios/town.yaml:14:3: agents must list at least one agent (at agents)",
    ]


def test_an_override_problem_is_reported_at_the_scenario(town):
    assert town(TOWN.replace("  - bob", "  - id: bob\n    age: old\n    home: Moon")) == [
        "scenarios/town.yaml:16:10: age must be a non-negative integer, got 'old' (at agents[1].age)",
        "scenarios/town.yaml:17:11: home 'Moon' is not an area on the map (at agents[1].home)",
    ]


def test_every_problem_in_every_file_is_reported_at_once(town):
    scenario = (
        TOWN.replace("start: 2023-02-13 07:00", "start: tomorrow")
        .replace("    #........#", "    #.......?#")
        .replace("  - bob", "  - bob\n  - carl")
        + "seeed: 3\n"
    )
    problems = town(scenario, bob="name: Bob\nhome: Pub\nage: -1\n")
    assert problems == [
        "scenarios/town.yaml:2:8: start: bad date-time 'tomorrow': expected YYYY-MM-DD HH:MM (at start)",
        "scenarios/town.yaml:11:13: unknown legend character '?' in map.grid row 2 (at map.grid)",
        "scenarios/town.yaml:16:5: agent file for 'carl' not found: "
        "looked for scenarios/agents/carl.yaml and agents/carl.yaml (at agents[2])",
        "scenarios/town.yaml:17:1: unknown key 'seeed' (did you mean 'seed'?) (at seeed)",
        "agents/bob.yaml:2:7: home 'Pub' is not an area on the map (at home)",
        "agents/bob.yaml:3:6: age must be a non-negative integer, got '-1' (at age)",
    ]
    with pytest.raises(ScenarioError) as raised:
        load_scenario("scenarios/town.yaml")
    assert [str(problem) for problem in raised.value.problems] == problems
    assert raised.value.exit_code == 2


def test_problem_text_omits_an_empty_key():
    assert str(Problem("a.yaml", 3, 4, "bad", "x.y")) == "a.yaml:3:4: bad (at x.y)"
    assert str(Problem("a.yaml", 1, 1, "empty", "")) == "a.yaml:1:1: empty"
