"""Requests made at one simulated instant are answered together, in a fixed order."""

import simpy

from smallville.brain import requests as rq
from smallville.brain.base import Brain
from smallville.sim.dispatch import Dispatcher


class RecordingBrain(Brain):
    """Answers importance requests with the text length and records each batch it got."""

    name = "recording"

    def __init__(self):
        self.batches = []

    def answer(self, requests):
        self.batches.append([(r.agent, r.texts[0]) for r in requests])
        return [rq.Importance((min(10, len(r.texts[0])),)) for r in requests]


def test_same_instant_requests_form_one_batch_in_agent_order():
    env = simpy.Environment()
    brain = RecordingBrain()
    dispatch = Dispatcher(env, brain)
    resumed = []

    def agent(name, delay, text):
        yield env.timeout(delay)
        answer = yield dispatch.ask(name, rq.RateImportance(name, name, (text,)))
        resumed.append((env.now, name, answer.scores[0]))

    for name, delay in (("zoe", 60), ("amy", 60), ("kim", 120), ("bob", 60)):
        env.process(agent(name, delay, "x" * len(name)))
    env.run()
    assert brain.batches == [[("amy", "xxx"), ("bob", "xxx"), ("zoe", "xxx")], [("kim", "xxx")]]
    assert resumed == [(60, "amy", 3), (60, "bob", 3), (60, "zoe", 3), (120, "kim", 3)]
    assert dispatch.requests["rate_importance"] == 4 and dispatch.batches == 2


def test_a_request_made_after_a_flush_goes_in_the_next_batch_at_the_same_time():
    env = simpy.Environment()
    brain = RecordingBrain()
    dispatch = Dispatcher(env, brain)

    def agent():
        yield dispatch.ask("amy", rq.RateImportance("amy", "Amy", ("first",)))
        yield dispatch.ask("amy", rq.RateImportance("amy", "Amy", ("second",)))
        assert env.now == 0

    env.process(agent())
    env.run()
    assert brain.batches == [[("amy", "first")], [("amy", "second")]]
