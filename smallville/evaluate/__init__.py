"""Believability, measured the paper's way: interviews of every agent of every run in five
categories, a judge that ranks the conditions' answers and flags embellishment, TrueSkill
ratings per condition, and factual agreement with the event log (no judge needed).

    from smallville.evaluate import evaluate
    result = evaluate(["runs/experiments/paper"], judge_settings=LLMConfig(model="openai/gpt-4o-mini"))
"""

from smallville.evaluate.evaluation import Evaluation, evaluate
from smallville.evaluate.protocol import Protocol, Question, load_protocol

__all__ = ["Evaluation", "Protocol", "Question", "evaluate", "load_protocol"]
