"""Which index a run's memory streams use: a scenario's `memory:` block, a SimConfig, or an
experiment condition; recorded in the manifest's config and kept on resume."""

from __future__ import annotations

import json
import shutil

import pytest

from smallville.cli import main
from smallville.memory import INDEXES
from smallville.run import resume_run, run_scenario
from smallville.scenario import load_scenario
from smallville.scenario.model import MEMORY_INDEXES
from smallville.sim.engine import SimConfig

from conftest import CAFE_TRIO, ROOT


def cafe_trio(tmp_path, memory: str = "") -> str:
    """A copy of Cafe Trio (with the agents it needs) whose file ends with `memory`."""
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    shutil.copytree(ROOT / "agents", tmp_path / "agents", dirs_exist_ok=True)
    path = tmp_path / "scenarios" / "cafe_trio.yaml"
    path.write_text(CAFE_TRIO.read_text() + memory)
    return str(path)


def indexes(result) -> set[str]:
    return {agent.stream.index_kind for agent in result.simulation.agents.values()}


def saved_indexes(run_dir) -> list[str]:
    """The index the memory streams of each of a run's checkpoints were saved with."""
    return [json.loads(p.read_text())["memory"]["index"] for p in sorted((run_dir / "checkpoints").glob("*/head.json"))]


def test_the_scenario_reader_knows_the_streams_indexes():
    assert MEMORY_INDEXES == INDEXES


def test_a_scenario_choosing_hnsw_runs_with_it_and_a_resumed_run_keeps_it(tmp_path):
    scenario = load_scenario(cafe_trio(tmp_path, "memory:\n  index: hnsw\n"))
    assert scenario.memory_index == "hnsw"
    assert load_scenario(CAFE_TRIO).memory_index == "exact"
    whole = run_scenario(scenario, runs_dir=tmp_path / "a", duration=4 * 3600, embedder="lexical")
    assert whole.manifest.status == "completed" and indexes(whole) == {"hnsw"}
    manifest = json.loads((whole.path / "manifest.json").read_text())
    assert manifest["config"]["index"] == "hnsw"
    assert set(saved_indexes(whole.path)) == {"hnsw"}

    half = run_scenario(scenario, runs_dir=tmp_path / "b", duration=2 * 3600, embedder="lexical")
    resumed = resume_run(half.path, extend=2 * 3600)
    assert resumed.manifest.config["index"] == "hnsw" and indexes(resumed) == {"hnsw"}
    assert (whole.path / "events.jsonl").read_bytes() == (half.path / "events.jsonl").read_bytes()


def test_a_simconfig_index_overrides_the_scenarios(tmp_path):
    scenario = load_scenario(cafe_trio(tmp_path, "memory:\n  index: hnsw\n"))
    result = run_scenario(
        scenario, runs_dir=tmp_path, duration=3600, embedder="lexical", config=SimConfig(index="exact")
    )
    assert result.manifest.config["index"] == "exact" and indexes(result) == {"exact"}
    plain = run_scenario(
        load_scenario(CAFE_TRIO), runs_dir=tmp_path, duration=3600, embedder="lexical", config=SimConfig(index="hnsw")
    )
    assert plain.manifest.config["index"] == "hnsw" and indexes(plain) == {"hnsw"}
    with pytest.raises(ValueError, match="index must be one of exact, hnsw, got 'ivf'"):
        SimConfig(index="ivf")


def test_a_bad_index_in_a_scenario_is_one_line(tmp_path, capsys):
    path = cafe_trio(tmp_path, "memory:\n  index: ivf\n")
    line = len(CAFE_TRIO.read_text().splitlines()) + 2
    assert main(["run", path, "--for", "1h", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:{line}:10: index must be one of exact, hnsw, got 'ivf' (at memory.index)"
    ]
    assert not (tmp_path / "runs").exists()


EXPERIMENT = """\
name: indexes
scenario: {scenario}
duration: 1h
seeds: [1]
embedder: lexical
conditions:
  exact: {{}}
  approx: {{index: {index}}}
"""


def test_an_experiment_condition_chooses_hnsw(tmp_path):
    from smallville.experiment import load_experiment, run_experiment

    path = tmp_path / "indexes.yaml"
    path.write_text(EXPERIMENT.format(scenario=CAFE_TRIO, index="hnsw"))
    result = run_experiment(load_experiment(path), workers=1, out=tmp_path / "out", quiet=True)
    assert result.ok and sorted(result.ran) == ["approx-seed1", "exact-seed1"]
    config = {
        slot: json.loads((tmp_path / "out" / slot / "manifest.json").read_text())["config"] for slot in result.ran
    }
    assert (config["exact-seed1"]["index"], config["approx-seed1"]["index"]) == ("exact", "hnsw")
    assert set(saved_indexes(tmp_path / "out" / "approx-seed1")) == {"hnsw"}
    assert set(saved_indexes(tmp_path / "out" / "exact-seed1")) == {"exact"}


def test_a_bad_index_in_an_experiment_condition_is_one_line(tmp_path, capsys):
    path = tmp_path / "indexes.yaml"
    path.write_text(EXPERIMENT.format(scenario=CAFE_TRIO, index="ivf"))
    assert main(["experiment", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"smallville: error: {path}: condition 'approx': index must be one of exact, hnsw, got 'ivf'"
    ]
