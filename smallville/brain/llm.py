"""The LLM brain: each request rendered through its template, sent through litellm, and
parsed and validated into its answer. A batch goes out at once (as many calls in flight as
the throttle allows: `max_concurrency`, or a limit found as answers come back) and comes
back in request order. A request that gets no valid answer is answered `Failed`;
`Retrying` and `WithFallbacks` (wrappers.py) make that safe."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

from smallville.brain import requests as rq
from smallville.brain.answertext import escape_controls
from smallville.brain.base import Brain, Failed, override
from smallville.brain.calls import ChildCalls, InProcess, Reply, import_litellm
from smallville.brain.config import LLMConfig
from smallville.brain.deployments import Deployment, router_spec, targets_of
from smallville.brain.keys import api_key_for
from smallville.brain.ledger import Ledger
from smallville.brain.prompts import STRUCTURED_MODES, AnswerError, check_reply, load_templates
from smallville.brain.throttle import Pool, Throttle
from smallville.errors import BrainError


def price(config, prompt: int, completion: int) -> float:
    """USD for so many tokens of the model of `config`: the configured price, else
    litellm's price map (a deployment list's first model's); a `BrainError` when neither
    knows the model."""
    if config.price_prompt is not None or config.price_completion is not None:
        return prompt * (config.price_prompt or 0.0) + completion * (config.price_completion or 0.0)
    try:
        cost_in, cost_out = import_litellm().cost_per_token(
            model=config.base_model, prompt_tokens=prompt, completion_tokens=completion
        )
    except Exception:
        raise BrainError(
            f"no price known for model {config.base_model!r}: set price_prompt and price_completion "
            "(USD per token) in the brain settings to use --budget"
        ) from None
    return float(cost_in) + float(cost_out)


REASONING_TOKENS = 2048  # room for reasoning, by default, for a model that reasons (docs/llm.md)
GROUP = "deployments"  # the model group a list's Router serves (calls name it as their model)


@dataclass(frozen=True)
class Attempt:
    """One request sent once: its answer (or why there is none), the reply it came in (None:
    no reply), the room it had (`max_tokens`), how long it took, and the slips of the reply's
    text that were mended (`notes`)."""

    request: rq.Message
    answer: rq.Message | Failed
    reply: Reply | None
    max_tokens: int
    seconds: float
    notes: tuple[str, ...] = ()


class LLMBrain(Brain):
    """Answers requests with a model litellm can call (a list of deployments through litellm's
    Router: deployments.py); see the module docstring."""

    def __init__(
        self, config: LLMConfig, ledger: Ledger | None = None, *, child: bool = False, name: str | None = None
    ) -> None:
        self.config = config
        self.name = name or config.label
        self.ledger = ledger or Ledger()
        self.targets = targets_of(config)  # where calls may go: the model, or each deployment
        self._pool: ThreadPoolExecutor | None = None  # (none yet if setting up fails)
        # With `child`, calls are made from a child process (calls.py). It starts first: it
        # imports litellm while this process does the same.
        secrets = secrets_in_environment(*(os.environ.get(t.api_key_env or "") for t in self.targets))
        self.calls = ChildCalls(config.concurrency_limit, config.timeout, secrets) if child else None
        try:
            self._litellm = import_litellm()
            self.keys = {t.label: self._key(t) for t in self.targets}  # (the placeholder key is no secret)
            routers = {GROUP: self._router()} if config.deployments else {}
        except BaseException:
            self.close()
            raise
        if self.calls is not None and routers:
            self.calls.route(routers)
        self.calls = self.calls or InProcess(secrets, routers)
        self.templates = load_templates()
        self.throttle = self._throttle()
        self.ledger.throttles[self.name] = self.throttle
        self._pool = ThreadPoolExecutor(max_workers=config.concurrency_limit, thread_name_prefix="smallville-llm")
        self.answered = 0  # valid answers so far: an unreachable model has none
        self.mode_note: dict | None = None  # the structured-output mode the preflight chose, and why
        self.reasoning, self.reasoning_from = self._reasoning_room()

    def _key(self, target: Deployment) -> str | None:
        """The key calls to `target` send; an unknown model or a missing key is said now."""
        what = "model" if target.label == self.name else f"deployment {target.label!r}: model"
        try:
            self._litellm.get_llm_provider(target.model, api_base=target.api_base)
        except Exception:
            raise BrainError(
                f"unknown brain {target.model!r}: use offline, or a litellm model name such as "
                "openai/gpt-4o-mini or ollama/llama3.1"
            ) from None
        return api_key_for(target.model, target.api_base, target.api_key_env, what=what)

    def _router(self) -> dict:
        """The Router of a model of several deployments, as `calls.routers_of` makes it."""
        c = self.config
        return router_spec(
            GROUP,
            self.targets,
            self.keys,
            routing=c.routing,
            cooldown=c.cooldown,
            allowed_fails=c.allowed_fails,
            timeout=c.timeout,
        )

    def _throttle(self) -> Throttle | Pool:
        """The calls in flight: one limit for a model, one for each deployment of a list."""
        c = self.config
        if not c.deployments:
            return Throttle(c.concurrency_first, c.concurrency_limit, adaptive=c.adaptive, window=c.timeout)
        ceiling = max(c.concurrency_start, c.concurrency_ceiling)
        return Pool(
            {
                t.label: Throttle(
                    t.max_concurrency or c.concurrency_start,
                    t.max_concurrency or ceiling,
                    adaptive=t.max_concurrency is None,
                    window=c.timeout,
                )
                for t in self.targets
            }
        )

    @override
    def describe(self) -> dict:
        out = {
            "name": "llm",
            **self.config.describe(),
            "templates": {k: t.version for k, t in sorted(self.templates.items())},
        }
        if self.mode_note is not None:
            out["structured_check"] = self.mode_note
        if self.reasoning:
            out["reasoning_tokens"] = self.reasoning
            out["reasoning_check"] = {
                "tokens": self.reasoning,
                "from": self.reasoning_from,
                **({"note": self.reasoning_note()} if self.reasoning_from == "preflight" else {}),
            }
        return out

    def _reasoning_room(self) -> tuple[int, str]:
        """The room for reasoning added to every request's max_tokens, and where it comes
        from: the setting, else a default for a model litellm marks as reasoning, else none
        (the preflight may find the model reasoning: `_learn_reasoning`)."""
        if self.config.reasoning_tokens is not None:
            return self.config.reasoning_tokens, "setting"
        try:
            marked = bool(self._litellm.supports_reasoning(model=self.config.base_model))
        except Exception:  # a model litellm does not know
            marked = False
        return (REASONING_TOKENS, "litellm") if marked else (0, "none")

    def _learn_reasoning(self, reply: Reply) -> bool:
        """A model seen reasoning in the preflight, with no room for it set, gets the default
        room from then on. True if the probe should be asked again: it was cut off reasoning."""
        if not reply.reasoning_tokens or self.reasoning or self.config.reasoning_tokens is not None:
            return False
        self.reasoning, self.reasoning_from = REASONING_TOKENS, "preflight"
        return reply.finish_reason == "length"

    def reasoning_note(self) -> str:
        return (
            f"reasoning: the model reasons before it answers: {self.reasoning} tokens of room for it are "
            "added to each request's max_tokens (set reasoning_tokens in the brain settings to choose)"
        )

    @override
    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message | Failed]:
        began = time.perf_counter()
        if len(requests) == 1:
            answers = [self._ask(requests[0])]
        else:
            answers = list(self._pool.map(self._ask, requests))
        if requests:
            self.ledger.add_time(batch=time.perf_counter() - began)
        return answers

    def brain_for(self, kind: str) -> LLMBrain:
        """The LLM brain that answers requests of `kind`: this one (bykind.ByKind has several)."""
        return self

    def prompt_tokens(self, request: rq.Message) -> int:
        """The tokens of the prompt `request` is sent as, by the model's tokenizer."""
        return self.count_tokens(
            self.templates[request.kind].render(request, self.config.structured, self.config.echo_request)
        )

    def count_tokens(self, messages: list[dict]) -> int:
        return int(self._litellm.token_counter(model=self.config.base_model, messages=messages))

    def price(self, prompt: int, completion: int, kind: str | None = None) -> float:
        """USD for so many tokens (of any kind: this model answers them all)."""
        return price(self.config, prompt, completion)

    @override
    def close(self) -> None:
        """End the pool of threads that send calls and what makes the calls (calls under
        way finish first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.calls is not None:
            self.calls.close()

    @override
    def preflight(self, gate: Callable[[list[dict]], AbstractContextManager] | None = None) -> str | None:
        """Small structured calls before the run starts, in the configured mode and, if the
        server refuses it or ignores it, in the next (json_schema -> json_object -> prompt):
        an unreachable model or a refused key stops the run with one line, and a server
        that cannot take the mode is found now rather than paid for all run long. The mode
        found is used from then on (`config.structured`); the line returned says which and
        why when it is not the one configured. Each call is counted in the ledger, and
        goes through `gate` (the budget) if given. Every deployment of a list is checked, and
        the mode is one they all take."""
        if not self.config.preflight:
            return None
        modes = STRUCTURED_MODES[STRUCTURED_MODES.index(self.config.structured) :]
        why: list[str] = []
        fallback = None  # the first mode the server took, if none was followed
        for mode in modes:
            outcome = next((o for o in (self._probe(mode, gate, t) for t in self.targets) if o is not None), None)
            if outcome is None:
                return self._use(mode, why)
            if outcome.startswith("refused"):
                why.append(f"{mode} refused ({outcome.removeprefix('refused: ')})")
            else:
                why.append(f"{mode} not followed ({outcome})")
                fallback = fallback or mode
        if fallback is not None:
            self._use(fallback, why)
            self.mode_note["note"] = (
                f"structured output: {fallback} (no mode's answer followed the schema: "
                f"{'; '.join(why)}); expect retries and fallbacks"
            )
            return self.mode_note["note"]
        where = " or ".join(t.api_base or "its default endpoint" for t in self.targets)
        raise BrainError(f"model {self.name!r} at {where} takes no structured-output mode: {'; '.join(why)}")

    def _use(self, mode: str, why: list[str]) -> str | None:
        configured = self.config.structured
        self.config = replace(self.config, structured=mode)
        self.mode_note = {"mode": mode, "configured": configured, **({"why": why} if why else {})}
        if mode == configured:
            return None
        self.mode_note["note"] = (
            f"structured output: {mode}, because {'; '.join(why)} "
            f"(set structured: {mode} in the brain settings to skip the check)"
        )
        return self.mode_note["note"]

    def _probe(self, mode: str, gate, target: Deployment) -> str | None:
        """None if the server of `target` answers the probe in `mode` as its schema says; else
        what went wrong (`refused: ...` for a server that rejects the mode). Transient faults
        are retried; anything else (no connection, a refused key, an unknown model) is a
        `BrainError` at once."""
        messages = [
            {"role": "system", "content": "You answer in JSON."},
            {
                "role": "user",
                "content": PROBE_PROMPT
                + (
                    ""
                    if mode == "json_schema"
                    else "\nAnswer with one JSON object, and nothing else, that "
                    "follows this JSON schema:\n" + json.dumps(PROBE_SCHEMA, separators=(",", ":"))
                ),
            },
        ]
        fmt = {
            "json_schema": {
                "type": "json_schema",
                "json_schema": {"name": "probe", "schema": PROBE_SCHEMA, "strict": True},
            },
            "json_object": {"type": "json_object", "schema": PROBE_SCHEMA},
        }.get(mode)
        last: Failed | None = None
        attempt = 0
        while attempt <= self.config.retries:
            if last is not None:
                time.sleep(self.config.backoff * 2 ** (attempt - 1))
            attempt += 1
            with gate(messages) if gate else nullcontext():  # a budget that cannot pay stops here
                reply = self._complete(messages, fmt, max_tokens=PROBE_TOKENS + self.reasoning, target=target)
                if isinstance(reply, Failed):
                    last = reply
                    self._account_failed(None, reply)
                else:
                    self._account(None, reply)
            if isinstance(reply, Failed):
                if last.reason == "connection":
                    break
                if fmt is not None and names_format(last.error):
                    return f"refused: {last.error}"
                if last.reason == "refused":
                    break
                continue
            if self._learn_reasoning(reply):
                attempt -= 1  # asked again with room to reason: not a retry
                continue
            try:
                check_reply(PROBE_SCHEMA, reply.content)
                return None
            except AnswerError as exc:
                return str(exc)
        where = target.api_base or "its default endpoint"
        raise BrainError(f"model {target.model!r} at {where} cannot answer: {last}")

    # ---- one request ----------------------------------------------------------------

    def _ask(self, request: rq.Message) -> rq.Message | Failed:
        return self.attempt(request).answer

    def attempt(self, request: rq.Message) -> Attempt:
        """`request` sent once and its reply parsed: the answer or a `Failed`, with what it took."""
        template = self.templates[request.kind]
        messages = template.render(request, self.config.structured, self.config.echo_request)
        room = self.max_tokens_for(request)
        with self.throttle.slot() as ticket:
            began = time.perf_counter()
            reply = self._complete(
                messages,
                template.response_format(self.config.structured, request),
                room,
                self.config.setting(request.kind, "temperature", template.temperature),
            )
            took = time.perf_counter() - began
            if isinstance(reply, Failed):
                self._account_failed(request, reply)
                self.ledger.add_time(busy=took, began=began)
                if reply.reason == "timeout":  # the server's queue may be longer than it gets through in time
                    ticket.timed_out(reply.deployment)
                elif reply.reason == "rate_limit" or reply.retry_after is not None:
                    ticket.rate_limited(reply.deployment)
                return Attempt(request, reply, None, room, took)
            ticket.answered(reply.deployment)
        self.ledger.add_time(busy=took, began=began)
        self._account(request, reply)
        answer, notes = self._parse(request, reply)
        if not isinstance(answer, Failed):
            self.answered += 1
        return Attempt(request, answer, reply, room, took, notes)

    def _parse(self, request: rq.Message, reply: Reply) -> tuple[rq.Message | Failed, tuple[str, ...]]:
        """The answer in `reply`; raw control characters in its strings (a small model's
        grammar may let a newline in) are escaped and said, not refused."""
        template = self.templates[request.kind]
        try:
            return template.parse(request, reply.content), ()
        except AnswerError as exc:
            mended = escape_controls(reply.content or "") if exc.reason == "bad_json" else None
            if mended is not None:
                try:
                    return template.parse(request, mended), ("raw control characters in JSON strings escaped",)
                except AnswerError:
                    pass
            return Failed(exc.reason, f"{exc}{cut_off(reply)}"), ()

    def max_tokens_for(self, request: rq.Message) -> int:
        """The completion tokens `request` may take: its kind's setting, else the shared one,
        else what its template says its largest valid answer needs; and the room for
        reasoning on top, for a model that reasons first (reasoning counts as completion)."""
        answer = self.config.setting(request.kind, "max_tokens", self.templates[request.kind].max_tokens_for(request))
        return int(answer) + int(self.config.setting(request.kind, "reasoning_tokens", self.reasoning))

    def _complete(
        self,
        messages: list[dict],
        response_format: dict | None,
        max_tokens: int,
        temperature: float = 0.0,
        target: Deployment | None = None,
    ) -> Reply | Failed:
        """One call: to `target`, or where the model's calls go (a list's Router picks)."""
        c = self.config
        kwargs: dict[str, Any] = dict(
            model=GROUP,
            messages=messages,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout=c.timeout,
            max_retries=0,
            **c.extra,
        )
        target = target or (None if c.deployments else self.targets[0])
        if target is not None:
            kwargs["model"] = target.model
            if target.api_base:
                kwargs["api_base"] = target.api_base
            if self.keys[target.label]:
                kwargs["api_key"] = self.keys[target.label]
        if response_format:
            kwargs["response_format"] = response_format
        priced = c.price_prompt is None and c.price_completion is None and self.ledger.cost_known
        out = self.calls(kwargs, priced)
        return replace(out, deployment=target.label) if target is not None and c.deployments else out

    def _account(self, request: rq.Message | None, reply: Reply) -> None:
        c = self.config
        prompt, completion = reply.prompt_tokens, reply.completion_tokens
        if c.price_prompt is not None or c.price_completion is not None:
            cost = prompt * (c.price_prompt or 0.0) + completion * (c.price_completion or 0.0)
        else:  # litellm priced each response as it parsed it; a model it has no price for is said once
            if reply.cost is None:
                self.ledger.cost_known = False
            cost = reply.cost or 0.0
        self.ledger.add(
            request.kind if request else "preflight",
            request.agent if request else None,
            calls=1,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost,
            reasoning_tokens=reply.reasoning_tokens,
            cut=int(reply.finish_reason == "length"),
            model=self.name,
            deployment=reply.deployment,
        )

    def _account_failed(self, request: rq.Message | None, failed: Failed) -> None:
        """A call that got no reply; one a list's Router sent nowhere (every deployment
        cooling down) is no call."""
        sent = failed.deployment is not None or not self.config.deployments
        self.ledger.add(
            request.kind if request else "preflight",
            request.agent if request else None,
            calls=int(sent),
            failed=int(sent),
            model=self.name,
            deployment=failed.deployment,
        )


def cut_off(reply: Reply) -> str:
    """What to add to the error of an answer that did not parse, if it was cut off at
    max_tokens (and how much of it went on reasoning)."""
    if reply.finish_reason != "length":
        return ""
    spent = reply.reasoning_tokens and f", {reply.reasoning_tokens} of {reply.completion_tokens} tokens on reasoning"
    return f" (cut off at max_tokens{spent or ''})"


# The preflight's probe: a small answer that uses what the answer schemas use (an enum of
# strings, an enum of integers, a bounded list, a nullable choice), so a server that
# cannot enforce them in a mode is found before the run.
PROBE_PROMPT = 'This is a test of structured output. Answer with colour "blue", score 3, words ["ok"] and who null.'
PROBE_SCHEMA = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "score": {"type": "integer", "enum": list(range(1, 11))},
        "words": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "who": {"type": ["string", "null"], "enum": ["ann", None]},
    },
    "required": ["colour", "score", "words", "who"],
    "additionalProperties": False,
}
PROBE_TOKENS = 60


def names_format(error: str) -> bool:
    """Whether a server's error is about the structured-output request itself."""
    text = error.lower()
    return any(
        word in text
        for word in (
            "response_format",
            "json_schema",
            "response format",
            "json schema",
            "grammar",
            "structured output",
            "guided",
        )
    )


def secrets_in_environment(*extra: str | None) -> list[str]:
    """Values of environment variables that look like keys, and `extra` (the values of the
    variables `api_key_env` names), never to be written anywhere."""
    names = ("KEY", "TOKEN", "SECRET")
    found = [v for k, v in os.environ.items() if any(n in k.upper() for n in names) and len(v) >= 6]
    return sorted(set(found + [e for e in extra if e]), key=len, reverse=True)
