"""Model calls made from a process of their own (brain/calls.py): the same replies as in
this process, and a child that ends with its owner, or fails its calls when it is gone."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from smallville.brain.base import Failed
from smallville.brain.calls import ChildCalls, InProcess, Reply


def kwargs_for(api_base: str, text: str) -> dict:
    return {
        "model": "openai/test",
        "api_base": api_base,
        "api_key": "no-key-needed",
        "max_tokens": 50,
        "timeout": 10,
        "max_retries": 0,
        "messages": [{"role": "user", "content": text}],
    }


def test_a_child_gives_the_replies_litellm_gives_here(server):
    api_base, _ = server
    here, child = InProcess([]), ChildCalls(threads=4, timeout=10, secrets=[])
    try:
        for text in ("hello", "what is the time?"):
            ours, theirs = here(kwargs_for(api_base, text), False), child(kwargs_for(api_base, text), False)
            assert isinstance(theirs, Reply) and theirs == ours
            assert theirs.prompt_tokens > 0 and theirs.content
    finally:
        child.close()
    assert child._link.proc.returncode == 0  # closed: it ended by itself


def test_a_refused_call_fails_alike_in_both_with_no_secret_in_it(server):
    api_base, _ = server
    kwargs = {**kwargs_for(api_base, "hello"), "api_base": "http://127.0.0.1:9/v1", "api_key": "sk-secret-123456"}
    here, child = InProcess(["sk-secret-123456"]), ChildCalls(threads=2, timeout=5, secrets=["sk-secret-123456"])
    try:
        ours, theirs = here(kwargs, False), child(kwargs, False)
    finally:
        child.close()
    assert isinstance(theirs, Failed) and theirs == ours and theirs.reason == "connection"
    assert "sk-secret" not in theirs.error


def test_a_child_that_dies_fails_its_calls_and_those_after(server):
    api_base, _ = server
    child = ChildCalls(threads=2, timeout=10, secrets=[])
    assert isinstance(child(kwargs_for(api_base, "hello"), False), Reply)
    child._link.proc.kill()
    child._link.proc.wait()
    after = child(kwargs_for(api_base, "hello again"), False)
    assert isinstance(after, Failed) and after.reason == "connection" and "gone" in after.error
    child.close()


def test_a_child_ignores_ctrl_c_and_ends_when_forgotten(server):
    api_base, _ = server
    child = ChildCalls(threads=2, timeout=10, secrets=[])
    proc = child._link.proc
    assert isinstance(child(kwargs_for(api_base, "hello"), False), Reply)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends a terminal's process group
    assert isinstance(child(kwargs_for(api_base, "still there?"), False), Reply)
    del child
    gc.collect()
    assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize("child", [True, False])
def test_a_model_brain_answers_the_same_either_way(server, child):
    from smallville.brain import LLMConfig
    from smallville.brain.llm import LLMBrain
    from smallville.brain.requests import RateImportance

    api_base, _ = server
    brain = LLMBrain(LLMConfig(model="openai/test", api_base=api_base, echo_request=True, preflight=False), child=child)
    try:
        request = RateImportance(agent="ann", name="Ann", texts=("Ann baked bread.", "Ann saw a fire."))
        answer = brain.answer([request])[0]
    finally:
        brain.close()
    assert isinstance(brain.calls, ChildCalls if child else InProcess)
    assert not isinstance(answer, Failed) and len(answer.scores) == 2
    assert brain.ledger.total()["calls"] == 1


def test_big_towns_make_their_calls_from_a_child_unless_told_otherwise():
    from smallville.brain import LLMConfig
    from smallville.brain.config import CHILD_AGENTS
    from smallville.errors import BrainError

    auto = LLMConfig(model="openai/test")
    assert auto.calls_in_child(CHILD_AGENTS) and not auto.calls_in_child(25) and not auto.calls_in_child(None)
    assert not LLMConfig(model="openai/test", call_process=False).calls_in_child(1000)
    assert LLMConfig(model="openai/test").merged({"call_process": True}, "brain.yaml").calls_in_child(3)
    with pytest.raises(BrainError, match="call_process='sometimes': use true, false or auto"):
        LLMConfig(model="openai/test", call_process="sometimes")
