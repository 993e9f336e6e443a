"""Seed 003's four-part frame (`memory: {frame: four_part}`): a request that carries an
agent's context (`Message.framed`) is laid out as who you are, what you recall (dated), the
current situation and what others around you did. The request's own fields hold the first
three; the frame adds the fourth, what the agent sees the people around it doing now, as its
perception does ("Ann Lee is reading"). The template lays the parts out (`four_part:` in
`brain/templates`).
"""

from __future__ import annotations

from dataclasses import replace

from smallville.brain import requests as rq


def framed(sim, agent, request: rq.Message) -> rq.Message:
    """`request` as the run's `frame` setting lays it out: unchanged under `plain`, or for a
    kind that carries no context of the agent's."""
    style = sim.config.memory.frame
    if style == "plain" or not request.framed:
        return request
    return replace(request, frame=rq.Frame(style, others(sim, agent)))  # type: ignore[type-var]


def others(sim, agent) -> tuple[str, ...]:
    """What the agent sees the others within its vision doing now, by their id."""
    return tuple(f"{sim.agents[o].name} is {sim.agents[o].activity}" for o in sim.world.agents_near(agent.id))
