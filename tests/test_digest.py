"""A checkpoint's digest (schema 5) changes with anything in the state, and a checkpoint
reuses what the previous one holds of an agent or a plan only when it is the very same JSON."""

from __future__ import annotations

import hashlib
import json
import random

from smallville.checkpoint import digest
from smallville.checkpoint.parts import Reader, Writer, folder_name


def agent(seed: int = 1) -> dict:
    rng = random.Random(seed)
    rng.random()
    version, numbers, gauss = rng.getstate()
    return {
        "plan": [[0.0, 3600.0, "breakfast", "home"], [3600.0, 7200.0, "work", "office"]],
        "plan_day": 0,
        "since_reflection": 5,
        "relationships": {"bob": "a friend"},
        "talks": {"bob": 1},
        "last_talk": {},
        "earlier_lines": {"bob": ["hi"]},
        "seen": {},
        "mind": {"places": [], "summary": "Ann, 30.", "yesterday": ""},
        "memories": 3,
        "rng": [version, list(numbers), gauss],
    }


def state(**agents) -> dict:
    return {"schema": 2, "t": 0, "positions": {a: [0, 0] for a in agents}, "agents": agents}


def test_the_digest_sees_every_difference():
    base = agent()
    word = json.loads(json.dumps(base))
    word["rng"][1][300] ^= 1  # one bit of the generator
    where = json.loads(json.dumps(base))
    where["rng"][1][624] -= 1  # its position
    typed = {**base, "since_reflection": 5.0}  # 5 and 5.0: equal in Python, not in JSON
    later = {**base, "plan": [[0.0, 3600.0, "breakfast", "home"], [3600.0, 7200.0, "work", "cafe"]]}
    variants = [base, word, where, typed, later, {**base, "memories": 4}]
    digests = {digest(state(ann=v)) for v in variants}
    assert len(digests) == len(variants)
    assert digest(state(ann=base)) == digest(json.loads(json.dumps(state(ann=base))))
    assert digest(state(ann=base, bob=agent(2))) != digest(state(ann=agent(2), bob=base))


def test_schemas_before_5_keep_the_digest_of_the_whole_json():
    whole = state(ann=agent())
    assert digest(whole, 4) == hashlib.sha256(json.dumps(whole, sort_keys=True).encode()).hexdigest()
    assert digest(whole, 4) != digest(whole)


def write(root, t, before, agents: dict) -> tuple[Writer, dict]:
    folder = root / folder_name(t)
    folder.mkdir(parents=True)
    with open(folder / "parts.jsonl", "wb") as out:
        writer = Writer(root, t, out, before)
        refs = {a: writer.record(a, s) for a, s in agents.items()}
    return writer, refs


def test_a_checkpoint_refers_back_to_an_unchanged_agent_and_plan_only(tmp_path):
    root = tmp_path / "checkpoints"
    first, refs1 = write(root, 1, None, {"ann": agent(), "bob": agent(2)})
    typed = {**agent(2), "plan": [[0, 3600.0, "breakfast", "home"], [3600.0, 7200.0, "work", "office"]]}
    second, refs2 = write(root, 2, first.now, {"ann": agent(), "bob": typed})
    assert refs2["ann"] == refs1["ann"] and refs2["bob"][0] == 2  # ann held again, bob written anew
    written = (root / folder_name(2) / "parts.jsonl").read_text()
    assert '[[0,3600.0,"breakfast"' in written  # 0.0 became 0: a new plan
    moved = {**agent(), "since_reflection": 5.0}
    third, refs3 = write(root, 3, second.now, {"ann": moved, "bob": typed})
    assert refs3["bob"] == refs2["bob"] and refs3["ann"][0] == 3
    assert '"plan":[1,' in (root / folder_name(3) / "parts.jsonl").read_text()  # ann's plan: the first's
    reader = Reader(root, {"t": 3})
    back = {a: reader.record(a, ref) for a, ref in refs3.items()}
    reader.close()
    assert json.dumps(back["ann"]) == json.dumps(moved) and json.dumps(back["bob"]) == json.dumps(typed)
    assert digest(state(**back)) == digest(state(ann=moved, bob=typed), agents=third.digests())
