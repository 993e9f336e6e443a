"""The LLM brain: each request rendered through its template, sent through litellm, and
parsed and validated into its answer. A batch goes out at once (up to `max_concurrency`
calls in flight) and comes back in request order. A request that gets no valid answer is
answered `Failed`; `Retrying` and `WithFallbacks` (wrappers.py) make that safe."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from smallville.brain import requests as rq
from smallville.brain.base import Failed
from smallville.brain.config import LLMConfig
from smallville.brain.ledger import Ledger
from smallville.brain.prompts import AnswerError, load_templates
from smallville.errors import BrainError


def import_litellm():
    """litellm, imported on first use only, without fetching its price map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LLMBrain:
    """Answers requests with a model litellm can call; see the module docstring."""

    def __init__(self, config: LLMConfig, ledger: Ledger | None = None) -> None:
        self.config = config
        self.name = config.model
        self.ledger = ledger or Ledger()
        self.templates = load_templates()
        self._litellm = import_litellm()
        self._pool = ThreadPoolExecutor(max_workers=config.max_concurrency, thread_name_prefix="smallville-llm")
        self.answered = 0              # valid answers so far: an unreachable model has none

    def describe(self) -> dict:
        return {"name": "llm", **self.config.describe(),
                "templates": {k: t.version for k, t in sorted(self.templates.items())}}

    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message | Failed]:
        began = time.perf_counter()
        if len(requests) == 1:
            answers = [self._ask(requests[0])]
        else:
            answers = list(self._pool.map(self._ask, requests))
        if requests:
            self.ledger.add_time(batch=time.perf_counter() - began)
        return answers

    def prompt_tokens(self, request: rq.Message) -> int:
        """The tokens of the prompt `request` is sent as, by the model's tokenizer."""
        messages = self.templates[request.kind].render(request, self.config.structured, self.config.echo_request)
        return int(self._litellm.token_counter(model=self.config.model, messages=messages))

    def price(self, prompt: int, completion: int) -> float:
        """USD for so many tokens: the configured price, else litellm's price map; a
        `BrainError` when neither knows the model."""
        c = self.config
        if c.price_prompt is not None or c.price_completion is not None:
            return prompt * (c.price_prompt or 0.0) + completion * (c.price_completion or 0.0)
        try:
            cost_in, cost_out = self._litellm.cost_per_token(model=c.model, prompt_tokens=prompt,
                                                             completion_tokens=completion)
        except Exception:
            raise BrainError(f"no price known for model {c.model!r}: set price_prompt and price_completion "
                             "(USD per token) in the brain settings to use --budget") from None
        return float(cost_in) + float(cost_out)

    def preflight(self) -> None:
        """One small call before the run starts: an unreachable model or a refused key
        stops the run with one line instead of a fallback for every request."""
        if not self.config.preflight:
            return
        last: Failed | None = None
        for attempt in range(self.config.retries + 1):
            try:
                self._complete([{"role": "user", "content": "Reply with the word OK."}], None, max_tokens=5)
                return
            except Exception as exc:  # every provider raises its own types
                last = classify(exc, self._secrets())
            if last.reason in ("connection", "refused"):
                break
            time.sleep(self.config.backoff * 2 ** attempt)
        where = self.config.api_base or "its default endpoint"
        raise BrainError(f"model {self.config.model!r} at {where} cannot answer: {last}")

    # ---- one request ----------------------------------------------------------------

    def _ask(self, request: rq.Message) -> rq.Message | Failed:
        template = self.templates[request.kind]
        messages = template.render(request, self.config.structured, self.config.echo_request)
        began = time.perf_counter()
        try:
            response = self._complete(messages, template.response_format(self.config.structured, request))
        except Exception as exc:
            self.ledger.add(request.kind, request.agent, calls=1)
            self.ledger.add_time(busy=time.perf_counter() - began, began=began)
            return classify(exc, self._secrets())
        self.ledger.add_time(busy=time.perf_counter() - began, began=began)
        self._account(request, response)
        choice = response.choices[0]
        try:
            answer = template.parse(request, choice.message.content)
        except AnswerError as exc:
            cut = " (cut off at max_tokens)" if getattr(choice, "finish_reason", "") == "length" else ""
            return Failed(exc.reason, f"{exc}{cut}")
        self.answered += 1
        return answer

    def _complete(self, messages: list[dict], response_format: dict | None, max_tokens: int | None = None) -> Any:
        c = self.config
        kwargs: dict[str, Any] = dict(model=c.model, messages=messages, temperature=c.temperature,
                                      max_tokens=max_tokens or c.max_tokens, timeout=c.timeout, max_retries=0,
                                      **c.extra)
        if c.api_base:
            kwargs["api_base"] = c.api_base
        if c.api_key:
            kwargs["api_key"] = c.api_key
        if response_format:
            kwargs["response_format"] = response_format
        return self._litellm.completion(**kwargs)

    def _account(self, request: rq.Message, response: Any) -> None:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        c = self.config
        if c.price_prompt is not None or c.price_completion is not None:
            cost = prompt * (c.price_prompt or 0.0) + completion * (c.price_completion or 0.0)
        else:  # litellm prices each response as it parses it; ask again only if it did not
            cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
            if cost is None and self.ledger.cost_known:
                try:
                    cost = self._litellm.completion_cost(completion_response=response, model=c.model)
                except Exception:  # a model litellm has no price for: said once, not asked again
                    self.ledger.cost_known = False
            cost = float(cost or 0.0)
        self.ledger.add(request.kind, request.agent, calls=1, prompt_tokens=prompt,
                        completion_tokens=completion, cost=cost)

    def _secrets(self) -> list[str]:
        return secrets_in_environment(self.config.api_key)


def secrets_in_environment(extra: str | None = None) -> list[str]:
    """Values of environment variables that look like keys, never to be written anywhere."""
    names = ("KEY", "TOKEN", "SECRET")
    found = [v for k, v in os.environ.items() if any(n in k.upper() for n in names) and len(v) >= 6]
    return sorted(set(found + ([extra] if extra else [])), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


_REASONS = (  # litellm exception class names -> Failed.reason; first match wins
    ("Timeout", "timeout"), ("RateLimitError", "rate_limit"), ("APIConnectionError", "connection"),
    ("ServiceUnavailableError", "server"), ("InternalServerError", "server"), ("BadGatewayError", "server"),
    ("AuthenticationError", "refused"), ("PermissionDeniedError", "refused"), ("NotFoundError", "refused"),
    ("BadRequestError", "refused"), ("UnprocessableEntityError", "refused"), ("ContextWindowExceededError", "refused"),
)


def classify(exc: BaseException, secrets: list[str]) -> Failed:
    """A failed call as a `Failed` with a one-line, key-free message."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    reason = next((r for name, r in _REASONS if name in names), None)
    if "Connection error" in str(exc) or isinstance(exc.__cause__, ConnectionError):
        reason = "connection"             # litellm reports a refused connection as a server error
    if reason is None:
        status = getattr(exc, "status_code", None)
        reason = "rate_limit" if status == 429 else "server" if isinstance(status, int) and status >= 500 else (
            "refused" if isinstance(status, int) and 400 <= status < 500 else "server")
    detail = (str(exc).strip().splitlines() or [""])[0][:200]
    return Failed(reason, scrub(f"{type(exc).__name__}: {detail}", secrets), retry_after(exc))


def retry_after(exc: BaseException) -> float | None:
    """The wait a refusing server asked for (its Retry-After header: seconds or an HTTP
    date), if any."""
    for headers in (getattr(exc, "litellm_response_headers", None),
                    getattr(getattr(exc, "response", None), "headers", None)):
        value = headers.get("retry-after") if headers else None
        if not value:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            from email.utils import parsedate_to_datetime

            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
            except (TypeError, ValueError):
                continue
    return None
