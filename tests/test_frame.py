"""`memory: {frame: four_part}`, seed 003's labelled prompt frame: the prompts that carry an
agent's context in four parts (who you are; what you recall, dated; the current situation;
what others around you did), from the requests of real runs; `plain` as before; through the
test server's strict schemas; on the command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from smallville.brain import LLMConfig
from smallville.brain import requests as rq
from smallville.brain.offline import OfflineBrain
from smallville.brain.prompts import load_templates
from smallville.embed import make_embedder
from smallville.run import run_scenario
from smallville.run.verify import verify
from smallville.scenario import load_scenario
from smallville.sim import SimConfig, Simulation

from conftest import CAFE_TRIO, ROOT

LABELS = ("[Who You Are]", "[Your History]", "[Current Situation]", "[Social Signals]")
FRAMED = ("plan_day", "decompose", "react", "speak", "after_talk")
RECALLED = {"plan_day": ("memories",), "decompose": ("memories",), "react": ("memories", "doing")}
RECALLED |= {"speak": ("memories",), "after_talk": ("memories",)}
HOURS = 4


class Listening(OfflineBrain):
    """The offline brain, keeping every request it is asked, in order."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.asked: list[rq.Message] = []

    def _answer(self, request):
        self.asked.append(request)
        return super()._answer(request)


def lived(frame: str) -> list[rq.Message]:
    """Every request Cafe Trio asks in its first hours under `frame`."""
    scenario = load_scenario(CAFE_TRIO)
    brain = Listening(scenario.seed)
    with Simulation(scenario, brain, make_embedder("lexical"), config=SimConfig(memory={"frame": frame})) as sim:
        sim.run(HOURS * 3600)
    return brain.asked


@pytest.fixture(scope="module")
def runs() -> dict[str, list[rq.Message]]:
    return {frame: lived(frame) for frame in ("plain", "four_part")}


def user(request: rq.Message) -> str:
    return load_templates()[request.kind].render(request)[1]["content"]


def parts(prompt: str) -> dict[str, str]:
    """A four-part prompt's parts by label, checking each label is there once, in order."""
    at = [prompt.find(label) for label in LABELS]
    assert at[0] == 0 and all(a < b for a, b in zip(at, at[1:])), prompt[:400]
    assert all(prompt.count(label) == 1 for label in LABELS), prompt[:400]
    return {label: prompt[a + len(label) : b] for label, a, b in zip(LABELS, at, at[1:] + [len(prompt)])}


def test_four_part_prompts_hold_the_four_labelled_parts_in_order(runs):
    asked = [r for r in runs["four_part"] if r.kind in FRAMED]
    assert {r.kind for r in asked} == set(FRAMED)
    seen_others = 0
    for request in asked:
        frame = rq.frame_of(request)
        assert frame is not None and frame.style == "four_part"
        part = parts(user(request))
        assert request.name in part["[Who You Are]"]
        for field in RECALLED[request.kind]:  # every recalled memory, dated, in what you recall
            for when, text, *_ in getattr(request, field):
                assert f"- {text} ({when})" in part["[Your History]"], (request.kind, text)
        assert re.search(r"It is \w+", part["[Current Situation]"]), request.kind
        for line in frame.others:  # what the others around are doing, in the social part only
            assert f"- {line}" in part["[Social Signals]"] and line not in part["[Who You Are]"]
        seen_others += bool(frame.others)
        if not frame.others:
            assert "(nobody else around)" in part["[Social Signals]"]
    assert seen_others >= 5
    names = {"Isabella Rodriguez", "Klaus Mueller", "Maria Lopez"}
    others = [line for r in asked for line in rq.frame_of(r).others]
    assert all(line.split(" is ", 1)[0] in names for line in others)
    assert any(r.kind == "speak" and r.listener_name in " ".join(rq.frame_of(r).others) for r in asked)


def test_plain_is_today_s_prompts_and_the_frame_only_lays_them_out(runs):
    """Under `plain` no request has a frame and no prompt a label; the same moments under
    `four_part` ask the same questions (the offline run goes the same way), which, with the
    frame taken off, are the plain run's requests and prompts byte for byte."""
    plain, framed = runs["plain"], runs["four_part"]
    assert len(plain) == len(framed) > 100
    for before, after in zip(plain, framed):
        assert rq.frame_of(before) is None and "frame" not in before.to_dict()
        assert not any(label in user(before) for label in LABELS)
        assert rq.unframed(after) == before and user(rq.unframed(after)) == user(before)
        assert (rq.request_key(after) == rq.request_key(before)) == (after.kind not in FRAMED)
    kinds_left = {r.kind for r in framed if r.kind not in FRAMED}
    assert {"summarize", "rate_importance"} <= kinds_left
    assert all(not any(label in user(r) for label in LABELS) for r in framed if r.kind in kinds_left)


def test_a_framed_request_round_trips_and_keys_by_its_frame(runs):
    request = next(r for r in runs["four_part"] if r.kind == "react" and rq.frame_of(r).others)
    again = rq.Message.registry["react"].from_dict(json.loads(json.dumps(request.to_dict())))
    assert again == request and rq.request_key(again) == rq.request_key(request)
    other = rq.Frame("four_part", ())
    assert rq.request_key(rq.replace(request, frame=other)) != rq.request_key(request)


def test_a_four_part_run_through_the_strict_test_server_has_no_refusal_or_fallback(tmp_path, monkeypatch):
    """The strict server refuses no schema and no answer falls back; the run keeps its frame in
    its manifest, so `verify` re-asks the same framed requests, answered from the record."""
    from llmserver import LLMServer

    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with LLMServer(seed=1, modes={"strict"}) as server:
        brain = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, timeout=60, retries=2)
        result = run_scenario(
            load_scenario(CAFE_TRIO),
            runs_dir=tmp_path,
            duration=3600,
            brain=brain,
            embedder="lexical",
            config=SimConfig(memory={"frame": "four_part"}),
        )
        prompts = {kind: server.prompts_of(kind) for kind in ("plan_day", "decompose", "summarize")}
        refusals = list(server.refusals)
    total = result.manifest.usage["total"]
    assert result.manifest.status == "completed" and not refusals
    assert total["retries"] == total["fallbacks"] == 0
    assert result.manifest.config["memory"]["frame"] == "four_part"
    assert prompts["plan_day"] and prompts["decompose"]
    for prompt in prompts["plan_day"] + prompts["decompose"]:
        parts(prompt)
    assert prompts["summarize"] and not any(LABELS[0] in p for p in prompts["summarize"])
    verdict = verify(result.path)  # the server stopped: its record answers every framed request again
    assert verdict.difference is None and verdict.events > 100


def smallville(*args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env
    )


def test_run_set_memory_frame_and_a_bad_value_is_located(tmp_path):
    good = smallville(
        "run", CAFE_TRIO, "--for", "1h", "--embedder", "lexical", "--quiet", "--runs-dir", tmp_path / "good",
        "--set", "memory.frame=four_part",
    )  # fmt: skip
    assert good.returncode == 0, good.stderr
    (folder,) = [p for p in (tmp_path / "good").iterdir() if p.is_dir()]
    assert json.loads((folder / "manifest.json").read_text())["config"]["memory"]["frame"] == "four_part"
    bad = smallville(
        "run", CAFE_TRIO, "--for", "1h", "--quiet", "--runs-dir", tmp_path / "bad", "--set", "memory.frame=sideways"
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()
    assert bad.stderr.strip().splitlines() == [
        "--set memory.frame=sideways:1:14: frame must be one of plain, four_part, got 'sideways' (at memory.frame)"
    ]


def test_a_scenario_s_frame_is_checked_where_it_is_written_under_either_model(tmp_path):
    shutil.copytree(ROOT / "agents", tmp_path / "agents")
    (tmp_path / "scenarios").mkdir()
    path = tmp_path / "scenarios" / "trio.yaml"
    path.write_text(CAFE_TRIO.read_text() + "\nmemory:\n  model: salience\n  frame: fourpart\n")
    line = len(path.read_text().splitlines())
    done = smallville("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (done.stderr + done.stdout).strip().splitlines() == [
        f"{path}:{line}:10: frame must be one of plain, four_part, got 'fourpart' (at memory.frame)"
    ]
    for memory in ("model: paper\n  frame: four_part", "preset: salience-annual"):
        path.write_text(CAFE_TRIO.read_text() + f"\nmemory:\n  {memory}\n")
        assert smallville("validate", path).returncode == 0
        assert load_scenario(path).memory_model.frame == "four_part"


def test_an_experiment_condition_sets_the_frame_and_a_bad_one_is_named(tmp_path):
    from smallville.errors import ExperimentError
    from smallville.experiment.spec import load_experiment

    conditions = "  plain: {}\n  framed:\n    memory: {frame: four_part}\n"
    path = tmp_path / "frame.yaml"
    path.write_text(f"name: frame\nscenario: {CAFE_TRIO}\nduration: 1h\nseeds: [1]\nconditions:\n{conditions}")
    framed = {c.name: c.knobs for c in load_experiment(path).conditions}["framed"]
    assert SimConfig(**framed).memory.frame == "four_part"
    path.write_text(path.read_text() + "  bad:\n    memory: {frame: 4}\n")
    with pytest.raises(ExperimentError, match="condition 'bad': frame must be one of plain, four_part, got 4"):
        load_experiment(path)
