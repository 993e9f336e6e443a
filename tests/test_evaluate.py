"""`smallville evaluate`: interviews across conditions, a judge, ratings; offline and through
the local test server (tests/llmserver.py) with a scripted interviewee and judge."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smallville.brain import requests as rq
from smallville.brain.base import Brain
from smallville.brain.offline import OfflineBrain
from smallville.brain.text import shared_fact

TOWN = Path(__file__).parent / "fixtures" / "tiny_town" / "scenarios" / "interviews.yaml"
STRANGER = "I had tea with Cy Dale yesterday."


def smallville(*args, cwd=None) -> subprocess.CompletedProcess:
    """The command line as a user runs it: a clean environment, no API key."""
    env = {k: v for k, v in os.environ.items() if "KEY" not in k and "TOKEN" not in k}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    """The tiny town, 3 simulated hours, the full architecture against one without memory,
    reflection or planning; one seed; evaluated offline as part of the experiment."""
    from smallville.experiment import load_experiment, run_experiment

    folder = tmp_path_factory.mktemp("exp")
    spec = folder / "exp.yaml"
    spec.write_text(
        f"name: tiny\nscenario: {TOWN}\nduration: 3h\nseeds: [1]\nembedder: lexical\n"
        f"out: {folder / 'out'}\nconditions:\n  full: {{}}\n"
        f"  ablated: {{ablate: [memory, reflection, planning]}}\nevaluate: {{judge: offline}}\n"
    )
    result = run_experiment(load_experiment(spec), quiet=True)
    assert result.ok
    return folder / "out"


class Scripted(Brain):
    """What answers behind the test server (echo mode): interviews as the offline brain
    does, except that with nothing recalled (no memory) an agent says nothing comes to mind,
    and Ann claims tea with a man she never met;
    `answers` replaces the answer to a question; the judge ranks first the answers equal
    to the preferred condition's (`preferred`: (agent, question) -> text) and flags every
    answer claiming tea with Cy Dale."""

    def __init__(self, preferred: dict | None = None, answers: dict | None = None) -> None:
        self.offline = OfflineBrain(1)
        self.preferred, self.answers = preferred or {}, answers or {}

    def answer(self, requests):
        return [self._one(r) for r in requests]

    def _one(self, r):
        if isinstance(r, rq.Judge):
            best = self.preferred.get((r.agent, r.question))
            ranking = [label for label, text in r.answers if text == best]
            ranking += [label for label, _ in r.answers if label not in ranking]
            flags = [rq.Flag(label, "had tea with Cy Dale") for label, text in r.answers if "tea with Cy Dale" in text]
            return rq.Verdict(tuple(ranking), tuple(flags))
        if r.question in self.answers:
            return rq.Reply(self.answers[r.question])
        if not r.memories:
            return rq.Reply(STRANGER if r.agent == "ann_lee" else "Nothing comes to mind.")
        return self.offline.answer([r])[0]


@pytest.fixture
def scripted(tmp_path):
    """The local server with a scripted brain behind it, and a brain settings file for it."""
    from llmserver import LLMServer

    with LLMServer() as server:
        server.brain = Scripted()
        settings = tmp_path / "model.yaml"
        settings.write_text(f"model: openai/scripted\napi_base: {server.api_base}\necho_request: true\nretries: 0\n")
        yield server, settings


# ---- the protocol ---------------------------------------------------------------------


def test_the_protocol_has_five_categories_of_five_versioned_questions_filled_per_agent():
    from datetime import datetime

    from smallville.evaluate import load_protocol
    from smallville.scenario import load_scenario

    protocol = load_protocol()
    assert protocol.version >= 1
    counts = {}
    for item in protocol.items:
        counts[item.category] = counts.get(item.category, 0) + 1
    assert counts == dict.fromkeys(("self_knowledge", "memory", "plans", "reactions", "reflections"), 5)
    scenario = load_scenario(str(TOWN))
    ann = protocol.questions_for(scenario, "ann_lee", datetime(2023, 2, 13, 10, 0))
    texts = [q.text for q in ann]
    assert "Who is Bob Ray?" in texts  # someone she knows, by name
    assert "Do you know who is running for mayor?" in texts  # the probe's own question
    assert any("A brass band starts playing in the park." in t for t in texts)
    assert any("10:00 on Tuesday, February 14" in t for t in texts)
    facts = {q.id: q.fact for q in ann if q.fact}
    assert facts == {"memory.1": "person:bob_ray", "memory.2.mayor": "probe:mayor"}
    cy = protocol.questions_for(scenario, "cy_dale", datetime(2023, 2, 13, 10, 0))
    assert [q.id for q in cy] == [q.id for q in ann]  # the same questions for everyone
    assert all("{" not in q.text for q in ann + cy)


def test_a_question_the_scenario_cannot_fill_is_left_out(tmp_path):
    from datetime import datetime

    from smallville.evaluate import load_protocol
    from smallville.scenario import load_scenario

    scenario = load_scenario(str(TOWN))
    plain = type(scenario)(**{**scenario.__dict__, "events": (), "probes": ()})
    ids = [q.id for q in load_protocol().questions_for(plain, "ann_lee", datetime(2023, 2, 13, 10, 0))]
    assert "memory.5" not in ids and not any(i.startswith("memory.2") for i in ids) and len(ids) == 23


def test_a_researchers_protocol_is_checked_and_a_bad_one_named_in_one_line(experiment, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "version: 2\ncategories:\n  memory:\n    - {ask: 'Who is {person}?', fact: person}\n    - Where is {place}?\n"
    )
    done = smallville("evaluate", experiment, "--questions", mine, "--out", tmp_path / "ev")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"smallville: error: {mine}: categories.memory[2]: unknown field {{place}} "
        "(known: name, first_name, person, event, tomorrow, probe)"
    )
    mine.write_text("version: 2\ncategories:\n  memory:\n    - {ask: 'Who is {person}?', fact: person}\n")
    done = smallville("evaluate", experiment, "--questions", mine, "--out", tmp_path / "ev", "--json")
    assert done.returncode == 0, done.stderr
    rows = jsonl(tmp_path / "ev" / "interviews.jsonl")
    assert {r["question_id"] for r in rows} == {"memory.1"} and len(rows) == 2 * 3  # 2 conditions x 3 agents


# ---- offline: interviews and the checks that need no judge ----------------------------


def test_evaluate_interviews_every_agent_of_every_run_and_never_changes_a_run(experiment, tmp_path):
    before = {p.name: folder_digest(p) for p in experiment.iterdir() if (p / "manifest.json").exists()}
    done = smallville("evaluate", experiment, "--out", tmp_path / "ev")
    assert done.returncode == 0, done.stderr
    assert {p.name: folder_digest(p) for p in experiment.iterdir() if p.name in before} == before
    assert "factual" in done.stdout and "29.89" in done.stdout and "21.21" in done.stdout
    rows = jsonl(tmp_path / "ev" / "interviews.jsonl")
    assert {(r["condition"], r["agent"]) for r in rows} == {
        (c, a) for c in ("full", "ablated") for a in ("ann_lee", "bob_ray", "cy_dale")
    }
    assert len({r["time"] for r in rows}) == 1 and rows[0]["time"] == "2023-02-13 10:00"  # the end, for all
    full = [r for r in rows if r["condition"] == "full"]
    assert any(r["memories"] for r in full)  # answers name what they drew on
    assert all(
        shared_fact(m["text"]).rstrip(".") in r["answer"] or r["brain"] != "offline"  # said back
        for r in full
        for m in r["memories"][:1]
    )
    assert not any(r["memories"] for r in rows if r["condition"] == "ablated")  # nothing recalled
    ratings = (tmp_path / "ev" / "ratings.csv").read_text().splitlines()
    assert ratings[0].startswith("condition,runs,answers,trueskill_mu,trueskill_sigma,embellishment_rate")


def test_an_earlier_time_is_the_same_for_every_run_and_a_time_outside_them_is_refused(experiment, tmp_path):
    done = smallville("evaluate", experiment, "--at", "2023-02-13 08:30", "--out", tmp_path / "ev", "--quiet")
    assert done.returncode == 0, done.stderr
    assert {r["time"] for r in jsonl(tmp_path / "ev" / "interviews.jsonl")} == {"2023-02-13 08:30"}
    done = smallville("evaluate", experiment, "--at", "8:30", "--out", tmp_path / "clock", "--quiet")  # the one day's
    assert done.returncode == 0, done.stderr
    assert jsonl(tmp_path / "clock" / "interviews.jsonl") == jsonl(tmp_path / "ev" / "interviews.jsonl")
    done = smallville("evaluate", experiment, "--at", "2023-02-14 08:30", "--out", tmp_path / "ev2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "covers 2023-02-13 07:00" in done.stderr
    assert not (tmp_path / "ev2").exists()
    done = smallville("evaluate", tmp_path)
    assert done.returncode == 2 and "neither a run nor an experiment's folder of runs" in done.stderr


def test_factual_agreement_is_right_on_a_hand_made_run(scripted, tmp_path):
    """Everyone says Bob runs for mayor and that they have no idea who the person asked
    about is; an hour in, only Bob knew of his run, Ann and Bob knew each other from their
    files, and Cy had met nobody: 2 of 6 factual answers agree with the log."""
    from smallville.brain.config import load_config
    from smallville.evaluate import evaluate
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    server, settings = scripted
    run = run_scenario(load_scenario(str(TOWN)), runs_dir=tmp_path / "runs", duration=3600, embedder="lexical")
    learned = [e for e in jsonl(run.path / "events.jsonl") if e["kind"] == "learned"]
    talks = [e for e in jsonl(run.path / "events.jsonl") if e["kind"] == "talk_start"]
    assert [(e["agent"], e["data"]["probe"]) for e in learned] == [("bob_ray", "mayor")] and not talks
    server.brain = Scripted(
        answers={
            "Do you know who is running for mayor?": "Yes: Bob Ray is running for mayor.",
            "Who is Bob Ray?": "I have no idea who that is.",
            "Who is Ann Lee?": "I have no idea who that is.",
        }
    )
    result = evaluate([run.path], brain_settings=load_config(file=settings), out=tmp_path / "ev")
    facts = {
        (a.row["agent"], a.row["fact"].split(":")[0]): (a.row["knew"], a.row["agrees"])
        for a in result.asked
        if "fact" in a.row
    }
    assert facts == {
        ("ann_lee", "probe"): (False, False),
        ("ann_lee", "person"): (True, False),
        ("bob_ray", "probe"): (True, True),
        ("bob_ray", "person"): (True, False),
        ("cy_dale", "probe"): (False, False),
        ("cy_dale", "person"): (False, True),
    }
    [row] = result.conditions
    assert row["factual_agreement"] == round(2 / 6, 4)


# ---- a scripted judge through the local server ----------------------------------------


def test_a_judge_that_prefers_one_condition_rates_it_highest_and_flags_a_stranger(experiment, scripted, tmp_path):
    server, settings = scripted
    out = tmp_path / "ev"
    done = smallville("evaluate", experiment, "--brain-config", settings, "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    rows = jsonl(out / "interviews.jsonl")
    ann_ablated = [r for r in rows if r["agent"] == "ann_lee" and r["condition"] == "ablated"]
    assert ann_ablated and all(r["strangers"] == ["Cy Dale"] for r in ann_ablated)  # she never met him
    assert not any(r["strangers"] for r in rows if r["condition"] == "full")
    # The judge always prefers the ablated condition's answer, which it can only tell by its text.
    server.brain = Scripted(
        preferred={(r["agent"], r["question"]): r["answer"] for r in rows if r["condition"] == "ablated"}
    )
    done = smallville(
        "evaluate",
        experiment,
        "--brain-config",
        settings,
        "--judge-config",
        settings,
        "--out",
        out,
        "--seed",
        "4",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rating = {c["condition"]: c for c in report["conditions"]}
    best, other = rating["ablated"], rating["full"]
    assert best["trueskill_mu"] - best["trueskill_sigma"] > other["trueskill_mu"] + other["trueskill_sigma"]
    assert best["embellishment_rate"] > 0 and other["embellishment_rate"] == 0
    judged = jsonl(out / "judgements.jsonl")
    assert len(judged) == len(rows) // 2  # one per agent and question
    flagged = [j for j in judged if j["embellished"]]
    assert flagged and all(j["agent"] == "ann_lee" for j in flagged)
    assert all(
        f == {"condition": "ablated", "claim": "had tea with Cy Dale"} for j in flagged for f in j["embellished"]
    )
    # anonymised, in a seeded order that puts each condition first sometimes
    firsts = {j["shown"][0]["condition"] for j in judged}
    assert firsts == {"full", "ablated"}
    prompts = server.prompts_of("judge")
    assert len(prompts) == len(judged) and not any("ablated" in p for p in prompts)
    again = smallville(
        "evaluate",
        experiment,
        "--brain-config",
        settings,
        "--judge-config",
        settings,
        "--out",
        out,
        "--seed",
        "4",
        "--json",
    )
    assert json.loads(again.stdout)["conditions"] == report["conditions"]  # replayed from the cache
    assert len(server.prompts_of("judge")) == len(judged)  # no call paid twice


def test_a_garbage_judge_answer_takes_the_safe_default(experiment, scripted, tmp_path):
    server, settings = scripted
    server.fail("invalid_json", 3, match="The answers \\(label")
    done = smallville("evaluate", experiment, "--judge-config", settings, "--out", tmp_path / "ev", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    judged = jsonl(tmp_path / "ev" / "judgements.jsonl")
    fallen = [j for j in judged if "fallback" in j]
    assert len(fallen) == 3 and all(j["ranking"] == [] and j["embellished"] == [] for j in fallen)
    assert all(j["ranking"] for j in judged if "fallback" not in j)


# ---- cost, and experiments ------------------------------------------------------------


def test_a_dry_run_prices_the_evaluation_and_writes_nothing(experiment, tmp_path):
    done = smallville(
        "evaluate",
        experiment,
        "--judge",
        "openai/gpt-4o-mini",
        "--brain",
        "openai/gpt-4o-mini",
        "--dry-run",
        "--json",
        "--out",
        tmp_path / "ev",
    )
    assert done.returncode == 0, done.stderr
    bill = {row["kind"]: row for row in json.loads(done.stdout)["estimate"]}
    questions = len(jsonl(experiment / "evaluation" / "interviews.jsonl"))
    assert bill["interview"]["requests"] == questions and bill["judge"]["requests"] == questions // 2
    assert all(row["prompt_tokens"] > 0 and row["cost_usd"] > 0 for row in bill.values())
    assert not (tmp_path / "ev").exists()


def test_the_offline_judge_rates_and_plots_beside_the_paper(experiment, tmp_path):
    done = smallville("evaluate", experiment, "--judge", "offline", "--plot", "--out", tmp_path / "ev")
    assert done.returncode == 0, done.stderr
    assert "judged by offline" in done.stdout and "29.89" in done.stdout
    assert (tmp_path / "ev" / "believability.png").read_bytes()[:4] == b"\x89PNG"
    rows = (tmp_path / "ev" / "ratings.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 and all(row.split(",")[3] for row in rows)  # a mu for each condition


def test_an_experiment_with_evaluate_gains_believability_columns(experiment):
    from smallville.experiment import load_results

    results = load_results(experiment)
    assert {r["run"] for r in results} == {"full-seed1", "ablated-seed1"}
    assert all(0 <= r["factual_agreement"] <= 1 and r["strangers_rate"] == 0 for r in results)
    summary = {r["condition"]: r for r in load_results(experiment / "summary.csv")}
    assert all(isinstance(r["believability_mu"], float) and r["believability_sigma"] > 0 for r in summary.values())
    assert (experiment / "evaluation" / "judgements.jsonl").exists()
