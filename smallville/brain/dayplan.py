"""Day plans in hours: the one rule by which a long block of a plan is cut into blocks of an
hour, shared by the offline brain (which plans in hours) and the engine (which breaks a
model's longer blocks into hours, so each is broken into actions an hour at a time)."""

from __future__ import annotations

from smallville.brain import requests as rq

SHORTEST = 15  # minutes: a last piece shorter than this stays with the hour before it


def hourly(start: int, end: int, activity: str, where: str, sleep: bool = False) -> list[rq.Block]:
    """The block from minute `start` to `end` cut at each full hour (a short last piece
    joins the hour before it): blocks of at most an hour and a quarter."""
    blocks, t = [], start
    while t < end:
        nxt = min(end, (t // 60 + 1) * 60)
        if end - nxt < SHORTEST:
            nxt = end
        blocks.append(rq.Block(t, nxt, activity, where, sleep))
        t = nxt
    return blocks
