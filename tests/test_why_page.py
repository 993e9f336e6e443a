"""The serve page's "why": the agent's last decision by the time shown, the memories it
recalled, and links that move the clock to the moments it cites (headless Chromium)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

from smallville.run import run_scenario
from smallville.scenario import load_scenario

from browser import CHROMIUM, Browser
from conftest import CAFE_TRIO, ROOT


def test_why_on_the_page_explains_the_last_decision_and_its_links_move_the_clock(tmp_path):
    assert CHROMIUM, "no chromium on PATH: the page's browser test must run, not skip"
    runs = tmp_path / "runs"
    run = run_scenario(load_scenario(CAFE_TRIO), runs_dir=runs, duration=14 * 3600, embedder="lexical").path
    log = [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    say = next(e for e in log if e["kind"] == "say" and e["t"] > 3600)
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
        url = server.stdout.readline().split()[2]
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
    finally:
        server.terminate()
        server.wait(timeout=30)
