"""Looking at a run again: the text timeline and the self-contained replay page."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from smallville.errors import RunError
from smallville.replay import load_run
from smallville.replay.page import page_data, render_page
from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="module")
def trio_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return run_scenario(load_scenario(CAFE_TRIO), runs_dir=runs, duration=10 * 3600, embedder="lexical").path


def replay(*args):
    return subprocess.run(
        [sys.executable, "-m", "smallville", "replay", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_text_timeline_tells_the_story(trio_run):
    result = replay(trio_run, "--format", "text")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d  ", line) for line in lines)
    assert [line[:16] for line in lines] == sorted(line[:16] for line in lines)
    text = result.stdout
    assert "Isabella Rodriguez plans Monday, February 13, 2023: " in text
    assert " walks to " in text and " starts talking with " in text
    said = [json.loads(line) for line in (trio_run / "events.jsonl").read_text().splitlines() if '"kind":"say"' in line]
    assert said and said[0]["data"]["text"] in text


def test_timeline_for_one_agent_from_a_time(trio_run):
    result = replay(trio_run, "--agent", "klaus_mueller", "--at", "2023-02-13 12:00", "--until", "2023-02-13 14:00")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and all("12:00" <= line[11:16] <= "14:00" for line in lines)
    assert all("Klaus Mueller" in line for line in lines)
    unknown = replay(trio_run, "--agent", "nobody")
    assert unknown.returncode == 2 and "unknown agent 'nobody'" in unknown.stderr


def test_a_torn_last_line_is_ignored_and_foreign_schemas_refused(trio_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trio_run, copy)
    whole = len(load_run(copy).events)
    with open(copy / "events.jsonl", "a") as f:
        f.write('{"t": 99999, "kind": "mem')  # a crash mid-write
    assert len(load_run(copy).events) == whole
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["schema"] = 99
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunError, match="schema 99 is not supported"):
        load_run(copy)
    result = replay(copy)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert replay(tmp_path / "nothing").stderr.startswith("smallville: error: ")


def test_page_data_follows_the_agents(trio_run):
    data = page_data(load_run(trio_run))
    assert {a["id"] for a in data["agents"]} == {"isabella_rodriguez", "maria_lopez", "klaus_mueller"}
    for track in data["tracks"].values():
        assert [k[0] for k in track] == sorted(k[0] for k in track)
    assert any(len(track) > 10 for track in data["tracks"].values())
    assert data["speech"] and data["plans"]["maria_lopez"]


def test_page_is_self_contained(trio_run):
    html = render_page(load_run(trio_run))
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "fetch(" not in html and "XMLHttpRequest" not in html and "@import" not in html
    assert html.count("<script") == 2  # the data and the code, both inline


@pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason="needs Debian's chromium (.ci/run installs it)")
def test_page_in_a_real_browser(trio_run, tmp_path):
    assert CHROMIUM, "no chromium on PATH: in CI (CI=true) the replay page's browser test must run, not skip"
    page = tmp_path / "replay.html"
    result = replay(trio_run, "--html", page)
    assert result.returncode == 0, result.stderr

    def chromium(*args, at=0):
        url = f"{page.as_uri()}#t={at}&agent=maria_lopez"
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1400,900",
                *args,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def positions(at):
        out = chromium("--dump-dom", at=at)
        console = [line for line in out.stderr.splitlines() if ":CONSOLE" in line]
        assert not [line for line in console if "Uncaught" in line or "Error" in line], console
        match = re.search(r'data-positions="([^"]*)"', out.stdout)
        assert match, out.stdout[:500]
        return json.loads(match.group(1).replace("&quot;", '"'))

    morning, noon = positions(0), positions(5 * 3600)
    assert set(morning) == {"isabella_rodriguez", "maria_lopez", "klaus_mueller"}
    assert morning != noon  # moving the slider moves the agents
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", at=5 * 3600)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a drawn map, not a blank page


def test_live_frame_shows_the_clock_the_people_and_the_talk(trio_run):
    from rich.console import Console

    from smallville.replay.live import Frames, Player

    frames = Frames(load_run(trio_run))
    said = frames.data["speech"][0]
    player = Player(said[0], frames.data["end"], frames.data["tick"], agent="maria_lopez")
    console = Console(record=True, width=160, height=50, color_system=None)
    console.print(frames.frame(player, 160, 50))
    screen = console.export_text()
    assert "2023-02-13 " + stamp_of(frames, said[0]) in screen
    assert "Maria Lopez" in screen and "Klaus Mueller" in screen and "Isabella Rodriguez" in screen
    assert said[3][:40] in screen
    assert "M" in frames.map_text(player.t, 200, 40, "maria_lopez").plain  # Maria on the map


def stamp_of(frames, t):
    from datetime import timedelta

    from smallville.timefmt import parse_datetime

    return (parse_datetime(frames.data["start"]) + timedelta(seconds=t)).strftime("%H:%M")


def test_live_keys_step_seek_pause_and_quit():
    from smallville.replay.live import Player

    player = Player(t=600.0, end=3600.0, tick=60.0)
    assert player.key("right") and player.t == 660.0
    player.key("left"), player.key("left")
    assert player.t == 540.0
    player.key("]")
    assert player.t == 1440.0
    player.key(" ")
    player.advance(10.0)
    assert player.paused and player.t == 1440.0
    player.key(" ")
    player.key("+")
    player.advance(1.0)
    assert player.t == 1440.0 + 1200.0
    player.advance(100.0)
    assert player.t == 3600.0  # never past the end
    assert player.key("q") is False


def digest_of(folder):
    import hashlib

    return {
        p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_inspect_shows_an_agent_at_a_time_and_changes_nothing(trio_run):
    """The first agent to reflect, inspected a minute into an action begun after that (and
    before its next action, walk or talk): what it does, where, and its reflections with the
    memories each rests on."""
    from datetime import datetime, timedelta

    events = [json.loads(line) for line in (trio_run / "events.jsonl").read_text().splitlines()]
    reflected = next((e for e in events if e["kind"] == "reflect"), None)
    assert reflected, "nobody reflected in ten hours"
    agent = reflected["agent"]
    doing = [e for e in events if e["agent"] == agent and e["kind"] in ("action", "move", "talk_start")]
    action = next(
        e
        for e, after in zip(doing, doing[1:])
        if e["kind"] == "action" and e["t"] > reflected["t"] and after["t"] > e["t"] + 60
    )
    at = (datetime.fromisoformat(action["time"]) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M")
    before = digest_of(trio_run)
    result = subprocess.run(
        [sys.executable, "-m", "smallville", "inspect", str(trio_run), "--agent", agent, "--at", at, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    assert state["time"] == at and state["agent"] == agent
    assert state["activity"] == action["data"]["action"] and state["area"] == action["data"]["area"]
    assert state["plan"] and state["recall"]
    scores = [m["score"] for m in state["recall"]]
    assert scores == sorted(scores, reverse=True)
    assert state["reflections"] and all(r["because"] for r in state["reflections"])
    assert digest_of(trio_run) == before


def test_interview_answers_from_memories_and_cites_them(trio_run):
    events = [json.loads(line) for line in (trio_run / "events.jsonl").read_text().splitlines()]
    heard = next((e for e in events if e["kind"] == "learned" and e["data"]["probe"] == "party" and e["t"] > 0), None)
    assert heard, "nobody heard of the party in ten hours"
    from datetime import datetime, timedelta

    when = (datetime.fromisoformat(heard["time"]) + timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M")
    result = replay_cli(
        "interview", trio_run, heard["agent"], "Do you know about a Valentine's Day party?", "--at", when, "--json"
    )
    answer = json.loads(result.stdout)
    assert "Valentine's Day party" in answer["answer"]
    assert heard["data"]["memory"] in [m["id"] for m in answer["memories"]]
    before = replay_cli(
        "interview",
        trio_run,
        heard["agent"],
        "Do you know about a Valentine's Day party?",
        "--at",
        "2023-02-13 07:30",
        "--json",
    )
    assert "Valentine" not in json.loads(before.stdout)["answer"]
    unknown = subprocess.run(
        [sys.executable, "-m", "smallville", "interview", str(trio_run), "nobody", "hi?"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unknown.returncode == 2 and "unknown agent 'nobody'" in unknown.stderr


def replay_cli(*args):
    result = subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result
