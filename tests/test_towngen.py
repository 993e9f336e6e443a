"""Generated towns: valid, deterministic, growing with N, every place reachable, and runnable."""

from __future__ import annotations

import pytest

from smallville.cli import main
from smallville.scenario import load_scenario, validate_files
from smallville.town import generate_town, write_town
from smallville.world import Grid

from conftest import simulate


@pytest.fixture(scope="module")
def town40(tmp_path_factory):
    out = tmp_path_factory.mktemp("town40") / "town.yaml"
    write_town(generate_town(40, seed=3), out)
    return out


def test_generated_town_validates_and_loads(town40):
    assert validate_files([str(town40)]) == []
    assert (town40.parent / "agents").is_dir()
    scenario = load_scenario(town40)
    assert len(scenario.agents) == 40
    assert {p.name for p in scenario.probes} == {"fair", "election"}
    assert any(e.agent for e in scenario.events) and any(e.where for e in scenario.events)
    assert all(a.routine and a.relationships and a.memories for a in scenario.agents)


def test_same_seed_same_bytes_other_seed_other_town(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        write_town(generate_town(30, seed=5), tmp_path / folder / "town.yaml")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.yaml"))
    assert len(files) == 31
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    assert generate_town(30, seed=6).scenario != generate_town(30, seed=5).scenario


def test_the_town_grows_with_n():
    sizes = {}
    for n in (20, 200):
        town = generate_town(n, seed=0)
        rows = town.scenario.split("  grid: |\n")[1].split("\n  objects:")[0].splitlines()
        sizes[n] = (len(rows) * len(rows[0]), town.scenario.count("Cafe / cafe\""), len(town.agents))
    assert sizes[200][0] > 3 * sizes[20][0]
    assert sizes[200][1] > sizes[20][1] >= 1
    assert sizes[20][2] == 20 and sizes[200][2] == 200


def test_every_agents_places_exist_and_are_reachable(town40):
    scenario = load_scenario(town40)
    grid = Grid(scenario.map.grid, scenario.map.legend)
    for agent in scenario.agents:
        home = grid.tiles_in(agent.home)[0]
        for place in {agent.start_at or agent.home} | {r.where for r in agent.routine if r.where}:
            tiles = grid.tiles_in(place)
            assert tiles, (agent.id, place)
            assert grid.distance(home, tiles[-1]) is not None, (agent.id, place)
        assert set(agent.relationships) <= {a.id for a in scenario.agents}


def test_news_starts_with_one_person_each_and_a_small_town_runs(town40):
    sim = simulate(town40, 2 * 3600, embedder="lexical")
    assert all(len(ids) == 1 for ids in sim.probe_start.values())
    assert sim.counts["actions"] > 40 and sim.counts["memories"] > 40
    assert all(agent.plan for agent in sim.agents.values())


def test_cli_refuses_to_overwrite_unless_forced(tmp_path, capsys):
    out = tmp_path / "town.yaml"
    assert main(["town", "generate", "--agents", "5", "--seed", "1", str(out)]) == 0
    assert len(list((tmp_path / "agents").glob("*.yaml"))) == 5
    capsys.readouterr()
    assert main(["town", "generate", "--agents", "5", "--seed", "1", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--force" in err
    assert main(["town", "generate", "--agents", "5", "--seed", "1", "--force", str(out)]) == 0
    assert validate_files([str(out)]) == []


def _people_per_place(n: int) -> dict[str, float]:
    """Mean residents whose routine uses a place, by kind of place, in a town of `n`."""
    import yaml

    users: dict[str, set[str]] = {}
    for pid, text in generate_town(n, seed=0).agents.items():
        for step in yaml.safe_load(text)["routine"]:
            users.setdefault(step["where"], set()).add(pid)
    kinds = {"cafe": "Cafe / cafe", "pub": " Arms / pub", "shop": "Market / store", "park": " Park",
             "office": "Offices / office", "classroom": "College / classroom"}
    out = {}
    for kind, tail in kinds.items():
        counts = [len(ids) for place, ids in users.items() if tail in place and (kind != "park" or place.endswith(tail))]
        if counts:
            out[kind] = sum(counts) / len(counts)
    return out


def test_towns_are_as_crowded_at_every_size():
    """People per cafe, pub, shop, park, office and classroom stay within a band as N grows,
    so an agent's day (whom it meets) looks the same in a town of 25 and of 1,000."""
    towns = [_people_per_place(n) for n in (25, 250, 1000)]
    for kind in ("cafe", "pub", "shop", "park"):
        crowds = [town[kind] for town in towns]
        assert max(crowds) <= 2 * min(crowds), (kind, crowds)
    for kind in ("office", "classroom"):
        assert all(town[kind] <= 12 for town in towns if kind in town), kind
