"""The salience memory model (seed 003) beside the paper's: its maths, its settings in a
scenario, a SimConfig and an experiment, and runs under it that resume, fork and are
inspected like any other."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from smallville.brain import make_brain
from smallville.brain import requests as rq
from smallville.brain.base import Brain
from smallville.brain.offline import tag
from smallville.checkpoint import checkpoints, digest, restore
from smallville.embed import make_embedder
from smallville.errors import ExperimentError
from smallville.experiment.spec import load_experiment
from smallville.memory.models import strength
from smallville.run import run_scenario
from smallville.scenario import load_scenario
from smallville.scenario.memorymodel import MemoryModel
from smallville.sim import SimConfig, Simulation
from smallville.sim.log import EventLog

from conftest import CAFE_TRIO, ROOT

YEAR = 365.0


def smallville(*args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def town(tmp_path, memory: str) -> object:
    """Cafe Trio in a folder of its own, with `memory` as its `memory:` block."""
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    if not (tmp_path / "agents").exists():
        shutil.copytree(ROOT / "agents", tmp_path / "agents")
    path = tmp_path / "scenarios" / "trio.yaml"
    path.write_text(CAFE_TRIO.read_text() + "\n" + memory)
    return path


# ---- the maths ----------------------------------------------------------------------


def test_the_seeds_worked_example():
    """A flood rated 1.0 x 1.5 in year 2 has strength 1.11 in year 5, a sunny day rated 0.2
    in year 4 has 0.18, at l = 0.1 per year: the example applies l itself to both memories,
    which is l' = l x (1 - emotion_decay x W_emotion) with emotion_decay 0."""
    tables = MemoryModel()
    flood = tables.source_weight("impact") * tables.emotion_weight("trauma")
    assert flood == 1.5
    assert round(strength(flood, 1.5, days=3 * YEAR, rate=0.1 / YEAR, emotion_decay=0.0), 2) == 1.11
    assert round(strength(0.2, 1.0, days=1 * YEAR, rate=0.1 / YEAR, emotion_decay=0.0), 2) == 0.18
    # with the seed's emotion-adjusted decay (0.5) a trauma fades at a quarter of the rate, a neutral memory at half
    assert round(strength(flood, 1.5, days=3 * YEAR, rate=0.1 / YEAR), 2) == round(1.5 * 2.718281828**-0.075, 2)
    assert strength(0.2, 1.0, days=YEAR, rate=0.1 / YEAR) > strength(
        0.2, 1.0, days=YEAR, rate=0.1 / YEAR, emotion_decay=0.0
    )


def test_retrieval_gives_the_working_memory_then_the_strongest_long_term_memories():
    """The worked example through a town's own retrieval: both memories are in the working
    memory at first; the sunny day (0.2 < 0.6) is never consolidated and goes once two newer
    memories pass it, the flood stays, ranked by its strength."""
    settings = MemoryModel.of(
        {
            "model": "salience",
            "decay_rate": 0.1 / YEAR,
            "emotion_decay": 0.0,
            "window_size": 2,
            "consolidation_prob": 1.0,
            "sources": {"weather": 0.2},
        }
    )
    scenario = load_scenario(CAFE_TRIO)
    with Simulation(
        scenario, make_brain("offline", 1), make_embedder("lexical"), config=SimConfig(memory=settings)
    ) as sim:
        klaus = sim.agents["klaus_mueller"]
        flood = sim.store(
            klaus, "The river flooded the town", "observation", rq.Tag("impact", "trauma"), created=-3 * YEAR * 86400
        )
        sunny = sim.store(
            klaus, "It was a sunny day", "observation", rq.Tag("weather", "neutral"), created=-1 * YEAR * 86400
        )
        assert flood == 0 and sunny is None
        hits = sim.retrieve(klaus, "anything", 10)
        assert [(h.memory.text, round(h.score, 2)) for h in hits] == [
            ("It was a sunny day", 0.18),
            ("The river flooded the town", 1.11),
        ]
        assert hits[0].memory.id == -1 and hits[1].memory.id == 0
        for text in ("a", "b"):
            sim.store(klaus, text, "observation", rq.Tag("routine", "neutral"))
        hits = sim.retrieve(klaus, "anything", 10)
        assert [(h.memory.text, round(h.score, 2)) for h in hits] == [
            ("The river flooded the town", 1.11),
            ("b", 0.1),
            ("a", 0.1),
        ]
        assert klaus.get_state()["working"]["items"][-1][0] == "b" and len(klaus.working.working) == 2


def test_the_filter_keeps_what_passes_the_threshold_by_a_seeded_draw(tmp_path):
    result = run_scenario(
        load_scenario(CAFE_TRIO),
        runs_dir=tmp_path,
        duration=30 * 3600,
        embedder="lexical",
        config=SimConfig(memory="salience"),
    )
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    memories = [e["data"] for e in events if e["kind"] == "memory"]
    kept = [m for m in memories if m["id"] is not None]
    held = [m for m in memories if m["id"] is None]
    assert all(m["salience"] >= 0.6 for m in kept if m["kind"] not in ("seed", "reflection"))
    assert any(m["salience"] >= 0.6 for m in held) and any(m["salience"] < 0.6 for m in held)
    assert {m["source"] for m in memories} >= {"routine", "neighbour", "strategic", "reflection"}
    insights = [m for m in kept if m["kind"] == "reflection"]
    nights = sum(e["kind"] == "reflect" for e in events)  # three a night, or as many as the brain gave
    assert nights and 2 * nights <= len(insights) <= 3 * nights
    assert all(m["salience"] == 9.0 for m in insights)
    assert result.manifest.counts["memories"] == len(kept) and result.manifest.counts["forgotten"] == len(held)
    assert result.manifest.config["memory"]["model"] == "salience"
    sleeps = {(e["agent"], e["t"]) for e in events if e["kind"] == "sleep"}
    assert {(e["agent"], e["t"]) for e in events if e["kind"] == "reflect"} <= sleeps  # written as they fall asleep


def test_a_tag_changes_whether_its_memory_is_kept_but_no_draw():
    """Run-ahead goes on with guessed tags (sim.copies.Copy). That is safe because storing a
    memory takes one consolidation draw whatever its tag, from a generator of its own: the
    agent's generator (where it walks) is left alone, and the memories after are kept or
    not as they would be. The guess, the highest weights, keeps every memory the true tags
    keep."""
    scenario = load_scenario(CAFE_TRIO)
    truth = [rq.Tag(*pair) for pair in (("routine", "neutral"), ("impact", "joy"), ("strategic", "boredom"))] * 20
    kept = {}
    for guessing in (False, True):
        with Simulation(
            scenario, make_brain("offline", 1), make_embedder("lexical"), config=SimConfig(memory="salience")
        ) as sim:
            klaus = sim.agents["klaus_mueller"]
            walks = klaus.rng.getstate()
            texts = [f"memory {i}" for i in range(len(truth))]
            guess = sim.memory.guess(sim.memory.rating_request(klaus, tuple(texts[:30]), "observation"))
            assert set(guess.tags) == {rq.Tag("impact", "trauma")}
            tags = list(guess.tags) + truth[30:] if guessing else truth
            kept[guessing] = [sim.store(klaus, t, "observation", tag) is not None for t, tag in zip(texts, tags)]
            assert klaus.rng.getstate() == walks and klaus.working.draws == len(truth)
    assert kept[True][30:] == kept[False][30:]
    assert all(g or not t for g, t in zip(kept[True][:30], kept[False][:30]))
    assert sum(kept[True][:30]) > sum(kept[False][:30]) > 0


def test_a_state_written_before_the_draws_were_counted_goes_on_from_the_first():
    """A checkpoint of an older engine has no count of draws (they were taken from the
    agent's own generator then): it loads, and goes on from the first draw, the same way
    every time."""
    scenario = load_scenario(CAFE_TRIO)
    with Simulation(
        scenario, make_brain("offline", 1), make_embedder("lexical"), config=SimConfig(memory="salience")
    ) as sim:
        sim.run(10 * 3600)
        state, marks = sim.get_state(), {a: agent.stream.mark() for a, agent in sim.agents.items()}
        assert all(agent["working"]["draws"] > 0 for agent in state["agents"].values())
        for agent in state["agents"].values():
            del agent["working"]["draws"]
        logs = []
        for _ in range(2):
            out = io.StringIO()
            streams = {a: agent.stream.branch(marks[a]) for a, agent in sim.agents.items()}
            with Simulation(
                scenario,
                make_brain("offline", 1),
                make_embedder("lexical"),
                config=SimConfig(memory="salience"),
                log=EventLog(scenario.start, out),
                streams=streams,
            ) as again:
                again.set_state(json.loads(json.dumps(state)), streams)
                assert all(agent.working.draws == 0 for agent in again.agents.values())
                again.run(16 * 3600)
                assert all(agent.working.draws > 0 for agent in again.agents.values())
            logs.append(out.getvalue())
    assert logs[0] == logs[1] and '"kind":"memory"' in logs[0]


def test_the_offline_brain_tags_by_kind_and_words():
    sources, emotions = tuple(dict(MemoryModel().sources)), tuple(dict(MemoryModel().emotions))
    assert tag(
        "Isabella Rodriguez said to Maria Lopez: come to my Valentine's party", "chat", "Maria Lopez", sources, emotions
    ) == rq.Tag("neighbour", "joy")
    assert tag(
        "Maria Lopez said to Isabella Rodriguez: I love your party idea", "chat", "Maria Lopez", sources, emotions
    ) == rq.Tag("personal", "joy")
    assert tag(
        "Klaus Mueller said to Maria Lopez: Hi Maria! How is your day going?", "chat", "Maria Lopez", sources, emotions
    ) == rq.Tag("routine", "neutral")  # small talk
    assert tag("coffee machine is idle", "observation", "Maria Lopez", sources, emotions) == rq.Tag(
        "routine", "boredom"
    )
    assert tag("Maria's plan for today", "plan", "Maria Lopez", ("routine",), ("calm",)) == rq.Tag("routine", "calm")


def test_paper_runs_are_unchanged_by_the_seam(tmp_path):
    """The default model is the paper's, recorded as such; its log is the golden one's (test_engine)."""
    assert SimConfig().memory is None and MemoryModel().model == "paper"
    with Simulation(load_scenario(CAFE_TRIO), make_brain("offline", 1), make_embedder("lexical")) as sim:
        assert sim.config.memory == MemoryModel() and sim.config.weights == (1.0, 1.0, 1.0)
        assert "working" not in sim.agents["klaus_mueller"].get_state()


# ---- settings -----------------------------------------------------------------------


def test_a_scenario_chooses_the_model_its_settings_and_the_weights(tmp_path):
    path = town(
        tmp_path,
        "memory:\n  model: salience\n  window_size: 3\n  emotions: {joy: 1.4, awe: 1.3}\n  weights: original\n",
    )
    scenario = load_scenario(path)
    assert scenario.memory_model.salience and scenario.memory_model.window_size == 3
    assert dict(scenario.memory_model.emotions)["joy"] == 1.4 and dict(scenario.memory_model.emotions)["trauma"] == 1.5
    assert scenario.memory_weights == (0.5, 2.0, 3.0)
    with Simulation(scenario, make_brain("offline", 1), make_embedder("lexical")) as sim:
        assert sim.config.memory.window_size == 3 and sim.config.weights == (0.5, 2.0, 3.0)
        assert sim.agents["klaus_mueller"].stream.weights == (0.5, 2.0, 3.0)
    with Simulation(
        scenario, make_brain("offline", 1), make_embedder("lexical"), config=SimConfig(memory="paper", weights="paper")
    ) as sim:  # a SimConfig wins
        assert not sim.config.memory.salience and sim.config.weights == (1.0, 1.0, 1.0)


def test_bad_memory_settings_are_refused_in_one_line_each(tmp_path):
    path = town(tmp_path, "memory:\n  window_size: 3\n  weights: [1, 2]\n")
    result = smallville("validate", path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert any("window_size is a setting of the salience model" in x and "(at memory.window_size)" in x for x in lines)
    assert any("three numbers" in x and "(at memory.weights)" in x for x in lines)
    path = town(tmp_path, "memory:\n  model: salience\n  consolidation_prob: 2\n")
    result = smallville("validate", path)
    assert result.returncode == 2 and "consolidation_prob must be a number from 0 to 1" in result.stdout + result.stderr
    with pytest.raises(ValueError, match="weights must be paper or original"):
        SimConfig(weights="newest")
    with pytest.raises(ValueError, match="model must be one of paper, salience"):
        SimConfig(memory="forgetful")


def test_an_experiment_compares_memory_models_as_conditions(tmp_path):
    spec = tmp_path / "e.yaml"
    spec.write_text(
        f"scenario: {CAFE_TRIO}\nconditions:\n  paper: {{}}\n  original: {{weights: original}}\n"
        "  salience: {memory: salience}\n  forgetful: {memory: {model: salience, consolidation_prob: 0.3}}\n"
    )
    knobs = {c.name: SimConfig.from_dict(c.knobs) for c in load_experiment(spec).conditions}
    assert knobs["paper"].memory is None and knobs["original"].weights == (0.5, 2.0, 3.0)
    assert knobs["salience"].memory.salience and knobs["forgetful"].memory.consolidation_prob == 0.3
    spec.write_text(f"scenario: {CAFE_TRIO}\nconditions:\n  bad: {{memory: {{model: salience, window: 3}}}}\n")
    with pytest.raises(ExperimentError, match="no setting 'window'"):
        load_experiment(spec)
    assert (ROOT / "experiments" / "memory.yaml").exists() and load_experiment(ROOT / "experiments" / "memory.yaml")


# ---- runs: resume, fork, inspect ----------------------------------------------------


@pytest.fixture(scope="module")
def salient(tmp_path_factory):
    """Cafe Trio under the salience model for 30 hours (a night's reflection included), from the CLI."""
    folder = tmp_path_factory.mktemp("salient")
    path = town(folder, "memory:\n  model: salience\n")
    result = smallville("run", path, "--for", "30h", "--embedder", "lexical", "--quiet", "--runs-dir", folder / "runs")
    assert result.returncode == 0, result.stderr
    (run,) = (folder / "runs").iterdir()
    return folder, path, run


def test_every_checkpoint_of_a_salience_run_brings_back_what_followed(salient):
    folder, path, run = salient
    events = (run / "events.jsonl").read_bytes()
    manifest = json.loads((run / "manifest.json").read_text())
    saved = checkpoints(run)
    assert len(saved) == 30
    for here, there in list(zip(saved, saved[1:]))[14:19]:  # across the night's reflection
        out = io.StringIO()
        scenario = load_scenario(path)
        sim = Simulation(
            scenario,
            make_brain("offline", manifest["seed"]),
            make_embedder("lexical"),
            seed=manifest["seed"],
            config=SimConfig.from_dict(manifest["config"]),
            log=EventLog(scenario.start, out),
        )
        restore(sim, run, here)
        assert digest(sim.get_state()) == here.digest
        assert all(len(a.working.working) <= 5 for a in sim.agents.values())
        sim.run(there.t)
        assert digest(sim.get_state()) == there.digest, here.time
        assert out.getvalue().encode() == events[here.files["events.jsonl"] : there.files["events.jsonl"]]
        sim.close()


def test_a_killed_salience_run_resumes_and_a_fork_goes_on_to_the_same_bytes(salient, tmp_path):
    folder, path, whole = salient
    env = {**os.environ, "SMALLVILLE_FAULT": "kill-at:84600"}
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "smallville",
            "run",
            path,
            "--for",
            "30h",
            "--embedder",
            "lexical",
            "--quiet",
            "--runs-dir",
            tmp_path / "runs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert killed.returncode == -9
    (run,) = (tmp_path / "runs").iterdir()
    resumed = smallville("resume", run, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert (run / "events.jsonl").read_bytes() == (whole / "events.jsonl").read_bytes()

    forked = smallville("fork", whole, "--at", "2023-02-13 20:00", "--runs-dir", tmp_path / "forks", "--quiet")
    assert forked.returncode == 0, forked.stderr
    (fork,) = (tmp_path / "forks").iterdir()
    assert (fork / "events.jsonl").read_bytes() == (whole / "events.jsonl").read_bytes()


def test_inspect_and_interview_read_a_salience_agent(salient):
    _, _, run = salient
    shown = smallville("inspect", run, "--agent", "isabella_rodriguez", "--at", "2023-02-14 08:00", "--json")
    assert shown.returncode == 0, shown.stderr
    recall = json.loads(shown.stdout)["recall"]
    assert 2 < len(recall) <= 7  # the two strongest and the working memory
    assert recall[0]["kind"] == "reflection" and any(r["id"] < 0 for r in recall)
    asked = smallville("interview", run, "isabella_rodriguez", "What did you do yesterday?", "--json")
    assert asked.returncode == 0, asked.stderr
    assert all(m["id"] >= 0 for m in json.loads(asked.stdout)["memories"])


# ---- the LLM path ---------------------------------------------------------------------


def test_a_model_tags_memories_through_the_local_server(tmp_path, monkeypatch):
    """Against the local OpenAI-compatible test server: the tagging prompt offers the tables'
    names, its schema admits only those, and every memory of the run carries them."""
    from smallville.brain import LLMConfig

    from llmserver import LLMServer

    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    settings = MemoryModel.of({"model": "salience", "emotions": {"awe": 1.3}})
    with LLMServer(seed=1, hang=60, prefer={"sleep": False}) as server:  # a morning awake: no night's insights
        brain = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, timeout=60, retries=2)
        result = run_scenario(
            load_scenario(CAFE_TRIO),
            runs_dir=tmp_path,
            duration=2 * 3600,
            brain=brain,
            embedder="lexical",
            config=SimConfig(memory=settings),
        )
        prompts = [p for p in server.prompts if p["kind"] == "tag_memories"]
    assert result.manifest.status == "completed" and result.manifest.requests["tag_memories"] > 0
    assert "rate_importance" not in result.manifest.requests
    assert prompts and "awe" in prompts[0]["user"] and "Each memory's kind" in prompts[0]["user"]
    memories = [
        json.loads(line)["data"]
        for line in (result.path / "events.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "memory"
    ]
    assert memories and all(
        m["source"] in dict(settings.sources) and m["emotion"] in dict(settings.emotions)
        for m in memories
        if m["source"] != "given"
    )
    assert {m["emotion"] for m in memories} - {"neutral"}  # the model's own choices, not the default


def test_each_text_is_tagged_once_per_agent():
    from smallville.brain.wrappers import RatingMemo

    asked = []

    class Counting(Brain):
        name = "counting"

        def answer(self, requests):
            asked.extend(requests)
            return make_brain("offline", 1).answer(requests)

    memo = RatingMemo(Counting())
    sources, emotions = ("routine", "neighbour"), ("neutral", "joy")
    first = rq.TagMemories("ann", "Ann", ("observation",) * 2, ("a party", "a chair"), sources, emotions)
    again = rq.TagMemories("ann", "Ann", ("observation",) * 2, ("a chair", "a lamp"), sources, emotions)
    answers = memo.answer([first]) + memo.answer([again])
    assert answers[1].tags[0] == answers[0].tags[1]
    assert [r.texts for r in asked] == [("a party", "a chair"), ("a lamp",)]


def test_the_original_weights_from_a_scenario_reach_the_run(tmp_path):
    path = town(tmp_path, "memory:\n  weights: original\n")
    result = smallville("run", path, "--for", "1h", "--embedder", "lexical", "--quiet", "--runs-dir", tmp_path / "runs")
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    config = json.loads((run / "manifest.json").read_text())["config"]
    assert config["weights"] == [0.5, 2.0, 3.0] and config["memory"] == {"model": "paper"}
    shown = smallville("inspect", run, "--agent", "klaus_mueller", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["recall"]
