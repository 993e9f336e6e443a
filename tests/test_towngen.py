"""Generated towns: valid, deterministic, growing with N, every place reachable, and runnable."""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys

import pytest

from smallville.cli import main
from smallville.scenario import load_scenario, validate_files
from smallville.town import generate_town, write_town
from smallville.town.nearby import Nearby, Place
from smallville.world import Grid

from conftest import ROOT, simulate


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
        sizes[n] = (len(rows) * len(rows[0]), town.scenario.count('Cafe / cafe"'), len(town.agents))
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
    kinds = {
        "cafe": "Cafe / cafe",
        "pub": " Arms / pub",
        "shop": "Market / store",
        "park": " Park",
        "office": "Offices / office",
        "classroom": "College / classroom",
    }
    out = {}
    for kind, tail in kinds.items():
        counts = [
            len(ids) for place, ids in users.items() if tail in place and (kind != "park" or place.endswith(tail))
        ]
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


def _smallville(*args) -> subprocess.CompletedProcess:
    """The command line in a subprocess with a clean environment: no API key, no settings."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_town_of_20000_is_valid_with_distinct_readable_names(tmp_path):
    """Past the 7,189 plain names a town once hung on, households take double-barrelled
    surnames: every name differs, reads as a name, and a household shares its surname."""
    out = tmp_path / "town.yaml"
    made = _smallville("town", "generate", "--agents", 20000, "--seed", 4, out)
    assert made.returncode == 0, made.stderr
    checked = _smallville("validate", out)
    assert checked.returncode == 0 and checked.stdout.strip() == f"{out}: ok", checked.stderr
    names, homes = {}, {}
    for path in (tmp_path / "agents").glob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        names[path.stem] = re.search(r'^name: "(.*)"$', text, re.M).group(1)
        homes.setdefault(re.search(r'^home: "(.*)"$', text, re.M).group(1), []).append(names[path.stem])
    assert len(names) == len(set(names.values())) == 20000
    assert all(re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+(-[A-Z][a-z]+)?", name) for name in names.values())
    assert sum("-" in name for name in names.values()) >= 20000 - 7189
    for members in homes.values():
        assert len({name.split()[1] for name in members}) == 1, members
        assert len({name.split()[0] for name in members}) == len(members), members


@pytest.mark.parametrize("agents", [60000, 1000000])
def test_a_town_too_large_for_its_map_is_one_line_and_writes_nothing(tmp_path, agents):
    """Each room needs its own legend character; a town that needs more than there are is
    refused with the limit named (just past it after drawing up the town, far past it at once)."""
    result = _smallville("town", "generate", "--agents", agents, tmp_path / "town.yaml")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert f"{agents:,} residents" in result.stderr and "legend character" in result.stderr
    assert re.search(r"only [0-9,]+ characters can serve", result.stderr)
    assert list(tmp_path.iterdir()) == []


def _digest(n: int, seed: int) -> str:
    town = generate_town(n, seed)
    digest = hashlib.sha256(town.scenario.encode())
    for pid, text in sorted(town.agents.items()):
        digest.update(f"{pid}\n{text}".encode())
    return digest.hexdigest()[:16]


def test_towns_that_could_be_made_before_keep_their_files():
    """A town shared as (N, seed) stays the same town: these digests are of towns made by the
    generator before issue 39 (7,189 residents: the most it could name, after many redraws)."""
    assert _digest(40, 3) == "8a33bd8789bcd591"
    assert _digest(1000, 1) == "c579653700a5c082"
    assert _digest(7189, 2) == "89efd2c019198b0f"


def test_nearest_places_are_those_a_scan_of_every_place_finds():
    """The cell index finds what comparing every place would: the k nearest by |dx| + |dy|,
    ties by rank; and taking places with a number of uses each matches taking them by a scan."""
    rng = random.Random(7)
    places = [Place(i, rng.randrange(0, 300, 3), rng.randrange(0, 120, 8), f"p{i}") for i in range(400)]
    index = Nearby(places)
    for _ in range(300):
        x, y = rng.randrange(-20, 330), rng.randrange(0, 130)
        by_scan = sorted(places, key=lambda p: (abs(p.x - x) + abs(p.y - y), p.rank))
        assert index.nearest(x, y, 3) == [p.item for p in by_scan[:3]]
    uses = {p.rank: 1 + p.rank % 3 for p in places}
    left = dict(uses)
    jobs = Nearby(places, dict(uses))
    for _ in range(sum(uses.values())):
        x, y = rng.randrange(0, 300), rng.randrange(0, 120)
        best = min((p for p in places if left[p.rank]), key=lambda p: (abs(p.x - x) + abs(p.y - y), p.rank))
        left[best.rank] -= 1
        assert jobs.take(x, y) == best.item
    with pytest.raises(LookupError):
        jobs.take(0, 0)
