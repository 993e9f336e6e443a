"""The runaway guard: a per-agent ceiling on requests per simulated hour, and conversations
that end when a speaker repeats a line or the turn limit is reached, each with an event."""

from __future__ import annotations

import simpy

from smallville.brain import requests as rq
from smallville.brain.base import Brain
from smallville.brain.offline import OfflineBrain
from smallville.embed import make_embedder
from smallville.scenario import load_scenario
from smallville.sim import SimConfig, Simulation
from smallville.sim.dispatch import Dispatcher

from conftest import CAFE_TRIO


class Counting(Brain):
    name = "counting"

    def __init__(self):
        self.asked = []

    def answer(self, requests):
        self.asked += [r.agent for r in requests]
        return [rq.Importance((9,)) for _ in requests]


def test_requests_past_the_ceiling_are_never_sent_and_get_the_safe_default():
    env = simpy.Environment()
    brain = Counting()
    dispatch = Dispatcher(env, brain)
    dispatch.ceiling = 2
    refused, got = [], []
    dispatch.on_refused = lambda agent, request, ceiling: refused.append((env.now, agent, ceiling))

    def agent(name, times):
        for t in times:
            yield env.timeout(t - env.now)
            answer = yield dispatch.ask(name, rq.RateImportance(name, name, ("x",)))
            got.append((env.now, name, answer.scores[0]))

    env.process(agent("amy", [0, 60, 120, 180, 3600]))  # three in the first hour: one too many
    env.process(agent("bob", [0, 60]))
    env.run()
    assert brain.asked.count("amy") == 3 and brain.asked.count("bob") == 2  # 2 + 1 in the next hour
    assert refused == [(120, "amy", 2), (180, "amy", 2)]
    assert [s for t, n, s in got if n == "amy"] == [9, 9, 5, 5, 9]  # refused: importance 5


class Babbling(OfflineBrain):
    """The offline brain, but a speaker who never says goodbye and, with `repeat`, says
    the same line again and again."""

    def __init__(self, seed, repeat):
        super().__init__(seed, talk_chance=1.0)
        self.repeat, self.n = repeat, 0

    def answer(self, requests):
        out = super().answer(requests)
        for i, r in enumerate(requests):
            if isinstance(r, rq.Speak):
                self.n += 1
                out[i] = rq.Utterance("Nice weather, isn't it?" if self.repeat else f"Line number {self.n}.")
        return out


def talks(repeat: bool):
    scenario = load_scenario(CAFE_TRIO)
    sim = Simulation(
        scenario,
        Babbling(scenario.seed, repeat),
        make_embedder("lexical"),
        seed=scenario.seed,
        config=SimConfig(max_turns=6),
    )
    sim.run(12 * 3600)
    return [r for r in sim.log.records if r["kind"] == "talk_end"]


def test_a_speaker_who_repeats_a_line_ends_the_conversation():
    ends = talks(repeat=True)
    assert ends and all(e["data"]["reason"] == "repeat" and e["data"]["lines"] == 2 for e in ends)


def test_a_conversation_that_never_says_goodbye_ends_at_the_turn_limit():
    ends = talks(repeat=False)
    assert ends and all(e["data"]["reason"] == "turn_limit" and e["data"]["lines"] == 6 for e in ends)


def test_a_model_run_keeps_each_agent_under_the_ceiling(tmp_path, monkeypatch):
    import json

    from smallville.brain import LLMConfig
    from smallville.run import run_scenario

    from llmserver import LLMServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scenario = load_scenario(CAFE_TRIO)
    with LLMServer(seed=scenario.seed) as server:
        runs = {}
        for lookahead in (0, 3600):
            brain = LLMConfig(
                model="openai/test-model",
                api_base=server.api_base,
                preflight=False,
                max_requests_per_agent_hour=4,
                lookahead=lookahead,
            )
            before = len(server.bodies)
            runs[lookahead] = run_scenario(
                scenario, runs_dir=tmp_path / str(lookahead), duration=2 * 3600, brain=brain, embedder="lexical"
            )
            sent = [sender(b["messages"][-1]["content"]) for b in server.bodies[before:]]
            most = 4 * 2  # 4 an hour, for 2 hours
            if lookahead:  # and, with run-ahead, calls fetched on a wrong guess and never used
                most += runs[lookahead].manifest.usage["run_ahead"]["unused"]
            assert max(sent.count(a) for a in set(sent)) <= most
    events = [json.loads(line) for line in (runs[0].path / "events.jsonl").read_text().splitlines()]
    refused = [e for e in events if e["kind"] == "brain_refused"]
    assert refused and all(e["data"]["ceiling"] == 4 for e in refused)
    assert (runs[3600].path / "events.jsonl").read_bytes() == (runs[0].path / "events.jsonl").read_bytes()


def sender(prompt: str) -> str:
    """Whom a prompt asks for: the character or speaker it names, or the one whose identity
    line it opens with ("Ann Lee (30): ...")."""
    import re

    found = re.search(r"(?:Character|Speaker): ([A-Z][\w']* [A-Z][\w']*)", prompt) or re.match(
        r"([A-Z][\w']* [A-Z][\w']*) \(", prompt
    )
    return found.group(1)
