"""`smallville serve`: a run followed live in a real browser while it goes, seeking, the
agent panel, an interview; and nothing outside the folder served."""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from smallville.errors import Outside, Truncated
from smallville.serve.feed import read_from
from smallville.serve.runs import RunsRoot

from browser import CHROMIUM, Browser
from conftest import CAFE_TRIO, ROOT, THE_VILLE

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
                run_scenario(
                    load_scenario(CAFE_TRIO),
                    runs_dir=runs,
                    duration=6 * HOUR,
                    embedder="lexical",
                    on_step=self.on_step,
                    checkpoint_every=900,
                )
            except BaseException as exc:  # (seen by advance)
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
    proc = subprocess.Popen(
        [sys.executable, "-m", "smallville", "serve", str(runs), "--port", "0", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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


def post(url: str, body: dict):
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return reply.status, json.loads(reply.read())


def seeds_of(scenario_path, agent: str) -> int:
    """How many seed memories `agent` starts with in the scenario."""
    from smallville.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    (spec,) = [a for a in scenario.agents if a.id == agent]
    return len(spec.memories) + len(scenario.memories.get(agent, ()))


def cli(*args):
    result = subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def digest_of(folder):
    return {
        p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


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
            page.open(url)  # the runs page lists the run, going
            page.wait_for(f"!!document.querySelector('tr[data-run=\"{run.name}\"] .running')", what="the run listed")

            page.open(f"{url}run?id={run.name}#agent={agent}")
            last = events_of(run)[-1]["t"]
            page.wait_for(f"end >= {last} && drawn && drawn.t === end && document.body.dataset.caught")
            assert page.evaluate("document.body.dataset.status") == "running"
            before = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))

            gate.advance(4 * HOUR)  # the page follows the run as it goes
            last = events_of(run)[-1]["t"]
            page.wait_for(f"drawn.t >= {last}", what="the page to follow the run")
            after = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))
            assert after != before
            assert after == {a: tile_at(run, a, last) for a in after}

            at = next(
                t
                for t in range(3 * HOUR, 0, -HOUR)  # seeking back shows the earlier state: an
                if {a: tile_at(run, a, t) for a in after} != after
            )  # hour when someone was elsewhere
            clock = f"2023-02-13 {7 + at // HOUR:02d}:00"
            page.evaluate(f"slider.value = {at}; slider.dispatchEvent(new Event('input')); 1")
            page.wait_for(f"drawn.t === {at}")
            earlier = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))
            assert earlier == {a: tile_at(run, a, at) for a in earlier} and earlier != after

            page.wait_for(
                f"document.body.dataset.panelTime === '{at}' && !!document.getElementById('activity')",
                what="the agent panel",
            )
            state = cli("inspect", run, "--agent", agent, "--at", clock, "--json")
            assert page.evaluate("document.getElementById('activity').textContent") == state["activity"]
            panel = page.evaluate("document.getElementById('info').textContent")
            assert state["area"] in panel and "Plan" in panel and "Reflections" in panel
            now = page.evaluate("document.querySelector('#info li.now').textContent")
            assert now.removesuffix(" why").endswith(state["now"][2])  # (each block has a why)
            assert page.evaluate("document.getElementById('knows').textContent") == ", ".join(state["knows"])

            page.evaluate(
                f"document.getElementById('question').value = {json.dumps(question)}; "
                "document.getElementById('send').click(); 1"
            )
            page.wait_for("document.body.dataset.answered", what="the interview's answer")
            said = page.evaluate("document.getElementById('said').textContent")
            asked = cli("interview", run, agent, question, "--at", clock, "--json")
            assert said == asked["answer"] and "Valentine" in said
            cited = page.evaluate("[...document.querySelectorAll('#answer li')].map(li => li.textContent)")
            texts = [m["text"] for m in asked["memories"]]  # memories that say the same, listed once
            assert (
                cited
                == [t + (f" ({texts.count(t)} memories)" if texts.count(t) > 1 else "") for t in dict.fromkeys(texts)]
                and cited
            )

            gate.finish()  # the run ends: the pages say so
            page.wait_for("document.body.dataset.status === 'completed'", what="the run's end")
            env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
            resumed = subprocess.run(
                [sys.executable, "-m", "smallville", "resume", str(run), "--for", "1h", "--quiet"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert resumed.returncode == 0, resumed.stderr  # resumed after it ended: the page follows it on
            last = events_of(run)[-1]["t"]
            assert last > 6 * HOUR
            page.wait_for(
                f"end === {last} && Number(slider.max) === {last} && document.body.dataset.status === 'completed'",
                what="the page to follow the resumed run",
            )
            page.open(url)
            page.wait_for(f"!!document.querySelector('tr[data-run=\"{run.name}\"] .completed')")
            page.open(f"{url}run?id=../profile")
            page.wait_for("document.getElementById('note').textContent", what="a refusal")
            assert "leaves the folder" in page.evaluate("document.getElementById('note').textContent")
            assert page.errors == [
                f"Failed to load resource: the server responded with a status of 403 "
                f"(Forbidden) {url}api/town?run=..%2Fprofile"
            ]
            page.errors.clear()
            shot = tmp_path / "shot.png"
            page.screenshot(shot)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        before = digest_of(run)  # a viewer changes nothing, interviews included
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


@pytest.fixture(scope="module")
def ville(tmp_path_factory):
    """The default town from 7:00 to lunch (shared: several seconds)."""
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    runs = tmp_path_factory.mktemp("ville")
    return run_scenario(load_scenario(THE_VILLE), runs_dir=runs, duration=6 * HOUR, embedder="lexical").path


def overlapping(boxes: list) -> list:
    """The pairs of [name, x, y, w, h] boxes that overlap."""
    return [
        (a[0], b[0])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[1] < b[1] + b[3] and b[1] < a[1] + a[3] and a[2] < b[2] + b[4] and b[2] < a[2] + a[4]
    ]


@pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_ville_page_labels_apart_talks_counted_once_each_memory_said_once(ville, tmp_path):
    assert CHROMIUM, "no chromium on PATH: in CI (CI=true) the serve page's browser test must run, not skip"
    from smallville.scenario import load_scenario

    legend, rows = load_scenario(THE_VILLE).map.legend, load_scenario(THE_VILLE).map.grid
    damaged = ville.parent / "damaged"  # a copy whose checkpoints were cut short on disk
    shutil.copytree(ville, damaged, dirs_exist_ok=True)
    for part in (damaged / "checkpoints").glob("*/accessed.npz"):
        part.write_bytes(b"cut short")
    server, url = start_server(ville.parent)
    agent = "isabella_rodriguez"
    try:
        with Browser(tmp_path / "profile") as page:  # the default size: a laptop's window
            page.open(f"{url}run?id={ville.name}#agent={agent}")
            page.wait_for("document.body.dataset.caught && drawn", what="the run")
            places = page.evaluate("town.places.all.map(b => [b.name, b.x, b.y, b.w, b.h])")
            assert {p[0] for p in places} == {
                a.split(" / ")[0] for a in legend.values() if a != "wall" and "street" not in a
            }  # every place named
            assert overlapping(places) == []
            labels = page.evaluate("D.agents.map(a => a.label)")
            assert len(set(labels)) == len(labels) == 25 and {"MaL", "MeL"} <= set(labels)

            x, y, w, h = page.evaluate("[scroller.scrollLeft, scroller.scrollTop, canvas.width, canvas.height]")
            crowd = 0
            for t in range(4 * HOUR, 6 * HOUR + 1, 10 * 60):  # late morning to lunch, in ten-minute steps
                drawn = json.loads(page.evaluate(f"slider.value = {t}; frame(); JSON.stringify(town.drawn)"))
                positions = json.loads(page.evaluate("JSON.stringify(drawn.positions)"))
                boxes = [[f"{a} label", bx, by, bw, bh] for a, _, bx, by, bw, bh in drawn["labels"]]
                boxes += [[f"{a} says", bx, by, bw, bh] for a, bx, by, bw, bh, _ in drawn["bubbles"]]
                assert overlapping(boxes) == [], t
                seen = {a for a, (c, r) in positions.items() if x <= c * 10 < x + w and y <= r * 10 < y + h}
                assert seen <= {a for a, *_ in drawn["labels"]}, t  # everyone in view has a label
                crowd = max(crowd, sum(legend[rows[r][c]].startswith("Hobbs Cafe") for c, r in positions.values()))
            assert crowd >= 5  # a crowd at the cafe was among them
            c, r = positions["isabella_rodriguez"]  # a hover names the place and who is there
            page.evaluate(f"""(() => {{ const box = scroller.getBoundingClientRect();
                scroller.dispatchEvent(new MouseEvent("mousemove", {{clientX: box.left + {c * 10 + 5} - scroller.scrollLeft,
                                                                     clientY: box.top + {r * 10 + 5} - scroller.scrollTop}})); }})()""")
            tip = page.evaluate("document.getElementById('tip').textContent")
            assert tip.startswith(legend[rows[r][c]] + ": ") and "Isabella Rodriguez (IR)" in tip

            last = page.evaluate("slider.value = end; slider.dispatchEvent(new Event('input')); end")
            page.wait_for(
                f"document.body.dataset.panelTime === '{last}' && !!document.getElementById('relationships')",
                what="the agent panel",
            )
            clock = f"2023-02-13 {7 + last // HOUR:02d}:{last % HOUR // 60:02d}"
            state = cli("inspect", ville, "--agent", agent, "--at", clock, "--json")
            lines = page.evaluate("[...document.querySelectorAll('#relationships > li')].map(li => li.textContent)")
            talks = {r["name"]: r["talks"] for r in state["relationships"].values()}
            assert lines == [
                f"{r['name']}"
                + (f" ({r['talks']} talk{'s' if r['talks'] > 1 else ''})" if r["talks"] else "")
                + f": {r['view']}"
                for r in state["relationships"].values()
            ]
            assert max(talks.values()) >= 1 and not any(c.isdigit() for line in lines for c in line.split("): ")[-1])

            question = "What are you planning for Valentine's Day?"
            page.evaluate(
                f"document.getElementById('question').value = {json.dumps(question)}; "
                "document.getElementById('send').click(); 1"
            )
            page.wait_for("document.body.dataset.answered", what="the interview's answer")
            said = page.evaluate("document.getElementById('said').textContent")
            sentences = [
                part.strip().lower().replace("isabella rodriguez", "isabella")
                for part in re.split(r"[.;!?]", said.removeprefix("From what I remember:"))
                if part.strip()
            ]
            assert "Valentine" in said and sentences, said  # no sentence says again what one has said
            assert not [(a, b) for i, a in enumerate(sentences) for b in sentences[i + 1 :] if a in b or b in a], said
            assert page.errors == []

            page.open(f"{url}run?id=damaged#agent={agent}")  # a failure not smallville's own: one line
            page.wait_for("document.body.dataset.caught && drawn", what="the damaged run")
            page.evaluate(f"slider.value = {2 * HOUR}; slider.dispatchEvent(new Event('input')); 1")
            page.wait_for(f"document.body.dataset.panelTime === '{2 * HOUR}'", what="the damaged panel")
            note = page.evaluate("document.querySelector('#info .note').textContent")
            assert note.startswith("could not answer /api/agent: ValueError") and "\n" not in note
            assert [e for e in page.errors if "500 (Internal Server Error)" not in e] == []
    finally:
        server.terminate()
        server.wait(timeout=30)
    told = server.stderr.read()
    assert "could not answer /api/agent: ValueError" in told and "Traceback" not in told


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
        status, body = get(f"{url}api/runs", {"Host": "attacker.example:80"})  # a name that resolves here
        assert status == 421
        status, listed = get(f"{url}api/runs")
        assert [r["id"] for r in listed] == ["a"]  # the link is not listed
        status, body = get(f"{url}api/agent?run=a&agent=nobody&t=3600")
        assert status == 404 and "unknown agent 'nobody'" in body["error"]
        status, body = get(f"{url}api/agent?run=a&agent=maria_lopez&t=99999999")
        assert status == 409 and "outside the time" in body["error"]
        form = urllib.request.Request(
            f"{url}api/interview",
            b"run=a&agent=maria_lopez&t=60&question=hi",
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:  # no form of another site
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


def test_the_panel_why_and_interview_take_a_name_and_refuse_an_unknown_agent_with_404(tmp_path, trio_copy):
    """An agent is named as `smallville interview` takes it: its id, or its name in any case."""
    runs = tmp_path / "runs"
    shutil.copytree(trio_copy, runs / "a")
    server, url = start_server(runs)
    unknown = ": it has isabella_rodriguez, klaus_mueller, maria_lopez"
    try:
        for asked in (f"{url}api/agent?run=a&t=3600&agent=", f"{url}api/why?run=a&t=3600&agent="):
            by_id, by_name = get(asked + "maria_lopez"), get(asked + "MARIA%20Lopez")
            assert by_id[0] == 200 and by_name == by_id and by_id[1]["agent"] == "maria_lopez"
            status, body = get(asked + "Maria")
            assert status == 404 and body["error"].startswith("unknown agent 'Maria' in ")
            assert body["error"].endswith(unknown)
        question = {"run": "a", "t": 3600, "question": "What are you doing today?"}
        by_name = post(f"{url}api/interview", {**question, "agent": "maria lopez"})
        assert by_name == post(f"{url}api/interview", {**question, "agent": "maria_lopez"})
        assert by_name[1]["agent"] == "maria_lopez" and by_name[1]["answer"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(f"{url}api/interview", {**question, "agent": "Maria"})
        assert refused.value.code == 404 and json.loads(refused.value.read())["error"].endswith(unknown)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_every_failure_is_one_line_of_json(tmp_path, trio_copy):
    """What breaks a reader (a manifest edited by hand, a damaged checkpoint, a log line that
    is not an event) or the standard library's own refusals: a JSON line, never a dropped
    connection or an HTML page; one unreadable run does not empty the list."""
    runs = tmp_path / "runs"
    for name in ("good", "edited", "damaged", "torn"):
        shutil.copytree(trio_copy, runs / name)
    manifest = json.loads((runs / "edited" / "manifest.json").read_text())
    (runs / "edited" / "manifest.json").write_text(json.dumps({**manifest, "agents": 3}))
    for part in (runs / "damaged" / "checkpoints").glob("*/accessed.npz"):
        part.write_bytes(b"cut short")
    log = (runs / "torn" / "events.jsonl").read_text().splitlines(keepends=True)
    (runs / "torn" / "events.jsonl").write_text("".join(log[:5]) + "{not an event\n" + "".join(log[5:]))
    server, url = start_server(runs)
    try:
        status, listed = get(f"{url}api/runs")
        assert status == 200 and {r["id"]: r["status"] for r in listed} == {
            "good": "completed",
            "edited": "unreadable",
            "damaged": "completed",
            "torn": "completed",
        }
        assert "TypeError" in next(r["error"] for r in listed if r["id"] == "edited")
        status, body = get(f"{url}api/agent?run=damaged&agent=maria_lopez&t=5400")
        assert status == 500 and body["error"].startswith("could not answer /api/agent: ValueError")
        assert "\n" not in body["error"]
        request = urllib.request.Request(f"{url}api/runs", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 501 and "error" in json.loads(refused.value.read())
        with urllib.request.urlopen(f"{url}api/feed?run=torn&offset=0", timeout=60) as feed:
            told = feed.read().decode()  # (the feed ends after the failure)
        failed = told.split("event: failed\ndata: ")[1].split("\n")[0]
        offset = sum(len(line.encode()) for line in log[:5])
        assert json.loads(failed) == {"error": f"torn/events.jsonl: the line at byte {offset} is not an event"}
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "could not answer /api/agent: ValueError" in server.stderr.read()


def test_a_big_towns_panel_is_the_checkpoint_before_and_says_so(tmp_path, trio_copy):
    """A town where going on from a checkpoint costs too much (forced here on three agents):
    the panel between checkpoints is the checkpoint's, with its time, the time asked and a
    note in the JSON, and the note on the page; at a checkpoint it is exact."""
    from smallville.serve import make_server

    runs = tmp_path / "runs"
    shutil.copytree(trio_copy, runs / "a")
    server = make_server(runs, port=0, exact_work=1000)  # (3 agents x a first instant of 2400 s: more)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url, agent = server.url, "maria_lopez"
    try:
        status, panel = get(f"{url}api/agent?run=a&agent={agent}&t=5400")
        note = "as of 08:00, the last saved state; the clock is at 08:30"
        assert status == 200 and (panel["t"], panel["asked"], panel["note"]) == (3600, 5400, note)
        assert panel["state"] == "checkpoint"
        saved = cli("inspect", runs / "a", "--agent", agent, "--at", "2023-02-13 08:00", "--json")
        assert (panel["time"], panel["activity"], panel["now"]) == ("2023-02-13 08:00", saved["activity"], saved["now"])
        status, exact = get(f"{url}api/agent?run=a&agent={agent}&t=3600")
        assert (exact["t"], exact["asked"], exact["state"], "note" in exact) == (3600, 3600, "exact", False)
        status, first = get(f"{url}api/agent?run=a&agent={agent}&t=1800")  # before the first checkpoint
        start = "as of 07:00, the town's start (seed memories, no one's day begun); the clock is at 07:30"
        said = (first["t"], first["asked"], first["state"], first["note"], first["time"], first["plan"])
        assert status == 200 and said == (0, 1800, "start", start, "2023-02-13 07:00", [])
        assert first["memories"] == seeds_of(CAFE_TRIO, agent) and {m["kind"] for m in first["recent"]} == {"seed"}
        question = {"run": "a", "agent": agent, "t": 5400, "question": "What are you working on?"}
        status, told = post(f"{url}api/interview", question)
        said = (told["t"], told["asked"], told["state"], told["note"])
        assert status == 200 and said == (3600, 5400, "checkpoint", note)
        then = cli("interview", runs / "a", agent, question["question"], "--at", "2023-02-13 08:00", "--json")
        assert (told["time"], told["answer"], told["memories"]) == (then["time"], then["answer"], then["memories"])
        status, exactly = post(f"{url}api/interview", {**question, "exact": True})
        said = (exactly["t"], exactly["state"], exactly["time"], "note" in exactly)
        assert said == (5400, "exact", "2023-02-13 08:30", False)
        if CHROMIUM is None and not IN_CI:
            return
        with Browser(tmp_path / "profile") as page:
            page.open(f"{url}run?id=a#agent={agent}")
            page.wait_for("document.body.dataset.caught && drawn", what="the run")
            page.evaluate("slider.value = 5400; slider.dispatchEvent(new Event('input')); 1")
            page.wait_for("document.body.dataset.panelTime === '5400' && !!document.getElementById('activity')")
            assert page.evaluate("document.getElementById('as-of').textContent") == note
            page.evaluate(
                f"document.getElementById('question').value = {json.dumps(question['question'])}; "
                "document.getElementById('send').click(); 1"
            )
            page.wait_for("document.body.dataset.answered", what="the interview's answer")
            assert page.evaluate("document.getElementById('said').textContent") == told["answer"]
            assert page.evaluate("document.getElementById('answer-as-of').textContent") == note
            page.evaluate("slider.value = 3600; slider.dispatchEvent(new Event('input')); 1")
            page.wait_for("document.body.dataset.panelTime === '3600' && !!document.getElementById('activity')")
            assert page.evaluate("document.getElementById('as-of')") is None
            assert page.errors == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_villes_panel_is_exact_between_checkpoints(ville):
    """the_ville's 25 agents: the panel and an interview go on from the checkpoint to the time
    asked, even the last minute before the next one and before the first, and say what
    `smallville inspect` and `interview --exact` say then."""
    server, url = start_server(ville.parent)
    agent = "isabella_rodriguez"
    try:
        for t in (30 * 60, 3 * HOUR + 30 * 60, 4 * HOUR - 60):
            status, panel = get(f"{url}api/agent?run={ville.name}&agent={agent}&t={t}")
            clock = f"2023-02-13 {7 + t // HOUR:02d}:{t % HOUR // 60:02d}"
            state = cli("inspect", ville, "--agent", agent, "--at", clock, "--json")
            assert status == 200 and (panel["t"], panel["asked"], panel["state"], "note" in panel) == (
                t,
                t,
                "exact",
                False,
            )
            assert (panel["time"], panel["activity"], panel["now"]) == (clock, state["activity"], state["now"])
        question = "What are you planning?"
        status, told = post(
            f"{url}api/interview", {"run": ville.name, "agent": agent, "t": 30 * 60, "question": question}
        )
        exact = cli("interview", ville, agent, question, "--at", "2023-02-13 07:30", "--exact", "--json")
        assert (told["state"], told["t"], "note" in told) == ("exact", 30 * 60, False)
        assert (told["time"], told["answer"], told["memories"]) == (exact["time"], exact["answer"], exact["memories"])
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_log_is_followed_by_whole_lines_from_an_offset(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text('{"t": 0}\n{"t": 60}\n{"t": 1')  # the last line is still being written
    lines, offset = read_from(log, 0)
    assert lines == [{"t": 0}, {"t": 60}] and offset == len('{"t": 0}\n{"t": 60}\n')
    assert read_from(log, offset) == ([], offset)
    with open(log, "a") as f:
        f.write("20}\n")
    assert read_from(log, offset) == ([{"t": 120}], log.stat().st_size)
    log.write_text('{"t": 0}\n')  # cut back by a resume
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
    missing = subprocess.run(
        [sys.executable, "-m", "smallville", "serve", str(tmp_path / "nothing")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "is not a folder of runs" in missing.stderr
    code = (
        "import sys; from smallville.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n"
        "print([m for m in ('smallville.serve', 'http.server') if m in sys.modules])"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "[]"
