"""Where model calls are made: through litellm in this process, or in a process of its own.

litellm spends about 5 ms of CPU on every call (building the request, parsing and pricing
the response). Under Python's global lock that is time the simulation cannot have: in a
250-agent town it was three quarters of the run's CPU. `ChildCalls` makes the calls from a
child process (`python -m smallville.brain.calls`, so on another core), talking JSON lines
over its stdin and stdout; `InProcess` makes them here. Both give, for one call, a `Reply`
or a `Failed`, worked out by the same function (`call`), so the two cannot differ.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, replace
from itertools import count

from smallville.brain.answertext import split
from smallville.brain.base import Failed


def import_litellm():
    """litellm, imported on first use only, without fetching its price map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


@dataclass(frozen=True)
class Reply:
    """What a call brought back: the answer's text (any reasoning apart: `answertext.split`),
    why it ended, its tokens (the completion's include those it reasoned with), and its cost
    as litellm priced it (None: litellm knows no price for the model)."""

    content: str | None
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    reasoning_tokens: int = 0
    deployment: str | None = None  # the deployment of a model's list that answered (deployments.py)


UNPRICED: set[str] = set()  # models litellm has said it knows no price for


def call(litellm, kwargs: dict, secrets: list[str], price: bool, routers: dict | None = None) -> Reply | Failed:
    """One `litellm.completion(**kwargs)`, or a Router's completion when `kwargs["model"]`
    names one of `routers` (a model of several deployments), as a `Reply`, or as a `Failed`
    whose message holds none of `secrets`. `price`: ask litellm for the cost if the response
    lacks it."""
    router = (routers or {}).get(kwargs["model"])
    try:
        response = (router or litellm).completion(**kwargs)
    except Exception as exc:  # every provider raises its own types
        failed = classify(exc, secrets)
        return replace(failed, deployment=getattr(exc, "failed_deployment_id", None)) if router else failed
    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None) or {}
    model = (hidden.get("litellm_model_name") if router else None) or kwargs["model"]
    cost = cost_of(litellm, response, model, hidden.get("response_cost"), price)
    completion = int(getattr(usage, "completion_tokens", 0) or 0)
    text = split(choice.message.content, getattr(choice.message, "reasoning_content", None))
    return Reply(
        text.answer,
        getattr(choice, "finish_reason", "") or "",
        int(getattr(usage, "prompt_tokens", 0) or 0),
        completion,
        None if cost is None else float(cost),
        reasoning_tokens(litellm, model, usage, text.reasoning, completion),
        hidden.get("model_id") if router else None,
    )


def cost_of(litellm, response, model: str, cost: float | None, price: bool) -> float | None:
    """A response's cost as litellm priced it; None for a model litellm has no price for (a
    Router prices those at 0). `price`: ask litellm if the response says nothing."""
    if model in UNPRICED:
        return None
    try:
        if cost is None and price:
            return litellm.completion_cost(completion_response=response, model=model)
        if cost == 0:
            litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    except Exception:  # a model litellm has no price for: not asked again (a sixth of a call's CPU)
        UNPRICED.add(model)
        return None
    return cost


def routers_of(specs: dict[str, dict]) -> dict:
    """litellm's Routers, by the model group each serves (deployments.router_spec gives them)."""
    if not specs:
        return {}
    litellm = import_litellm()
    return {group: litellm.Router(**spec) for group, spec in specs.items()}


def reasoning_tokens(litellm, model: str, usage, reasoning: str, completion: int) -> int:
    """The completion tokens spent reasoning: as the server counted them, else (a server that
    puts `<think>` in the content and counts it all as completion) the reasoning's own count."""
    details = getattr(usage, "completion_tokens_details", None)
    counted = int(getattr(details, "reasoning_tokens", 0) or 0)
    if counted or not reasoning:
        return counted
    return min(completion, int(litellm.token_counter(model=model, text=reasoning)))


class InProcess:
    """Calls made by litellm in this process, through the Routers of `routers` (specs by
    model group) for models of several deployments; no error message holds any of `secrets`."""

    def __init__(self, secrets: list[str], routers: dict[str, dict] | None = None) -> None:
        self.litellm = import_litellm()
        self.secrets = secrets
        self.routers = routers_of(routers or {})

    def __call__(self, kwargs: dict, price: bool) -> Reply | Failed:
        return call(self.litellm, kwargs, self.secrets, price, self.routers)

    def close(self) -> None:
        """Nothing to end."""


class ChildCalls:
    """Calls made by litellm in a child process, each waited for by the thread that asked
    (so a throttle and run-ahead work as with `InProcess`). The child starts at once and
    imports litellm while this process goes on; it ignores Ctrl-C (the run handles it) and
    ends when this is closed or forgotten, or this process goes away. Calls it can no
    longer make come back `Failed` ("connection"), as from a server that went away. No
    error message holds any of `secrets` (given to the child once, through its stdin);
    `route` tells it the Routers of a model of several deployments before its first call."""

    def __init__(self, threads: int, timeout: float, secrets: list[str]) -> None:
        self.patience = 2 * timeout + 60.0  # a child that says nothing for this long is taken as gone
        proc = subprocess.Popen(
            [sys.executable, "-m", "smallville.brain.calls", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            encoding="utf-8",
        )
        self._link = _Link(proc)
        self._link.write(json.dumps(secrets))  # the first line: what no message may show
        self._numbers = count()
        threading.Thread(target=self._link.read, name="smallville-calls-reader", daemon=True).start()
        self._forget = weakref.finalize(self, self._link.end)

    def route(self, routers: dict[str, dict]) -> None:
        """The Routers by model group (`routers_of`'s specs, keys and all: through the pipe only)."""
        self._link.write(json.dumps({"routers": routers}))

    def __call__(self, kwargs: dict, price: bool) -> Reply | Failed:
        n = next(self._numbers)
        future = self._link.send(n, json.dumps([n, kwargs, price]))
        if isinstance(future, Failed):
            return future
        try:
            return future.result(timeout=self.patience)
        except FutureTimeout:
            self._link.drop(n)
            return Failed("timeout", f"no answer from the process making model calls in {self.patience:.0f} s")

    def close(self) -> None:
        """Let the calls under way finish, then end the child."""
        self._forget.detach()
        self._link.end()
        try:
            self._link.proc.wait(timeout=self.patience)
        except subprocess.TimeoutExpired:
            self._link.proc.kill()
            self._link.proc.wait()


class _Link:
    """The pipes to a child and the calls waiting for it (apart from `ChildCalls`, so the
    thread that reads answers does not keep it alive)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.waiting: dict[int, Future] = {}
        self.lock = threading.Lock()
        self.gone: str | None = None

    def write(self, line: str) -> bool:
        """Send the child a line; False (and gone from then on) if it cannot take it."""
        with self.lock:
            if self.gone is None:
                try:
                    self.proc.stdin.write(line + "\n")
                    self.proc.stdin.flush()
                    return True
                except (OSError, ValueError):
                    self.gone = "it could not be written to"
            return False

    def send(self, n: int, line: str) -> Future | Failed:
        """Call `n`, as `line`: a future of its reply, or why it cannot be made."""
        future: Future = Future()
        with self.lock:
            self.waiting[n] = future
        if self.write(line):
            return future
        self.drop(n)
        return self.failed()

    def drop(self, n: int) -> None:
        with self.lock:
            self.waiting.pop(n, None)

    def read(self) -> None:
        try:
            for line in self.proc.stdout:
                n, out = json.loads(line)
                reply = Reply(**out) if "content" in out else Failed(**out)
                with self.lock:
                    future = self.waiting.pop(n, None)
                if future is not None:
                    future.set_result(reply)
        except (OSError, ValueError, TypeError) as exc:  # a broken channel: the calls waiting fail below
            self.gone = f"its answers could not be read: {exc}"
        status = self.proc.wait()
        self.proc.stdout.close()
        with self.lock:
            self.gone = self.gone or f"it ended with status {status}"
            left, self.waiting = list(self.waiting.values()), {}
        for future in left:
            future.set_result(self.failed())

    def end(self) -> None:
        """No more calls: the child finishes those under way and ends."""
        with self.lock:
            self.gone = self.gone or "it was closed"
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def failed(self) -> Failed:
        return Failed("connection", f"the process making model calls is gone ({self.gone})")


def serve(threads: int) -> None:
    """The child: after a first line of secrets (the strings no message may show), calls
    read from stdin as JSON lines `[n, kwargs, price]`, each answered on stdout as
    `[n, reply or failed]` when it is done, `threads` at a time; a line `{"routers": ...}`
    makes the Routers the calls after it may name (`routers_of`)."""
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C and SIGTERM are the run's to handle, not ours
        signal.signal(sig, signal.SIG_IGN)
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything printed goes to stderr, not the channel
    secrets = json.loads(sys.stdin.readline() or "[]")
    litellm = import_litellm()
    routers: dict = {}
    lock = threading.Lock()

    def work(n: int, kwargs: dict, price: bool) -> None:
        try:
            out = call(litellm, kwargs, secrets, price, routers)
        except BaseException as exc:  # never leave the parent waiting
            out = Failed("server", scrub(f"{type(exc).__name__}: {one_line(exc)}", secrets))
        with lock:
            channel.write(json.dumps([n, asdict(out)]) + "\n")
            channel.flush()

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="smallville-call") as pool:
        for line in sys.stdin:
            message = json.loads(line)
            if isinstance(message, dict):
                routers.update(routers_of(message["routers"]))
            else:
                pool.submit(work, *message)


# ---- failures as one line ---------------------------------------------------------------

_REASONS = (  # litellm exception class names -> Failed.reason; first match wins
    ("Timeout", "timeout"),
    ("RateLimitError", "rate_limit"),
    ("APIConnectionError", "connection"),
    ("ServiceUnavailableError", "server"),
    ("InternalServerError", "server"),
    ("BadGatewayError", "server"),
    ("AuthenticationError", "refused"),
    ("PermissionDeniedError", "refused"),
    ("NotFoundError", "refused"),
    ("BadRequestError", "refused"),
    ("UnprocessableEntityError", "refused"),
    ("ContextWindowExceededError", "refused"),
)


def classify(exc: BaseException, secrets: list[str]) -> Failed:
    """A failed call as a `Failed` with a one-line, key-free message."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    reason = next((r for name, r in _REASONS if name in names), None)
    if "Connection error" in str(exc) or isinstance(exc.__cause__, ConnectionError):
        reason = "connection"  # litellm reports a refused connection as a server error
    if reason is None:
        status = getattr(exc, "status_code", None)
        reason = (
            "rate_limit"
            if status == 429
            else "server"
            if isinstance(status, int) and status >= 500
            else ("refused" if isinstance(status, int) and 400 <= status < 500 else "server")
        )
    return Failed(reason, scrub(f"{type(exc).__name__}: {one_line(exc)}", secrets), retry_after(exc))


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


_PREFIX = re.compile(r"^(litellm\.\w+:\s*)?(\w+(Error|Exception):\s*)*(\w+Exception\s*-\s*)?")


def one_line(exc: BaseException) -> str:
    """An exception's message whole, on one line, without litellm's repeated class names
    (`litellm.AuthenticationError: AuthenticationError: OpenAIException - ...`)."""
    text = " ".join(str(exc).split())
    return _PREFIX.sub("", text, count=1) or text


def retry_after(exc: BaseException) -> float | None:
    """The wait a refusing server asked for (its Retry-After header: seconds or an HTTP
    date), or a Router whose deployments all cool down (its `cooldown_time`), if any."""
    cooling = getattr(exc, "cooldown_time", None)
    if isinstance(cooling, (int, float)) and not isinstance(cooling, bool):
        return max(0.0, float(cooling))
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
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


if __name__ == "__main__":
    serve(int(sys.argv[1]))
