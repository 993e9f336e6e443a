"""The whole loop: plans, actions, walking, conversations, reflection, diffusion, determinism."""

from __future__ import annotations

import json
import os
from collections import Counter

from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT, manifest_of, simulate

GOLDEN = ROOT / "tests" / "golden" / "cafe_trio_3h.jsonl"


def kinds(sim, kind):
    return [r for r in sim.log.records if r["kind"] == kind]


def test_golden_cafe_trio(tmp_path):
    """Three simulated hours of cafe_trio, byte for byte. After an intended change of
    behaviour, regenerate with SMALLVILLE_UPDATE_GOLDEN=1."""
    result = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path, duration=3 * 3600, embedder="lexical")
    produced = (result.path / "events.jsonl").read_bytes()
    if os.environ.get("SMALLVILLE_UPDATE_GOLDEN"):
        GOLDEN.write_bytes(produced)
    assert produced == GOLDEN.read_bytes()


def test_same_seed_same_log_and_other_seeds_differ():
    logs = [json.dumps(simulate(CAFE_TRIO, 6 * 3600, seed=s).log.records) for s in (5, 5, 6)]
    assert logs[0] == logs[1]
    assert logs[0] != logs[2]


def test_every_agent_plans_its_day_in_hourly_blocks(trio_day):
    plans = kinds(trio_day, "plan")
    assert {p["agent"] for p in plans} == set(trio_day.agents)
    for plan in plans:
        for start, end, activity, _where in plan["data"]["blocks"]:
            if "sleep" not in activity:
                h1, m1 = map(int, start.split(":"))
                h2, m2 = map(int, end.split(":"))
                assert ((h2 * 60 + m2) - (h1 * 60 + m1)) % 1440 <= 75
    assert all(
        a.stream[i].kind != "plan" or "'s plan for " in a.stream[i].text or "'s plan until " in a.stream[i].text
        for a in trio_day.agents.values()
        for i in range(len(a.stream))
    )


def test_actions_last_five_to_fifteen_minutes_and_use_objects(trio_day):
    actions = kinds(trio_day, "action")
    assert len(actions) > 100
    objects = [a for a in actions if a["data"]["object"]]
    assert objects, "nobody used an object"
    used = {o["data"]["object"] for o in kinds(trio_day, "object") if o["data"]["state"].startswith("in use")}
    assert used >= {o["data"]["object"] for o in objects}


def test_walking_takes_tile_time_per_tile_and_lands_on_the_tick(trio_day):
    moves = kinds(trio_day, "move")
    assert moves
    tile_time, tick = trio_day.world.tile_time, trio_day.tick
    for move in moves:
        h, m = map(int, move["data"]["arrive"].split(":"))
        start_h, start_m = map(int, move["time"][11:16].split(":"))
        minutes = ((h * 60 + m) - (start_h * 60 + start_m)) % 1440
        assert minutes * 60 >= move["data"]["tiles"] * tile_time
        assert minutes * 60 < move["data"]["tiles"] * tile_time + tick
        assert move["t"] % tick == 0


def test_both_sides_remember_a_conversation(trio_day):
    starts = kinds(trio_day, "talk_start")
    assert starts
    first = starts[0]
    a, b = trio_day.agents[first["agent"]], trio_day.agents[first["data"]["with"]]
    said = [r["data"]["text"] for r in kinds(trio_day, "say") if {r["agent"], r["data"]["to"]} == {a.id, b.id}]
    for agent in (a, b):
        chats = [agent.stream[i].text for i in range(len(agent.stream)) if agent.stream[i].kind == "chat"]
        assert any(said[0] in c for c in chats)
        assert agent.talks[(b if agent is a else a).id] >= 1


def test_reflection_links_insights_to_existing_evidence(trio_day):
    reflections = [
        (a, a.stream[i])
        for a in trio_day.agents.values()
        for i in range(len(a.stream))
        if a.stream[i].kind == "reflection"
    ]
    assert reflections
    for _agent, memory in reflections:
        assert memory.links and all(link < memory.id for link in memory.links)
    assert kinds(trio_day, "reflect")


def test_world_events_and_whispers_reach_the_right_agents():
    sim = simulate(ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml", 6 * 3600)
    bob = sim.agents["bob_ray"]
    assert any(
        bob.stream[i].text == "Bob decides to repaint his flat." and bob.stream[i].kind == "thought"
        for i in range(len(bob.stream))
    )
    band = [r for r in kinds(sim, "event") if "brass band" in r["data"]["what"]]
    assert len(band) == 1
    for agent_id, agent in sim.agents.items():
        heard = any("brass band" in agent.stream[i].text for i in range(len(agent.stream)))
        assert heard == (agent_id in band[0]["data"]["present"])


def test_two_days_in_the_ville(ville_two_days):
    sim = ville_two_days
    counts = Counter(r["kind"] for r in sim.log.records)
    assert counts["talk_start"] >= 50
    assert sim.counts["reflections"] >= 50
    assert counts["replan"] >= 25
    assert counts["plan"] >= 50  # every agent plans each day
    start, end = sim.probe_start, sim.probe_knowers()
    assert start["party"] == ["isabella_rodriguez"] and start["election"] == ["sam_moore"]
    # experiments/paper.yaml's full condition over seeds 1-10 (agents of one instant going on
    # while one waits to search): 15.8 +- 3.5 of 25 knew of the party by the end, 5.9 +- 2.7 of
    # Sam's candidacy (he tells those he talks with, and some pass it on); this seed has 19
    # and 6. (Seeds 1-5 before that change: 16.0 +- 1.0 and 7.2 +- 3.9.)
    assert abs(len(end["party"]) - 15.8) <= 2 * 3.5, end["party"]
    assert abs(len(end["election"]) - 5.9) <= 3, end["election"]
    assert len(end["election"]) >= 4, end["election"]  # more than without planning (2.4 +- 0.9)
    (party,) = party_attendance(sim)
    assert len(party["told"]) >= 10 and len(party["told_and_attended"]) >= 3, party
    # Reflections build on reflections.
    assert any(
        agent.stream[link].kind == "reflection"
        for agent in sim.agents.values()
        for i in range(len(agent.stream))
        if agent.stream[i].kind == "reflection"
        for link in agent.stream[i].links
    )
    # Relationships change as people talk.
    assert any(r["data"]["talks"] >= 2 for r in kinds(sim, "relationship"))


def party_attendance(sim) -> list[dict]:
    """Who was told of each scenario event beforehand and who came (smallville.metrics)."""
    from smallville.metrics import compute
    from smallville.timefmt import format_sim

    manifest = manifest_of(
        agents=list(sim.agents),
        sim_start=format_sim(sim.scenario.start, 0),
        sim_reached=format_sim(sim.scenario.start, sim.env.now),
    )
    return compute(manifest, sim.log.records, sim.scenario).coordination


def test_news_travels_by_conversation_or_by_being_there(ville_two_days):
    """Everyone who learns of the party heard it in a line said to them (or kept it from a
    conversation of theirs, or reflected on such a memory), saw people talking about it
    (what others see of a conversation is its topic), or was there when it began."""
    sim = ville_two_days
    learned = [r for r in kinds(sim, "learned") if r["data"]["probe"] == "party" and r["t"] > 0]
    said = [(r["t"], r["agent"], r["data"]["to"], r["data"]["text"]) for r in kinds(sim, "say")]
    present = {
        (r["t"], r["data"]["what"], agent) for r in kinds(sim, "event") for agent in r["data"].get("present", ())
    }  # a whisper has no one present
    assert learned
    for r in learned:
        stream = sim.agents[r["agent"]].stream
        memory = stream[r["data"]["memory"]]
        if memory.kind == "reflection":
            assert any(
                stream[link].kind in ("chat", "conversation", "thought", "reflection", "observation")
                for link in memory.links
            ), memory.text
            continue
        if memory.kind == "observation":  # there when it began, or saw people talk about it
            assert (r["t"], memory.text, r["agent"]) in present or " is talking with " in memory.text, memory.text
            continue
        if memory.kind in ("conversation", "thought"):  # what the agent kept of a conversation it was in
            assert any(t <= r["t"] and r["agent"] in (speaker, to) for t, speaker, to, _ in said), memory.text
            continue
        assert memory.kind == "chat", memory.text
        assert any(
            t <= r["t"] and to == r["agent"] and speaker != r["agent"] and memory.text.endswith(": " + text)
            for t, speaker, to, text in said
        ), memory.text


def test_reflection_fires_only_past_the_importance_threshold():
    from smallville.brain.offline import OfflineBrain
    from smallville.embed import make_embedder
    from smallville.sim import SimConfig, Simulation

    scenario = load_scenario(CAFE_TRIO)
    counts = {}
    for threshold in (60.0, 150.0, 10_000.0):
        sim = Simulation(
            scenario, OfflineBrain(1), make_embedder("lexical"), config=SimConfig(reflection_threshold=threshold)
        )
        sim.run(16 * 3600)
        reflections = kinds(sim, "reflect")
        counts[threshold] = len(reflections)
        assert all(threshold <= r["data"]["importance"] < threshold + 40 for r in reflections)
    assert counts[60.0] > counts[150.0] > 0 and counts[10_000.0] == 0


def test_ctrl_c_keeps_what_was_written(tmp_path):
    def interrupt(now):
        if now >= 2 * 3600:
            raise KeyboardInterrupt

    result = run_scenario(load_scenario(CAFE_TRIO), runs_dir=tmp_path, embedder="lexical", on_step=interrupt)
    manifest = json.loads((result.path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["sim_reached"] == "2023-02-13 09:00:00"
    lines = (result.path / "events.jsonl").read_text().splitlines()
    assert len(lines) == manifest["counts"]["events"] > 0
    assert json.loads(lines[-1])["t"] <= 2 * 3600


def test_every_search_finds_its_queries_already_asked_of_the_embedder(monkeypatch):
    # Agents of one instant go on while one waits to search (`Simulation.recalling`): each
    # search's queries are handed to the embedder before it, so that an embedder working
    # elsewhere (USE in its own process) takes the queries of many agents at once. A search
    # that has to ask for its own query (a place that retrieves without `recalling`) fails this.
    from smallville.embed import LexicalEmbedder
    from smallville.memory import MemoryStream

    asked: list[tuple[str, bool]] = []
    searching = [False]
    embed, queries = LexicalEmbedder.embed, MemoryStream.embed_queries

    def counted(self, texts):
        asked.extend((t, searching[0]) for t in texts)
        return embed(self, texts)

    def search(self, found):
        searching[0] = True
        try:
            return queries(self, found)
        finally:
            searching[0] = False

    monkeypatch.setattr(LexicalEmbedder, "embed", counted)
    monkeypatch.setattr(MemoryStream, "embed_queries", search)
    sim = simulate(CAFE_TRIO, 3 * 3600, embedder="lexical")
    recalls = [r for r in sim.log.records if r["kind"] == "recall"]
    assert len(recalls) > 20 and all(q for r in recalls for q, _ in r["data"]["queries"])
    assert asked and [t for t, late in asked if late] == []
