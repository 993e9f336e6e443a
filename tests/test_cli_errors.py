"""Exit codes as the README gives them: bad input from the user exits 2, a failure of the run
or the machine exits 1; either way one line, naming what and where, and no traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from smallville.cli import main
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import ROOT

TINY = ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Two simulated hours of the tiny town (ann_lee and bob_ray), from 2023-02-13 07:00."""
    runs = tmp_path_factory.mktemp("runs")
    return run_scenario(load_scenario(TINY), runs_dir=runs, duration=2 * 3600, embedder="lexical").path


def smallville(*args, cwd=ROOT, env=None):
    """The command line as a user runs it: its own process, a clean environment."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def exit_of(argv: list, capsys) -> tuple[int, str]:
    """The exit status and stderr of `smallville ARGV`, run in this process."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    return code, capsys.readouterr().err


# (arguments, the start of the one line on stderr); RUN is the tiny run, NOWHERE a missing folder
BAD_INPUT = [
    (["run", "missing.yaml"], "missing.yaml: cannot read file: No such file or directory"),
    (["run", TINY, "--replay-from", "NOWHERE"], "smallville: error: --replay-from: NOWHERE is not a run directory"),
    (["run", TINY, "--seed", "seven"], "smallville run: error: argument --seed: invalid int value: 'seven'"),
    (["run", TINY, "--replay-fallthrough"], "smallville: error: --replay-fallthrough goes with --replay-from"),
    (["estimate", TINY, "--brain", "offline"], "smallville: error: estimate needs a model"),
    (
        ["estimate", TINY, "--brain", "openai/gpt-4o-mini", "--from", "RUN"],
        "smallville: error: --from RUN: not a run on",
    ),
    (["check-model", "offline", "--scenario", TINY], "smallville: error: check-model needs a model"),
    (
        ["check-model", "openai/gpt-4o-mini", "--scenario", "missing.yaml"],
        "smallville: error: --scenario missing.yaml: no such file",
    ),
    (["resume", "NOWHERE"], "smallville: error: NOWHERE is not a run directory: it has no manifest.json"),
    (["resume", "RUN"], "smallville: error: RUN has completed; to go on, give how much longer"),
    (["fork", "RUN", "--at", "Feb 14"], "smallville: error: --at: bad date-time 'Feb 14'"),
    (
        ["fork", "RUN", "--at", "2023-02-14 09:00"],
        "smallville: error: cannot fork RUN at 2023-02-14 09:00:00: it covers",
    ),
    (["fork", "RUN", "--at", "10:00"], "smallville: error: cannot fork RUN at 2023-02-13 10:00:00: it covers"),
    (
        ["fork", "RUN", "--at", "2023-02-13 08:00", "--inject", "nobody", "hi"],
        "smallville: error: --inject: unknown agent 'nobody' in RUN: it has ann_lee, bob_ray",
    ),
    (
        ["inspect", "RUN", "--agent", "nobody"],
        "smallville: error: unknown agent 'nobody' in RUN: it has ann_lee, bob_ray",
    ),
    (["inspect", "RUN", "--at", "Feb 14"], "smallville: error: --at: bad date-time 'Feb 14'"),
    (
        ["inspect", "RUN", "--at", "2023-02-13 10:00"],
        "smallville: error: 2023-02-13 10:00:00 is outside the time RUN covers: 2023-02-13 07:00:00 to 2023-02-13 09:00:00",
    ),
    (["interview", "RUN", "nobody", "hi?"], "smallville: error: unknown agent 'nobody' in RUN"),
    (
        ["interview", "RUN", "ann_lee", "hi?", "--at", "2023-02-12 08:00"],
        "smallville: error: 2023-02-12 08:00:00 is outside the time RUN covers",
    ),
    (["verify", "NOWHERE"], "smallville: error: NOWHERE is not a run directory: it has no manifest.json"),
    (["validate", "missing.yaml"], "missing.yaml: cannot read file: No such file or directory"),
    (["replay", "RUN", "--agent", "nobody"], "smallville: error: unknown agent 'nobody' in RUN"),
    (["replay", "RUN", "--at", "2023-02-20 09:00"], "smallville: error: --at 2023-02-20 09:00: RUN covers"),
    (["replay", "RUN", "--until", "noon"], "smallville: error: --until: bad date-time 'noon'"),
    (["replay", "RUN", "--at", "2023-02-13 08:00", "--until", "2023-02-13 07:30"], "smallville: error: --until 2023"),
    (["replay", "RUN", "--format", "live"], "smallville: error: --format live needs a terminal"),
    (["metrics", "NOWHERE"], "smallville: error: NOWHERE is not a run directory"),
    (
        ["why", "RUN", "--agent", "nobody", "--at", "2023-02-13 08:00"],
        "smallville: error: unknown agent 'nobody' in RUN",
    ),
    (["why", "RUN", "--agent", "ann_lee", "--at", "Feb 14"], "smallville: error: --at: bad date-time 'Feb 14'"),
    (["evaluate", "NOWHERE"], "smallville: error: NOWHERE is not a run directory: it has no manifest.json"),
    (
        ["evaluate", "RUN", "--at", "2023-02-14 09:00"],
        "smallville: error: --at 2023-02-14 09:00: RUN covers 2023-02-13 07:00",
    ),
    (["experiment", "missing.yaml"], "smallville: error: missing.yaml: cannot read the experiment file"),
    (["serve", "NOWHERE"], "smallville: error: NOWHERE is not a folder of runs"),
    (["serve", "RUN", "--port", "70000"], "smallville: error: --port 70000: a port is a number from 0 to 65535"),
    (["town", "generate", "--agents", "0", "OUT"], "smallville town generate: error: argument --agents: expected"),
    (
        ["town", "generate", "--agents", "2", "RUN/manifest.json"],
        "smallville: error: RUN/manifest.json already exists; use --force to overwrite",
    ),
]


@pytest.mark.parametrize("argv, line", BAD_INPUT, ids=[" ".join(map(str, a[:3])) for a, _ in BAD_INPUT])
def test_bad_input_exits_2_with_one_line(argv, line, run, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    places = {"RUN": str(run), "NOWHERE": str(tmp_path / "nowhere"), "OUT": str(tmp_path / "town.yaml")}

    def place(text):
        for name, path in places.items():
            text = str(text).replace(name, path)
        return text

    code, err = exit_of([place(a) for a in argv], capsys)
    assert code == 2, err
    assert err.splitlines()[-1].startswith(place(line)), err
    assert "Traceback" not in err
    if line.startswith(("smallville: error", "missing.yaml")):
        assert len(err.splitlines()) == 1, err  # argparse adds its usage line; ours are one line


def test_every_subcommand_has_a_bad_input_case():
    import argparse

    from smallville.cli import build_parser

    (commands,) = [a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands) == {str(argv[0]) for argv, _ in BAD_INPUT}


def test_a_damaged_run_is_a_failure_not_bad_input(run, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "manifest.json").write_text("{ not json")
    code, err = exit_of(["inspect", copy], capsys)
    assert code == 1 and err.startswith(f"smallville: error: {copy / 'manifest.json'}: cannot read the manifest")
    events = copy / "events.jsonl"
    (copy / "manifest.json").write_text((run / "manifest.json").read_text())
    events.write_text('{"t": 0}\nnot json\n{"t": 1}\n')
    code, err = exit_of(["replay", copy], capsys)
    assert (code, err) == (1, f"smallville: error: {events}:2: not a JSON event\n")


def test_run_options_that_go_together_are_checked_when_made():
    """Options of a run that depend on each other are refused at once, each with one message."""
    from smallville.brain import LLMConfig
    from smallville.errors import UsageError
    from smallville.run import RunOptions

    with pytest.raises(UsageError, match="an LLMConfig, the whole settings: give it without brain_config or api_base"):
        run_scenario(load_scenario(TINY), brain=LLMConfig(model="openai/x"), api_base="http://127.0.0.1:9/v1")
    with pytest.raises(UsageError, match="runs_dir or to folder, not both"):
        RunOptions(runs_dir="runs", folder="runs/mine")
    with pytest.raises(TypeError, match="duraton"):
        run_scenario(load_scenario(TINY), duraton=60)


def test_exit_codes_as_a_user_sees_them(run, tmp_path):
    nobody = smallville("inspect", run, "--agent", "nobody")
    assert nobody.returncode == 2 and nobody.stderr.count("\n") == 1 and "unknown agent 'nobody'" in nobody.stderr
    late = smallville("fork", run, "--at", "2023-02-14 09:00", "--runs-dir", tmp_path)
    assert late.returncode == 2 and late.stderr.startswith("smallville: error: cannot fork")
    assert not list(tmp_path.iterdir())  # refused before writing anything
    damaged = tmp_path / "damaged"
    shutil.copytree(run, damaged)
    manifest = json.loads((damaged / "manifest.json").read_text())
    (damaged / "manifest.json").write_text(json.dumps({**manifest, "schema": 99}))
    foreign = smallville("metrics", damaged)
    assert foreign.returncode == 1 and "schema 99 is not supported" in foreign.stderr
    assert foreign.stderr.count("\n") == 1


def test_a_missing_file_has_no_made_up_position(tmp_path):
    result = smallville("validate", tmp_path / "nothing.yaml", ROOT / "agents" / "nobody_at_all.yaml")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{tmp_path / 'nothing.yaml'}: cannot read file: No such file or directory",
        f"{ROOT / 'agents' / 'nobody_at_all.yaml'}: cannot read file: No such file or directory",
    ]
    broken = tmp_path / "latin1.yaml"
    broken.write_bytes(b"name: Caf\xe9\n")
    assert smallville("validate", broken).stderr == f"{broken}:1:10: the file is not UTF-8 text (byte 9)\n"


def test_a_run_killed_mid_way_is_inspected_up_to_its_last_checkpoint(tmp_path, capsys):
    killed = smallville(
        "run",
        TINY,
        "--for",
        "3h",
        "--embedder",
        "lexical",
        "--runs-dir",
        tmp_path,
        "--quiet",
        env={"SMALLVILLE_FAULT": "kill-at:9000"},
    )
    assert killed.returncode == -9
    (run,) = tmp_path.iterdir()
    assert exit_of(["inspect", run, "--agent", "ann_lee", "--json"], capsys)[0] == 0
    code, err = exit_of(["interview", run, "ann_lee", "hi?", "--at", "2023-02-13 09:30"], capsys)
    assert (code, err) == (
        2,
        f"smallville: error: 2023-02-13 09:30:00 is outside the time {run} covers: "
        "2023-02-13 07:00:00 to 2023-02-13 09:00:00\n",
    )
    code, err = exit_of(["fork", run, "--at", "2023-02-13 09:30"], capsys)
    assert code == 2 and err.endswith("it covers 2023-02-13 07:00:00 to 2023-02-13 09:00:00\n")
