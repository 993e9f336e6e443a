"""`smallville serve`: a run followed live in a real browser while it goes, seeking, the
agent panel, an interview; and nothing outside the folder served."""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
from browser import CHROMIUM, Browser
from conftest import CAFE_TRIO, ROOT

from smallville.errors import Outside, Truncated
from smallville.serve.feed import read_from
from smallville.serve.runs import RunsRoot

IN_CI = os.environ.get("CI", "").lower() == "true"
HOUR = 3600


class Gate:
    """A run in a thread of its own that waits after each step until the test lets it go on."""

    def __init__(self) -> None:
        self.allowed, self.now, self.done = 0.0, 0.0, False
        self.cond = threading.Condition()
        self.error: BaseException | None = None

    def on_step(self, now: float) -> None:
        with self.cond:
            self.now = now
            self.cond.notify_all()
            self.cond.wait_for(lambda: now < self.allowed)

    def start(self, runs) -> None:
        from smallville.run import run_scenario
        from smallville.scenario import load_scenario

        def go() -> None:
            try:
                run_scenario(load_scenario(CAFE_TRIO), runs_dir=runs, duration=6 * HOUR, embedder="lexical",
                             on_step=self.on_step, checkpoint_every=900)
            except BaseException as exc:         # (seen by advance)
                self.error = exc
            finally:
                with self.cond:
                    self.done = True
                    self.cond.notify_all()

        threading.Thread(target=go, daemon=True).start()

    def advance(self, to: float, timeout: float = 120) -> None:
        """Let the run go on to simulated second `to` and wait until it is there."""
        with self.cond:
            self.allowed = to
            self.cond.notify_all()
            assert self.cond.wait_for(lambda: self.now >= to or self.done, timeout), "the run did not advance"
        assert self.error is None, self.error

    def finish(self, timeout: float = 120) -> None:
        """Let the run go on to its end, and wait for it."""
        with self.cond:
            self.allowed = float("inf")
            self.cond.notify_all()
            assert self.cond.wait_for(lambda: self.done, timeout), "the run did not end"
        assert self.error is None, self.error


def start_server(runs, *args):
    env = {"PATH": os.environ["PATH"], "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.Popen([sys.executable, "-m", "smallville", "serve", str(runs), "--port", "0", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "the server printed no address"
    line = proc.stdout.readline()
    assert line.startswith("smallville serve: http://127.0.0.1:"), line + proc.stderr.read()
    return proc, line.split()[2]


def get(url: str, headers: dict | None = None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def events_of(run):
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def tile_at(run, agent: str, t: float) -> list[int]:
    """Where the replay page's data puts an agent at time t."""
    from smallville.replay import load_run
    from smallville.replay.page import page_data

    track = page_data(load_run(run))["tracks"][agent]
    return [p[1:] for p in track if p[0] <= t][-1]


def cli(*args):
    result = subprocess.run([sys.executable, "-m", "smallville", *map(str, args)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def digest_of(folder):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason="needs Debian's chromium (.ci/run installs it)")
def test_a_run_followed_live_seeked_inspected_and_interviewed(tmp_path):
    assert CHROMIUM, "no chromium on PATH: in CI (CI=true) the serve page's browser test must run, not skip"
    runs = tmp_path / "runs"
    gate = Gate()
    gate.start(runs)
    gate.advance(2 * HOUR)
    (run,) = runs.iterdir()
    server, url = start_server(runs)
    agent, question = "isabella_rodriguez", "Do you know about a Valentine's Day party?"
    try:
        with Browser(tmp_path / "profile") as page:
            page.open(url)                                   # the runs page lists the run, going
            page.wait_for(f"!!document.querySelector('tr[data-run=\"{run.name}\"] .running')", what="the run listed")

            page.open(f"{url}run?id={run.name}#agent={agent}")
            last = events_of(run)[-1]["t"]
            page.wait_for(f"end >= {last} && drawn && drawn.t === end && document.body.dataset.caught")
            assert page.evaluate("document.body.dataset.status") == "running"
            before = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))

            gate.advance(4 * HOUR)                           # the page follows the run as it goes
            last = events_of(run)[-1]["t"]
            page.wait_for(f"drawn.t >= {last}", what="the page to follow the run")
            after = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))
            assert after != before
            assert after == {a: tile_at(run, a, last) for a in after}

            at = next(t for t in range(3 * HOUR, 0, -HOUR)   # seeking back shows the earlier state: an
                      if {a: tile_at(run, a, t) for a in after} != after)   # hour when someone was elsewhere
            clock = f"2023-02-13 {7 + at // HOUR:02d}:00"
            page.evaluate(f"slider.value = {at}; slider.dispatchEvent(new Event('input')); 1")
            page.wait_for(f"drawn.t === {at}")
            earlier = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))
            assert earlier == {a: tile_at(run, a, at) for a in earlier} and earlier != after

            page.wait_for(f"document.body.dataset.panelTime === '{at}' && !!document.getElementById('activity')",
                          what="the agent panel")
            state = cli("inspect", run, "--agent", agent, "--at", clock, "--json")
            assert page.evaluate("document.getElementById('activity').textContent") == state["activity"]
            panel = page.evaluate("document.getElementById('info').textContent")
            assert state["area"] in panel and "Plan" in panel and "Reflections" in panel
            assert page.evaluate("document.querySelector('#info li.now').textContent").endswith(state["now"][2])
            assert page.evaluate("document.getElementById('knows').textContent") == ", ".join(state["knows"])

            page.evaluate(f"document.getElementById('question').value = {json.dumps(question)}; "
                          "document.getElementById('send').click(); 1")
            page.wait_for("document.body.dataset.answered", what="the interview's answer")
            said = page.evaluate("document.getElementById('said').textContent")
            asked = cli("interview", run, agent, question, "--at", clock, "--json")
            assert said == asked["answer"] and "Valentine" in said
            cited = page.evaluate("[...document.querySelectorAll('#answer li')].map(li => li.textContent)")
            assert cited == [m["text"] for m in asked["memories"]] and cited

            gate.finish()                                    # the run ends: the pages say so
            page.wait_for("document.body.dataset.status === 'completed'", what="the run's end")
            page.open(url)
            page.wait_for(f"!!document.querySelector('tr[data-run=\"{run.name}\"] .completed')")
            page.open(f"{url}run?id=../profile")
            page.wait_for("document.getElementById('note').textContent", what="a refusal")
            assert "leaves the folder" in page.evaluate("document.getElementById('note').textContent")
            assert page.errors == [f"Failed to load resource: the server responded with a status of 403 "
                                   f"(Forbidden) {url}api/town?run=..%2Fprofile"]
            page.errors.clear()
            shot = tmp_path / "shot.png"
            page.screenshot(shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        before = digest_of(run)                              # a viewer changes nothing, interviews included
        get(f"{url}api/agent?run={run.name}&agent=maria_lopez&t=5400")
        data = json.dumps({"run": run.name, "agent": agent, "t": 5400, "question": question}).encode()
        request = urllib.request.Request(f"{url}api/interview", data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert json.loads(reply.read())["answer"]
        assert digest_of(run) == before
    finally:
        gate.finish()
        server.terminate()
        server.wait(timeout=30)


def test_only_runs_under_the_folder_are_served(tmp_path, trio_copy):
    runs, outside = tmp_path / "runs", tmp_path / "outside"
    runs.mkdir()
    shutil.copytree(trio_copy, runs / "a")
    shutil.copytree(trio_copy, outside)
    (runs / "link").symlink_to(outside)
    server, url = start_server(runs)
    try:
        status, town = get(f"{url}api/town?run=a")
        assert status == 200 and town["agents"] and town["run"]["status"] == "completed"
        for bad in ("../outside", "..%2Foutside", str(outside), "link", "a/../../outside", "%2e%2e/outside"):
            status, body = get(f"{url}api/town?run={bad}")
            assert status == 403 and "leaves the folder" in body["error"], (bad, body)
            status, _ = get(f"{url}api/feed?run={bad}&offset=0")
            assert status == 403
        assert get(f"{url}api/town?run=nothing")[0] == 404
        assert get(f"{url}api/town?run=a/scenario")[0] == 404
        assert get(f"{url}etc/passwd")[0] == 404
        status, body = get(f"{url}api/runs", {"Host": "attacker.example:80"})      # a name that resolves here
        assert status == 421
        status, listed = get(f"{url}api/runs")
        assert [r["id"] for r in listed] == ["a"]                                  # the link is not listed
        status, body = get(f"{url}api/agent?run=a&agent=nobody&t=3600")
        assert status == 409 and "unknown agent 'nobody'" in body["error"]
        status, body = get(f"{url}api/agent?run=a&agent=maria_lopez&t=99999999")
        assert status == 409 and "outside the time" in body["error"]
        form = urllib.request.Request(f"{url}api/interview", b"run=a&agent=maria_lopez&t=60&question=hi",
                                      {"Content-Type": "application/x-www-form-urlencoded"})
        with pytest.raises(urllib.error.HTTPError) as refused:                     # no form of another site
            urllib.request.urlopen(form, timeout=60)
        assert refused.value.code == 400
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def trio_copy(tmp_path_factory):
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    runs = tmp_path_factory.mktemp("trio")
    return run_scenario(load_scenario(CAFE_TRIO), runs_dir=runs, duration=2 * HOUR, embedder="lexical").path


def test_the_log_is_followed_by_whole_lines_from_an_offset(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text('{"t": 0}\n{"t": 60}\n{"t": 1')                # the last line is still being written
    lines, offset = read_from(log, 0)
    assert lines == [{"t": 0}, {"t": 60}] and offset == len('{"t": 0}\n{"t": 60}\n')
    assert read_from(log, offset) == ([], offset)
    with open(log, "a") as f:
        f.write('20}\n')
    assert read_from(log, offset) == ([{"t": 120}], log.stat().st_size)
    log.write_text('{"t": 0}\n')                                  # cut back by a resume
    with pytest.raises(Truncated):
        read_from(log, offset)


def test_runs_root_refuses_paths_that_leave_it(tmp_path):
    (tmp_path / "runs" / "r").mkdir(parents=True)
    (tmp_path / "runs" / "r" / "manifest.json").write_text("{}")
    root = RunsRoot(tmp_path / "runs")
    assert root.find("r") == (tmp_path / "runs" / "r").resolve()
    for bad in ("..", "../other", "/etc", "r/../..", "", "r/scenario"):
        with pytest.raises(Outside):
            root.find(bad)


def test_serve_command_errors_and_a_fast_help(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "smallville", "serve", str(tmp_path / "nothing")], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "is not a folder of runs" in missing.stderr
    code = ("import sys; from smallville.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n"
            "print([m for m in ('smallville.serve', 'http.server') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "[]"
