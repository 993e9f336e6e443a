"""The pages' "why": on the serve page, the agent's last decision by the time shown, each
plan's and each line said, with the memories recalled and links that move the clock to the
moments cited; the same on the replay page, which has no server (headless Chromium)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest

from smallville.run import Run, run_scenario
from smallville.scenario import load_scenario

from browser import CHROMIUM, Browser
from conftest import CAFE_TRIO, ROOT


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    """14 hours of cafe_trio, offline, and its log."""
    runs = tmp_path_factory.mktemp("runs")
    run = run_scenario(load_scenario(CAFE_TRIO), runs_dir=runs, duration=14 * 3600, embedder="lexical").path
    return run, [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]


def last(log: list[dict], agent: str, kind: str, t: float) -> int:
    """The log line (from 1) of the agent's last event of `kind` at or before `t`."""
    return max(n for n, e in enumerate(log, 1) if e["agent"] == agent and e["kind"] == kind and e["t"] <= t)


def asked(page, link: str, kind: str) -> int:
    """Click the first `link` (a CSS selector) and wait for the account of a `kind`: its log line."""
    page.evaluate("delete document.body.dataset.why; delete document.body.dataset.whyKind; 1")
    page.evaluate(f"document.querySelector({json.dumps(link)}).click(); 1")
    page.wait_for(f"document.body.dataset.whyKind === {json.dumps(kind)}", what=f"the why of a {kind}")
    assert page.evaluate("document.querySelectorAll('#why li.recalled').length") > 0
    assert "request #" in page.evaluate("document.getElementById('why').textContent")
    return int(page.evaluate("document.body.dataset.why"))


def click_bubble(page, target: str, agent: str, scrolled: bool) -> float:
    """Click the middle of `agent`'s speech bubble on the map (`target`: the element clicked)
    and wait for the account of a line: the time of the line the bubble showed."""
    page.evaluate("delete document.body.dataset.why; delete document.body.dataset.whyKind; 1")
    shift = f"{target}.scrollLeft, {target}.scrollTop" if scrolled else "0, 0"
    when = page.evaluate(
        f"""(() => {{
          const b = town.drawn.bubbles.find(b => b[0] === {json.dumps(agent)}), r = {target}.getBoundingClientRect();
          const [sx, sy] = [{shift}];
          {target}.dispatchEvent(new MouseEvent("click", {{clientX: r.left - sx + b[1] + b[3] / 2,
                                                          clientY: r.top - sy + b[2] + b[4] / 2, bubbles: true}}));
          return b[5];
        }})()"""
    )
    page.wait_for('document.body.dataset.whyKind === "say"', what="the why of the line in the bubble")
    return float(when)


def test_why_on_the_page_explains_the_last_decision_and_its_links_move_the_clock(trio, tmp_path):
    assert CHROMIUM, "no chromium on PATH: the page's browser test must run, not skip"
    run, log = trio
    runs = run.parent
    say = next(e for e in log if e["kind"] == "say" and e["t"] > 3600)
    with serving(runs) as url:
        with Browser(tmp_path / "profile") as page:
            page.open(f"{url}run?id={run.name}#agent={say['agent']}")
            page.wait_for("drawn && document.body.dataset.panelAgent", what="the page and its panel")
            page.evaluate(f"slider.value = {say['t']}; following = false; schedule(); 1")
            page.evaluate("document.getElementById('ask-why').click(); 1")
            page.wait_for("document.body.dataset.why", what="the why account")
            assert (
                int(page.evaluate("document.body.dataset.why")) == log.index(say) + 1
                or log[int(page.evaluate("document.body.dataset.why")) - 1]["t"] == say["t"]
            )
            text = page.evaluate("document.getElementById('why').textContent")
            assert "request #" in text and page.evaluate("document.querySelectorAll('#why li.recalled').length") > 0
            links = json.loads(
                page.evaluate(
                    "JSON.stringify([...document.querySelectorAll('#why a.seek')].map(a => Number(a.dataset.t)))"
                )
            )
            target = min(links)
            assert target < say["t"]
            page.evaluate(
                f"[...document.querySelectorAll('#why a.seek')].find(a => Number(a.dataset.t) === {target}).click(); 1"
            )
            page.wait_for(f"drawn && drawn.t === {target}", what="the clock moved to the cited moment")
            page.evaluate(f"slider.value = {say['t']}; following = false; schedule(); panelSoon(); 1")
            page.wait_for(f"document.body.dataset.panelTime === '{say['t']}'", what="the panel at the line")
            line = asked(page, "#said-lines a.why", "say")  # the newest line first
            assert line == last(log, say["agent"], "say", say["t"])
            assert asked(page, "#plan a.why", "plan") == last(log, say["agent"], "plan", say["t"])
            when = click_bubble(page, "scroller", say["agent"], scrolled=True)
            assert int(page.evaluate("document.body.dataset.why")) == last(log, say["agent"], "say", when)
            assert page.evaluate("who.value") == say["agent"]


def party(log: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """The party's `learned` events, and who told each listener (from the chat memory that
    made it know)."""
    memories = {(e["agent"], e["data"]["id"]): e["data"] for e in log if e["kind"] == "memory"}
    learned = [e for e in log if e["kind"] == "learned" and e["data"]["probe"] == "party"]
    told = {
        e["agent"]: memories[e["agent"], e["data"]["memory"]].get("speaker", "")
        for e in learned
        if memories[e["agent"], e["data"]["memory"]]["kind"] == "chat"
    }
    assert told, "nobody was told of the party in 14 hours of cafe_trio"
    return learned, told


def edges(page) -> list[tuple[str, str]]:
    """The page's spread tree as (agent, who told it) pairs, sorted."""
    js = "JSON.stringify([...document.querySelectorAll('#spread li.hop')].map(li => [li.dataset.agent, li.dataset.from]))"
    return sorted(map(tuple, json.loads(page.evaluate(js))))


def pick_party(page) -> None:
    page.evaluate(
        "const p = document.getElementById('probe'); p.value = 'party'; p.dispatchEvent(new Event('change')); 1"
    )


@contextmanager
def serving(runs):
    """`smallville serve` over `runs` as a user starts it, on a free port: its address."""
    env = {"PATH": os.environ["PATH"], "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": os.environ.get("HOME", "/")}
    server = subprocess.Popen(
        [sys.executable, "-m", "smallville", "serve", str(runs), "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], 60)
        assert ready, "the server printed no address"
        yield server.stdout.readline().split()[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_probes_spread_is_a_tree_beside_the_map_and_grows_over_the_town_with_the_clock(trio, tmp_path):
    assert CHROMIUM, "no chromium on PATH: the page's browser test must run, not skip"
    run, log = trio
    learned, told = party(log)
    with serving(run.parent) as url, Browser(tmp_path / "profile") as page:
        page.open(f"{url}run?id={run.name}")
        page.wait_for("drawn && document.body.dataset.caught", what="the page and the whole log")
        pick_party(page)
        page.wait_for("document.body.dataset.spread === 'party'", what="the party's spread")
        assert edges(page) == sorted((e["agent"], told.get(e["agent"], "")) for e in learned)
        first = min(e["t"] for e in learned if e["agent"] in told)  # the first telling
        drawn = []
        for t in (first - 60, first):
            page.evaluate(f"slider.value = {t}; slider.dispatchEvent(new Event('input')); 1")
            page.wait_for(f"drawn.t === {t}", what=f"the town at {t}")
            drawn.append(page.evaluate("drawn.spread"))
        assert drawn == [sum(e["t"] <= t for e in learned) for t in (first - 60, first)] and drawn[0] < drawn[1]
        page.screenshot(tmp_path / "spread.png")
        last_hop = max(learned, key=lambda e: e["t"])
        page.evaluate(
            f"[...document.querySelectorAll('#spread a.seek')].find(a => Number(a.dataset.t) === {last_hop['t']}).click(); 1"
        )
        page.wait_for(
            f"drawn.t === {last_hop['t']} && drawn.spread === {len(learned)}", what="the whole tree at its last telling"
        )
        assert page.errors == []


def test_the_replay_page_has_why_built_in_for_each_line_and_plan(trio, tmp_path):
    """No server: `smallville replay --html` writes each line's and plan's account into the
    page; a cited moment moves the page's clock."""
    assert CHROMIUM, "no chromium on PATH: the page's browser test must run, not skip"
    run, log = trio
    say = next(e for e in log if e["kind"] == "say" and e["t"] > 3600)
    html = tmp_path / "replay.html"
    env = {"PATH": os.environ["PATH"], "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    result = subprocess.run(
        [sys.executable, "-m", "smallville", "replay", str(run), "--html", str(html)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    with Browser(tmp_path / "profile") as page:
        page.open(f"{html.as_uri()}#t={say['t']}&agent={say['agent']}")
        page.wait_for("document.body.dataset.time", what="the replay page")
        assert asked(page, "#said-lines a.why", "say") == last(log, say["agent"], "say", say["t"])
        shown = json.loads(
            page.evaluate(
                "JSON.stringify([...document.querySelectorAll('#why li.recalled')].map(li => li.textContent))"
            )
        )
        assert shown and not any(li.startswith("? ") for li in shown)  # the memories' texts, from the page's own
        assert asked(page, "h3 a.why", "plan") == last(log, say["agent"], "plan", say["t"])
        when = click_bubble(page, "canvas", say["agent"], scrolled=False)
        assert int(page.evaluate("document.body.dataset.why")) == last(log, say["agent"], "say", when)
        target = page.evaluate("Number(document.querySelector('#why a.seek').dataset.t)")
        page.evaluate("document.querySelector('#why a.seek').click(); 1")
        page.wait_for(f"document.body.dataset.time === '{target}'", what="the clock moved to the cited moment")
        learned, told = party(log)  # the party's spread, in the page too
        pick_party(page)
        assert edges(page) == sorted((e["agent"], told.get(e["agent"], "")) for e in learned)
        first = min(e["t"] for e in learned if e["agent"] in told)
        page.evaluate(f"slider.value = {first}; slider.dispatchEvent(new Event('input')); 1")
        assert page.evaluate("document.body.dataset.spreadDrawn") == str(sum(e["t"] <= first for e in learned))
        assert page.errors == []


def test_the_servers_why_and_spread_answer_bad_questions_in_one_line(trio):
    """/api/why's kind and /api/spread's probe: what the pages ask, and their refusals."""
    run, log = trio

    def get(path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(f"{url}{path}", timeout=60) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    with serving(run.parent) as url:
        status, tree = get(f"api/spread?run={run.name}&probe=party")
        assert status == 200 and tree == json.loads(json.dumps(Run.open(run).probe_tree("party")))
        status, body = get(f"api/spread?run={run.name}&probe=rumour")
        assert status == 200 and body["error"].startswith("no probe 'rumour'")
        status, body = get(f"api/why?run={run.name}&agent=klaus_mueller&t=3600&kind=dance")
        assert status == 400 and "kind must be one of" in body["error"] and "\n" not in body["error"]
        status, body = get(f"api/why?run={run.name}&agent=klaus_mueller&t=0&kind=say")
        assert status == 200 and body["error"] == "klaus_mueller made no say decision by 2023-02-13 07:00:00"
        t = next(e["t"] for e in log if e["kind"] == "say" and e["agent"] == "klaus_mueller")
        status, body = get(f"api/why?run={run.name}&agent=klaus_mueller&t={t}&kind=say")
        assert status == 200 and body["line"] == last(log, "klaus_mueller", "say", t)
