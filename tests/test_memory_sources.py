"""Each source document's memory design runnable as written (issue 37): the knobs of the
`memory:` block, their presets, `smallville run --set`, and the documents' worked examples."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from smallville.brain import LLMConfig, make_brain
from smallville.brain import requests as rq
from smallville.embed import make_embedder
from smallville.memory import MemoryStream
from smallville.memory.models.adjust import adjusted, people_pattern
from smallville.memory.models.keywords import keyword_tag
from smallville.run import run_scenario
from smallville.scenario import load_scenario
from smallville.scenario.memorymodel import KEYWORDS, PRESETS, Adjust, MemoryModel
from smallville.sim import SimConfig, Simulation

from conftest import CAFE_TRIO, ROOT

HOUR, DAY = 3600.0, 86400.0
YEAR = 365 * DAY


def smallville(*args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def town(tmp_path, memory: str, agent_type: str = "") -> object:
    """Cafe Trio in a folder of its own with `memory` added to the scenario (and Klaus of type `agent_type`)."""
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    if not (tmp_path / "agents").exists():
        shutil.copytree(ROOT / "agents", tmp_path / "agents")
    if agent_type:
        klaus = tmp_path / "agents" / "klaus_mueller.yaml"
        klaus.write_text(klaus.read_text() + f"\ntype: {agent_type}\n")
    path = tmp_path / "scenarios" / "trio.yaml"
    path.write_text(CAFE_TRIO.read_text() + "\n" + memory)
    return path


def sim_of(memory, **config) -> Simulation:
    return Simulation(
        load_scenario(CAFE_TRIO),
        make_brain("offline", 1),
        make_embedder("lexical"),
        config=SimConfig(memory=memory, **config),
    )


# ---- 000: the worked retrieval example -------------------------------------------------


def unit(cosine: float, axis: int, dim: int = 6) -> np.ndarray:
    """A unit vector whose cosine with the query (axis 0) is `cosine`."""
    v = np.zeros(dim)
    v[0], v[axis] = cosine, math.sqrt(1 - cosine**2)
    return v


def test_000s_retrieval_example_ranks_its_four_memories_in_its_order_with_its_sums():
    """000's example under its settings (decay 0.99 per hour, importance / 10, raw cosine and
    raw recency, weights 1/1/1): the raw sums 2.35 > 2.28 > 1.68 > 1.29. The memories'
    ratings, ages and cosines are chosen to give those sums; min-max ranks them alike."""
    now = 100 * HOUR
    memories = [  # text, importance, hours since last access, cosine with the query
        ("Had a coffee at the cafe", 2, 3, 0.12),
        ("Alice said the report deadline is Friday", 8, 1, 0.56),
        ("Working on the quarterly report", 6, 0, 0.68),
        ("I work best when a deadline is near", 7, 24, 0.19),
    ]
    for normalize in ("fixed", "minmax"):
        stream = MemoryStream(dim=6, decay=0.99, normalize=normalize)
        for axis, (text, importance, hours, cosine) in enumerate(memories, start=1):
            stream.add(
                text,
                unit(cosine, axis),
                importance=importance,
                created=now - hours * HOUR,
                kind="reflection" if text.startswith("I ") else "observation",
            )
        hits = stream.retrieve(np.eye(6)[0], k=4, now=now)
        assert [h.memory.text for h in hits] == [memories[i][0] for i in (1, 2, 3, 0)]
        if normalize == "fixed":
            assert [round(h.score, 2) for h in hits] == [2.35, 2.28, 1.68, 1.29]
            assert round(hits[0].importance, 2) == 0.8 and round(hits[0].relevance, 2) == 0.56


def test_a_preset_of_000_gives_its_streams_its_decay_and_scales():
    with sim_of({"preset": "integration-guide"}) as sim:
        stream = sim.agents["klaus_mueller"].stream
        assert (stream.decay, stream.normalize) == (0.99, "fixed")
        assert sim.config.reflection_threshold == 150 and sim.config.decay == 0.99


# ---- 000: importance adjustments and the insight floor ---------------------------------


def test_000s_adjustments_follow_their_rules():
    """+1 for a named person (not oneself), +1 for an emotion word, +1 for a stated
    preference, +2 for a goal, capped at 10; a memory no rule meets keeps its rating."""
    on, people = Adjust(), people_pattern(["Maria Lopez", "Isabella Rodriguez"])
    assert adjusted(3, "Klaus is reading a book", on, people) == 3
    assert adjusted(3, "Klaus said to Maria: I hate the rain", on, people) == 5  # person, preference
    assert adjusted(4, "Klaus must finish his thesis; it is his priority", on, people) == 6  # goal
    assert adjusted(2, "Isabella Rodriguez was so happy at the party", on, people) == 4  # person, emotion
    assert adjusted(9, "Maria must go, she was afraid and wants to leave", on, people) == 10  # capped
    assert adjusted(3, "Maria likes tea", Adjust(named_person=0, preference=3, cap=5), people) == 5


def test_adjustments_and_the_insight_floor_apply_as_a_memory_is_stored():
    with sim_of({"importance_adjust": {"goal": 3}, "insight_floor": 7}) as sim, sim_of("paper") as plain:
        for s in (sim, plain):
            klaus = s.agents["klaus_mueller"]
            first = len(klaus.stream)
            s.store(klaus, "Klaus needs to finish his paper; it is his goal", "observation", 3)
            s.store(klaus, "Klaus is someone who reads", "reflection", 2)
            s.store(klaus, "Maria Lopez must study", "seed", 2)  # seed memories keep their given rating
            assert len(klaus.stream) == first + 3
        got = [int(m.importance) for m in list(sim.agents["klaus_mueller"].stream)[-3:]]
        plain_got = [int(m.importance) for m in list(plain.agents["klaus_mueller"].stream)[-3:]]
        assert got == [6, 7, 2] and plain_got == [3, 2, 2]


# ---- 001 and 000: the reflection trigger ---------------------------------------------------


def test_001s_reflection_fires_once_its_budget_of_30_is_spent_by_any_memory():
    with sim_of({"preset": "teaching-lab"}) as sim, sim_of("paper", reflection_threshold=30) as paper:
        for s in (sim, paper):
            klaus = s.agents["klaus_mueller"]
            klaus.since_reflection, klaus.since_count = 0.0, 0
            for importance in (10, 10, 9):
                s.store(klaus, f"a chat line rated {importance}", "chat", importance)
            assert not s.memory.reflect_due(s, klaus)
            s.store(klaus, "one more line", "chat", 1)
        assert sim.memory.reflect_due(sim, sim.agents["klaus_mueller"])  # 001 sums every memory: 30
        assert not paper.memory.reflect_due(paper, paper.agents["klaus_mueller"])  # the paper: perceived only
        assert sim.agents["klaus_mueller"].since_reflection == 30


def test_000s_trigger_waits_for_ten_memories_and_bounds_insights_at_depth_three():
    with sim_of({"reflection": {"threshold": 20, "counts": "all", "min_memories": 10, "max_depth": 3}}) as sim:
        klaus = sim.agents["klaus_mueller"]
        klaus.since_reflection, klaus.since_count = 0.0, 0
        for n in range(9):
            sim.store(klaus, f"thing {n}", "observation", 9)
        assert klaus.since_reflection >= 20 and not sim.memory.reflect_due(sim, klaus)
        seen = sim.store(klaus, "thing 9", "observation", 9)
        assert sim.memory.reflect_due(sim, klaus)
        first = sim.store(klaus, "insight one", "reflection", 5, links=(seen,))
        second = sim.store(klaus, "insight two", "reflection", 5, links=(first,))
        third = sim.store(klaus, "insight three", "reflection", 5, links=(second, seen))
        assert [sim.memory.depth(klaus.stream, i) for i in (seen, first, second, third)] == [0, 1, 2, 3]
        assert sim.memory.too_deep(klaus.stream, (third,)) and not sim.memory.too_deep(klaus.stream, (second,))


# ---- 003: salience on a yearly clock, keyword tags -------------------------------------------


def test_003s_flood_and_sunny_day_under_decay_per_year():
    """003's example as its preset computes it: l = 0.1 per year applied to both memories (its
    emotion term, emotion_decay 0). A flood (impact x trauma = 1.5) from three years ago has
    strength 1.11; a sunny day rated 0.2 from one year ago has 0.18."""
    settings = {"preset": "salience-annual", "consolidation_prob": 1.0, "window_size": 2, "sources": {"weather": 0.2}}
    with sim_of(settings) as sim:
        klaus = sim.agents["klaus_mueller"]
        sim.store(
            klaus,
            "House destroyed by flood. Trauma High.",
            "observation",
            rq.Tag("impact", "trauma"),
            created=-3 * YEAR,
        )
        sim.store(klaus, "It was a sunny day", "observation", rq.Tag("weather", "neutral"), created=-YEAR)
        hits = sim.retrieve(klaus, "anything", 10)
        assert sorted((h.memory.text[:5], round(h.score, 2)) for h in hits) == [("House", 1.11), ("It wa", 0.18)]
    with sim_of({**settings, "decay_per": "day"}) as daily:  # the same rate per day: all but gone
        klaus = daily.agents["klaus_mueller"]
        daily.store(
            klaus,
            "House destroyed by flood. Trauma High.",
            "observation",
            rq.Tag("impact", "trauma"),
            created=-3 * YEAR,
        )
        assert daily.retrieve(klaus, "anything", 10)[0].score < 0.01


def test_003s_keywords_tag_its_own_example_sentences():
    model = MemoryModel(model="salience")
    sources, emotions = dict(model.sources), dict(model.emotions)

    def tag(text):
        found = keyword_tag(text, KEYWORDS, sources, emotions)
        return found.source, found.emotion

    assert tag("House destroyed by flood. Trauma High.") == ("impact", "trauma")
    assert tag("The storm did damage to the harbour") == ("impact", "neutral")
    assert tag("My savings are gone") == ("personal", "neutral")
    assert tag("The decision to relocate was made") == ("strategic", "neutral")
    assert tag("Others are leaving town") == ("neighbour", "neutral")
    assert tag("It was a sunny day") == ("routine", "neutral")
    assert tag("My neighbor bought insurance") == ("personal", "neutral")  # the heavier source of the two


def test_an_agent_types_keyword_table_tags_its_agents_memories_without_the_brain(tmp_path):
    path = town(
        tmp_path,
        "memory: {model: salience, tagger: keywords, consolidation_prob: 1}\n"
        "agent_types:\n  bookworm: {impact: [book, books], joy: [read, reading]}\n",
        agent_type="bookworm",
    )
    scenario = load_scenario(path)
    assert scenario.agent("klaus_mueller").type == "bookworm"
    with Simulation(scenario, make_brain("offline", 1), make_embedder("lexical")) as sim:
        klaus, maria = sim.agents["klaus_mueller"], sim.agents["maria_lopez"]
        assert sim.memory.local_ratings(sim, klaus, ("Klaus is reading a book",)) == (rq.Tag("impact", "joy"),)
        assert sim.memory.local_ratings(sim, maria, ("The flood did damage",)) == (rq.Tag("impact", "neutral"),)
        assert sim.memory.local_ratings(sim, maria, ("Maria is reading a book",)) == (rq.Tag("routine", "neutral"),)


def test_an_unknown_type_or_table_name_is_refused_where_it_is_written(tmp_path):
    path = town(
        tmp_path,
        "memory: {model: salience, tagger: keywords}\nagent_types:\n  bookworm: {impakt: [book]}\n",
        agent_type="poet",
    )
    klaus = tmp_path / "agents" / "klaus_mueller.yaml"
    type_line = klaus.read_text().splitlines().index("type: poet") + 1
    table_line = path.read_text().splitlines().index("  bookworm: {impakt: [book]}") + 1
    done = smallville("run", path, "--for", "10m", "--quiet", "--runs-dir", tmp_path / "runs")
    assert done.returncode == 2 and "Traceback" not in done.stderr and not (tmp_path / "runs").exists()
    assert (
        f"{path}:{table_line}:14: unknown key 'impakt' (did you mean 'impact'?) (at agent_types.bookworm.impakt)"
        in done.stderr
    )
    assert (
        f"agents/klaus_mueller.yaml:{type_line}:7: type 'poet' is not one of the scenario's agent_types"
        f" (bookworm) (at type)"
    ) in done.stderr


def test_a_night_reflects_on_every_memory_of_the_day_kept_or_not(tmp_path):
    """`reflect_on: all` gives the night's reflection every memory since the last, the ones
    not consolidated too; `kept` (the default) those kept and the working memory's. (A window
    that holds the whole day, so that what `all` reads holds what `kept` reads.)"""
    read = {}
    for reflect_on in ("kept", "all"):
        config = SimConfig(memory={"model": "salience", "reflect_on": reflect_on}, reflection_window=1000)
        result = run_scenario(
            load_scenario(CAFE_TRIO),
            runs_dir=tmp_path / reflect_on,
            duration=20 * HOUR,
            embedder="lexical",
            config=config,
        )
        events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
        nights = [e for e in events if e["kind"] == "reflect"]
        assert nights and result.manifest.counts["forgotten"] > 0
        read[reflect_on] = {e["agent"]: e["data"]["importance"] for e in nights}
    assert read["kept"].keys() == read["all"].keys()
    assert all(read["all"][a] > read["kept"][a] for a in read["kept"]), read


def test_reflect_every_waits_that_long_after_the_last(tmp_path):
    result = run_scenario(
        load_scenario(CAFE_TRIO),
        runs_dir=tmp_path,
        duration=20 * HOUR,
        embedder="lexical",
        config=SimConfig(memory={"model": "salience", "reflect_every": "2d"}),
    )
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "sleep" for e in events) and not any(e["kind"] == "reflect" for e in events)


# ---- presets, settings, the command line -----------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_validates_and_runs_offline(tmp_path, name):
    path = town(tmp_path, f"memory: {{preset: {name}}}\n")
    assert smallville("validate", path).returncode == 0
    result = run_scenario(load_scenario(path), runs_dir=tmp_path / "runs", duration=2 * HOUR, embedder="lexical")
    assert result.manifest.status == "completed"
    config = result.manifest.config
    assert config["memory"] == MemoryModel.of({"preset": name}).to_dict()
    assert config["weights"] == list(MemoryModel.of({"preset": name}).weights or (1.0, 1.0, 1.0))


def test_a_presets_settings_yield_to_the_blocks_own(tmp_path):
    scenario = load_scenario(
        town(tmp_path, "memory: {preset: teaching-lab, decay: 0.98, reflection: {threshold: 45}}\n")
    )
    m = scenario.memory_model
    assert (m.decay, m.reflection.threshold, m.reflection.counts, m.reflection.window) == (0.98, 45, "all", 20)


def test_a_setting_of_the_other_model_is_refused_where_it_is_written(tmp_path):
    path = town(tmp_path, "memory:\n  model: salience\n  reflection: {threshold: 30}\n  tagger: keywords\n")
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("  reflection:"))
    done = smallville("validate", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        f"{path}:{line}:15: reflection is a setting of the paper model: it does not go with model: salience"
        f" (at memory.reflection)"
    ) in done.stderr + done.stdout
    paper = town(tmp_path, "memory: {tagger: keywords}\n")
    assert "tagger is a setting of the salience model" in smallville("validate", paper).stderr


def test_run_set_changes_memory_settings_and_a_bad_one_is_located(tmp_path):
    good = smallville(
        "run",
        CAFE_TRIO,
        "--for",
        "1h",
        "--embedder",
        "lexical",
        "--quiet",
        "--runs-dir",
        tmp_path,
        "--set",
        "memory.preset=teaching-lab",
        "--set",
        "memory.reflection.threshold=40",
    )
    assert good.returncode == 0, good.stderr
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    config = json.loads((folder / "manifest.json").read_text())["config"]
    assert config["decay"] == 0.99 and config["reflection_threshold"] == 40
    assert config["memory"]["reflection"]["counts"] == "all"
    bad = smallville(
        "run",
        CAFE_TRIO,
        "--for",
        "1h",
        "--quiet",
        "--runs-dir",
        tmp_path / "bad",
        "--set",
        "memory.reflection.counts=some",
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()
    assert bad.stderr.strip().splitlines()[-1] == (
        "--set memory.reflection.counts=some:1:26: reflection.counts "
        "must be one of perceived, all, got 'some' "
        "(at memory.reflection.counts)"
    )


def test_a_preset_runs_through_the_test_server(tmp_path, monkeypatch):
    from llmserver import LLMServer

    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    path = town(tmp_path, "memory: {preset: integration-guide, reflection: {threshold: 20, min_memories: 3}}\n")
    with LLMServer(seed=1) as server:
        brain = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, timeout=60, retries=2)
        result = run_scenario(
            load_scenario(path), runs_dir=tmp_path / "runs", duration=2 * HOUR, brain=brain, embedder="lexical"
        )
    assert result.manifest.status == "completed"
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    insights = [e["data"]["importance"] for e in events if e["kind"] == "memory" and e["data"]["kind"] == "reflection"]
    assert insights and min(insights) >= 7


def test_a_killed_run_with_set_knobs_resumes_to_the_same_bytes(tmp_path):
    """What `--set` gave is in the manifest's config, so a resumed run keeps it (000's fixed
    scales on the restored streams too) and ends as the run that was not interrupted."""
    knobs = ["--set", "memory.preset=integration-guide", "--set", "memory.reflection.threshold=40"]
    whole = smallville(
        "run", CAFE_TRIO, "--for", "6h", "--embedder", "lexical", "--quiet", "--runs-dir", tmp_path / "whole", *knobs
    )
    assert whole.returncode == 0, whole.stderr
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "smallville",
            "run",
            CAFE_TRIO,
            "--for",
            "6h",
            "--embedder",
            "lexical",
            "--quiet",
            "--runs-dir",
            tmp_path / "runs",
            *knobs,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "SMALLVILLE_FAULT": "kill-at:14400", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert killed.returncode == -9
    (run,) = (tmp_path / "runs").iterdir()
    assert smallville("resume", run, "--quiet").returncode == 0
    (done,) = (tmp_path / "whole").iterdir()
    events = (run / "events.jsonl").read_bytes()
    assert events == (done / "events.jsonl").read_bytes() and b'"kind":"reflect"' in events
