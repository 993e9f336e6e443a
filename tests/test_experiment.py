"""Experiments: a tiny grid of runs in a process pool, results, summary, skip on re-run."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smallville.experiment import ExperimentError, load_experiment, load_results, run_experiment

ROOT = Path(__file__).resolve().parent.parent

TINY = """\
name: tiny
scenario: {scenario}
duration: 1h
seeds: [1, 2]
embedder: lexical
conditions:
  full: {{}}
  bare:
    ablate: [memory, reflection, planning, sharing]
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.format(scenario=ROOT / "scenarios" / "cafe_trio.yaml"))
    return load_experiment(path)


def test_a_tiny_experiment_runs_gathers_and_skips_on_rerun(tiny, tmp_path):
    out = tmp_path / "out"
    result = run_experiment(tiny, workers=2, out=out, quiet=True)
    assert result.ok and sorted(result.ran) == ["bare-seed1", "bare-seed2", "full-seed1", "full-seed2"]
    for slot in result.ran:
        manifest = json.loads((out / slot / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["run_id"] == slot
        assert manifest["experiment"]["condition"] == slot.split("-")[0]
        assert (out / slot / "events.jsonl").is_file()
    bare = json.loads((out / "bare-seed1" / "manifest.json").read_text())["config"]
    assert (bare["retrieval"], bare["reflection"], bare["planning"], bare["sharing"]) == (False,) * 4
    full = json.loads((out / "full-seed1" / "manifest.json").read_text())["config"]
    assert (full["retrieval"], full["reflection"], full["planning"], full["sharing"]) == (True,) * 4

    rows = list(csv.DictReader(open(out / "results.csv")))
    assert [(r["condition"], r["seed"]) for r in rows] == [("full", "1"), ("full", "2"), ("bare", "1"), ("bare", "2")]
    assert {
        "party_known_start",
        "party_known_end",
        "network_density_end",
        "conversations",
        "replans",
        "memories_per_agent",
        "requests",
    } <= set(rows[0])
    assert all(r["party_known_start"] == "1" for r in rows)
    summary = list(csv.DictReader(open(out / "summary.csv")))
    assert [s["condition"] for s in summary] == ["full", "bare"]
    full_rows = [r for r in rows if r["condition"] == "full"]
    mean = sum(float(r["memories"]) for r in full_rows) / 2
    assert float(summary[0]["memories_mean"]) == pytest.approx(mean)
    assert "memories_std" in summary[0]
    # without planning there is one action per routine block: far fewer actions and requests
    by = {s["condition"]: s for s in summary}
    assert float(by["bare"]["actions_mean"]) < float(by["full"]["actions_mean"])
    assert float(by["bare"]["replans_mean"]) == 0

    loaded = load_results(out)
    assert loaded[0]["condition"] == "full" and loaded[0]["seed"] == 1
    assert isinstance(loaded[0]["memories"], int)

    # re-running skips every completed run, and a lost run is redone
    before = (out / "full-seed1" / "events.jsonl").stat().st_mtime_ns
    again = run_experiment(tiny, workers=2, out=out, quiet=True)
    assert again.ran == [] and len(again.skipped) == 4
    assert (out / "full-seed1" / "events.jsonl").stat().st_mtime_ns == before
    manifest = json.loads((out / "bare-seed2" / "manifest.json").read_text())
    manifest["status"] = "interrupted"
    (out / "bare-seed2" / "manifest.json").write_text(json.dumps(manifest))
    third = run_experiment(tiny, workers=1, out=out, quiet=True)
    assert third.ran == ["bare-seed2"] and len(third.skipped) == 3
    assert len(load_results(out)) == 4
    # a condition whose settings changed is redone
    tiny.conditions[0].knobs = {"reflection_threshold": 100}
    fourth = run_experiment(tiny, workers=1, out=out, quiet=True)
    assert sorted(fourth.ran) == ["full-seed1", "full-seed2"] and len(fourth.skipped) == 2


def test_experiment_files_are_checked(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.format(scenario=ROOT / "scenarios" / "cafe_trio.yaml").replace("memory, ", "memry, "))
    with pytest.raises(ExperimentError, match="cannot ablate 'memry'"):
        load_experiment(bad)
    bad.write_text("scenario: nowhere.yaml\n")
    with pytest.raises(ExperimentError, match="not found"):
        load_experiment(bad)
    bad.write_text(f"scenario: {ROOT / 'scenarios' / 'cafe_trio.yaml'}\nconditions:\n  a: {{decy: 0.9}}\n")
    with pytest.raises(ExperimentError, match="unknown knob 'decy'"):
        load_experiment(bad)


def test_public_api_and_plots_need_no_experiment():
    """The package's names stay importable from smallville.experiment, and smallville.plots
    imports nothing of it (they used to import each other)."""
    import ast

    import smallville.experiment as experiment
    import smallville.plots as plots

    assert sorted(experiment.__all__) == sorted(
        [
            "ABLATIONS",
            "FINISHED",
            "MATH_THREADS",
            "SUMMARY_COLUMNS",
            "Condition",
            "Experiment",
            "ExperimentError",
            "ExperimentResult",
            "Rows",
            "compare_pairs",
            "gather",
            "is_completed",
            "load_experiment",
            "load_results",
            "plot_experiment",
            "print_summary",
            "run_experiment",
            "run_status",
            "slot_name",
            "summarize",
        ]
    )
    assert all(hasattr(experiment, name) for name in experiment.__all__)
    tree = ast.parse(Path(plots.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "smallville.metrics" in imported and not [m for m in imported if m.startswith("smallville.experiment")]


def test_the_paper_experiment_names_the_paper_ablations():
    exp = load_experiment(ROOT / "experiments" / "paper.yaml")
    assert exp.duration == 2 * 86400 and exp.seeds == [1, 2, 3, 4, 5]
    assert Path(exp.scenario).name == "the_ville.yaml"
    knobs = {c.name: c.knobs for c in exp.conditions}
    assert knobs == {
        "full": {},
        "no_reflection": {"reflection": False},
        "no_reflection_no_planning": {"reflection": False, "planning": False},
        "no_memory_no_reflection_no_planning": {"retrieval": False, "reflection": False, "planning": False},
    }
    assert all(c.brain is None for c in exp.conditions)  # offline
    grid = load_experiment(ROOT / "experiments" / "quick.yaml")
    assert len(grid.conditions) == 4


def test_experiment_command(tiny, tmp_path, capsys):
    from smallville.cli import main

    out = tmp_path / "cli"
    assert main(["experiment", str(tiny.source), "--out", str(out), "--workers", "1", "--quiet"]) == 0
    assert len(load_results(out)) == 4
    assert main(["experiment", str(tmp_path / "missing.yaml")]) == 2


def test_experiment_takes_runs_dir_as_every_command_does(tmp_path):
    """`--runs-dir` puts an experiment's runs and tables where it says, as for `run`; `--out`
    is the same flag; on the command line, in a clean environment with no key."""
    path = tmp_path / "one.yaml"
    path.write_text(
        TINY.format(scenario=ROOT / "scenarios" / "cafe_trio.yaml")
        .replace("seeds: [1, 2]", "seeds: [1]")
        .replace("duration: 1h", "duration: 10m")
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for flag in ("--runs-dir", "--out"):
        where = tmp_path / flag.strip("-")
        done = subprocess.run(
            [sys.executable, "-m", "smallville", "experiment", str(path), flag, str(where), "--quiet"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in where.iterdir() if (p / "manifest.json").is_file()) == [
            "bare-seed1",
            "full-seed1",
        ]
        assert len(load_results(where)) == 2
    assert not (tmp_path / "runs").exists()


def test_experiment_plots_compare_the_conditions(tiny, tmp_path, capsys):
    from smallville.cli import main

    out = tmp_path / "plotted"
    assert main(["experiment", str(tiny.source), "--out", str(out), "--workers", "2", "--quiet", "--plot"]) == 0
    names = ("summary.png", "diffusion.png", "attendance.png")
    assert capsys.readouterr().out.strip() == "wrote " + ", ".join(str(out / name) for name in names)
    for name in names:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert 400 <= width <= 3000 and 300 <= height <= 2000


def test_optional_extras_say_what_to_install(tiny, tmp_path, monkeypatch):
    """The test extra installs matplotlib and ray; without them (as after `pip install
    smallville`), plots and --executor ray say what to install."""
    import sys

    from smallville.plots import plot_summary

    summary = [{"condition": "full", "runs": 2, "party_known_end_mean": 3.0, "party_known_end_std": 0.5}]
    assert plot_summary(summary, tmp_path / "summary.png").read_bytes()[:4] == b"\x89PNG"
    for name in [n for n in sys.modules if n.split(".")[0] in ("matplotlib", "ray")] + ["matplotlib", "ray"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"smallville\[plot\]"):
        plot_summary(summary, tmp_path / "none.png")
    with pytest.raises(ExperimentError, match=r"smallville\[ray\]"):
        run_experiment(tiny, workers=2, out=tmp_path / "ray", quiet=True, executor="ray")
    assert not (tmp_path / "none.png").exists()


def test_a_ray_address_where_no_head_answers_is_a_user_error(tiny, tmp_path):
    import socket

    with socket.socket() as s:  # a local port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ExperimentError, match=f"no Ray head answers at 127.0.0.1:{port}.*ray start --head"):
        run_experiment(tiny, out=tmp_path / "out", quiet=True, executor="ray", address=f"127.0.0.1:{port}")
    with pytest.raises(ExperimentError, match="add --executor ray"):
        run_experiment(tiny, out=tmp_path / "out", quiet=True, address=f"127.0.0.1:{port}")


def metric_rows(out: Path) -> list[dict]:
    """results.csv without the wall-clock column: what must not depend on where runs ran."""
    return [{k: v for k, v in row.items() if k != "wall_seconds"} for row in load_results(out)]


def test_ray_tasks_give_the_process_pool_results_and_resume_the_same(tmp_path, capfd, monkeypatch):
    import logging

    import ray

    from smallville.cli import main

    path = tmp_path / "one.yaml"
    path.write_text(TINY.format(scenario=ROOT / "scenarios" / "cafe_trio.yaml").replace("[1, 2]", "[1]"))
    one = load_experiment(path)
    pool = run_experiment(one, workers=2, out=tmp_path / "pool", quiet=True)
    assert pool.ok and sorted(pool.ran) == ["bare-seed1", "full-seed1"]
    # Starting a local Ray sets RAY_AUTH_MODE in this process (and warns the first time): start
    # without it, as on a fresh machine, and give the environment back as it was afterwards.
    monkeypatch.setenv("RAY_AUTH_MODE", "unset")
    monkeypatch.delenv("RAY_AUTH_MODE")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # a local Ray, not a cluster named in the environment

    # the command starts its own local Ray, quietly, and stops it
    capfd.readouterr()
    assert main(["experiment", str(path), "--executor", "ray", "--workers", "2", "--out", str(tmp_path / "ray")]) == 0
    assert not ray.is_initialized()
    captured = capfd.readouterr()
    said = " ".join(captured.err.split())  # the console wraps at 80 columns
    assert "0 done already, 2 to run as Ray tasks" in said and "completed bare-seed1" in said
    assert not [noise for noise in ("INFO", "WARNING", "(raylet", "pid=") if noise in captured.out + captured.err]
    assert metric_rows(tmp_path / "ray") == metric_rows(tmp_path / "pool")
    for slot in pool.ran:  # runs are deterministic wherever they ran
        assert (tmp_path / "ray" / slot / "events.jsonl").read_bytes() == (
            tmp_path / "pool" / slot / "events.jsonl"
        ).read_bytes()
    assert list((tmp_path / "ray" / ".partial").iterdir()) == []

    # resumable as with the pool, on a Ray the caller started (and which is left running)
    shutil.rmtree(tmp_path / "ray" / "bare-seed1")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        again = run_experiment(one, workers=2, out=tmp_path / "ray", quiet=True, executor="ray")
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert again.ok and again.ran == ["bare-seed1"] and again.skipped == ["full-seed1"]
    assert metric_rows(tmp_path / "ray") == metric_rows(tmp_path / "pool")


def test_an_ablated_run_resumes_with_its_switches(tmp_path):
    from smallville import run as continuation
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario
    from smallville.sim.engine import SimConfig

    scenario = load_scenario(str(ROOT / "scenarios" / "cafe_trio.yaml"))
    config = SimConfig(reflection=False, planning=False, sharing=False)
    whole = run_scenario(scenario, runs_dir=tmp_path / "a", duration=4 * 3600, embedder="lexical", config=config)
    half = run_scenario(scenario, runs_dir=tmp_path / "b", duration=2 * 3600, embedder="lexical", config=config)
    resumed = continuation.resume_run(half.path, extend=2 * 3600)
    assert resumed.manifest.config["planning"] is False
    assert (whole.path / "events.jsonl").read_bytes() == (half.path / "events.jsonl").read_bytes()
    kinds = {json.loads(line)["kind"] for line in open(whole.path / "events.jsonl")}
    assert "reflect" not in kinds and "replan" not in kinds
