"""A small OpenAI-compatible server on 127.0.0.1 for the LLM brain's tests and benchmark.

Chat completions are answered from what the server receives, as a constrained decoder
would: a random valid instance of the JSON schema the request carries (in
`response_format`, or at the end of the prompt), drawn from a hash of the messages, so the
same prompt gets the same answer. Every prompt is kept (`prompts`) for tests to check what
a model would see. Benchmarks that want a realistic town instead send `echo_request`
prompts, which end with a `REQUEST_JSON:` line, and get the offline brain's answer. The
server can be told to fail in each way a model server fails, to refuse a structured-output
mode as some servers do, and to answer after a fixed latency. Embeddings are vectors drawn
from a hash of the text.

It behaves as the providers users have do, in modes that combine (`modes`):

- `strict`: a `json_schema` response format with `strict: true` outside OpenAI's strict
  subset is refused with HTTP 400 and the API's kind of message (strictschema.py);
- `capable`: answers of a capable model's size (capable.py), counted with a real tokenizer
  (litellm's for the model) and cut at `max_tokens` with `finish_reason: "length"`;
- `reasoning`: a few hundred tokens of reasoning before the answer, where `reasoning` says:
  `think` (a `<think>` block opening the content), `field` (in `reasoning_content`, the
  answer in the content) or `only` (`reasoning_content` alone, the answer at its end, the
  content null). Reasoning counts in `completion_tokens`
  (`completion_tokens_details.reasoning_tokens`) and against `max_tokens`.

A server given `news` words gossips: each line of dialogue (a `speak` answer) passes on the
first memory its prompt shows that holds every one of those words and does not name the
listener, unless the conversation has had it already, so news spreads in a model's run as
it does between people (`gossip`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import re
import socket
import threading
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from smallville.brain import kinds
from smallville.brain.offline import OfflineBrain
from smallville.brain.prompts import ECHO_MARK, to_model_json

from capable import kind_of, realistic
from schemagen import instance
from strictschema import MAX_ENUM, problem

SCHEMA_MARK = "follows this JSON schema:\n"
PREFLIGHT = "a test of structured output"  # words of the LLM brain's preflight probe
HEARD = "Did you hear? "  # how a gossiping speaker opens the news it passes on

FAILURES = ("429", "500", "hang", "invalid_json", "schema", "cutoff")
MODES = ("strict", "capable", "reasoning")
REASONING = ("think", "field", "only")
THINKING = (
    "Let me think about what this character would do here.",
    "The schema asks for a JSON object.",
    "I should keep the answer consistent with what the character remembers.",
    "The answer is a JSON object, so it starts with { and ends with }.",
    "First I will look at the time and the place, then at the people around.",
    "Maybe the memories say something that changes the usual routine.",
    "Let me check the list again.",
    "That seems right, but I should make sure every field is there.",
    "Wait, let me reconsider that part.",
)
# A model that talks: whoever can be spoken to is, conversations go on, actions take 5-15
# minutes (schemagen.instance draws everything else at random within the schema).
SOCIABLE = {"action": "talk", "target": ..., "end": False, "minutes": list(range(5, 16))}


class LLMServer:
    """`with LLMServer() as s:` serves at `s.api_base`; `s.fail(mode, n)` makes the next n
    chat requests fail that way; `s.fail_rate(p, modes)` fails a share p at random."""

    def __init__(
        self,
        seed: int = 7,
        latency: float = 0.0,
        hang: float = 2.0,
        prefer: dict | None = None,
        modes=(),
        reasoning: str = "think",
        serial: bool = False,
    ) -> None:
        assert set(modes) <= set(MODES) and reasoning in REASONING, (modes, reasoning)
        self.modes, self.reasoning = frozenset(modes), reasoning
        self.seed = seed
        self.prefer = prefer  # property -> preferred values (schemagen.instance)
        self.news: tuple[str, ...] = ()  # words of the news a speaker passes on (`gossip`)
        self.brain = OfflineBrain(seed)
        self.refuse_modes: set[str] = set()  # response_format types answered with HTTP 500, as llama.cpp does
        self.ignore_modes: set[str] = set()  # response_format types answered as if they were not asked for
        self.prompts: list[dict] = []  # {"kind", "system", "user", "mode"} of every chat request
        self.latency, self.hang = latency, hang
        # `serial`: chat answers one at a time, as llama.cpp's server and Ollama's by default do,
        # and a request whose client has gone (timed out) by its turn is dropped, as they drop it
        self.serial, self.one, self.dropped = serial, threading.Lock(), 0
        self.retry_after: float | None = None  # seconds sent as Retry-After with each 429
        self.queue: list[tuple[str, str]] = []  # (mode, text the prompt must contain)
        self.rate, self.failing, self.rng = 0.0, FAILURES, random.Random(seed)
        self.lock = threading.Lock()
        self.gathered = threading.Condition(self.lock)
        self.hold_for: int = 0  # answers wait until this many calls are in flight
        self.gathered_times = 0  # times that many were
        self.released = threading.Event()  # ends every "hang" (set when the server stops)
        self.injected: Counter[str] = Counter()
        self.chats = 0
        self.embeddings = 0
        self.in_flight = self.max_in_flight = 0
        self.flight_log: list[tuple[float, int]] = []  # (time, calls in flight from then on)
        self.bodies: list[dict] = []
        self.usages: list[dict] = []  # the usage of every chat answer sent
        self.refusals: list[str] = []  # the message of every schema `strict` refused
        self.raw_newlines = False  # a grammar's slip: every space a raw newline, in strings too
        self.max_enum = MAX_ENUM  # `strict`: enum values a schema may have in all
        self.headers: list[dict] = []  # each request's, names lower-cased (HTTP ignores their case)
        self._srv: ThreadingHTTPServer | None = None
        self.connections: set = set()  # open client connections (kept alive between calls)
        self.gate = threading.Condition()  # hold(): answers go out on release()
        self.holding: str | None = None
        self.held = 0  # chat requests held so far

    # ---- control ----------------------------------------------------------------------

    def fail(self, mode: str, n: int = 1, match: str = "") -> None:
        """Fail the next n chat requests whose prompt `match` (a regular expression) is found in."""
        assert mode in FAILURES, mode
        with self.lock:
            self.queue += [(mode, match)] * n

    def fail_rate(self, rate: float, modes=FAILURES) -> None:
        self.rate, self.failing = rate, tuple(modes)

    def _failure(self, prompt: str, asked: bool) -> str | None:
        with self.lock:
            if not asked:  # a preflight call: never failed on purpose
                return None
            queued = next((i for i, (_, match) in enumerate(self.queue) if re.search(match, prompt)), None)
            mode = (
                self.queue.pop(queued)[0]
                if queued is not None
                else (self.rng.choice(self.failing) if self.rate and self.rng.random() < self.rate else None)
            )
            if mode:
                self.injected[mode] += 1
            return mode

    # ---- holding answers: the test, not the clock, decides when they go out -----------

    def hold(self, match: str) -> None:
        """Hold the answer of every chat request whose prompt contains `match` until `release()`."""
        with self.gate:
            self.holding = match

    def release(self) -> None:
        with self.gate:
            self.holding = None
            self.gate.notify_all()

    def wait_for(self, predicate, timeout: float) -> bool:
        """Wait until `predicate(server)` holds, looking again as each chat request comes in;
        False if it does not within `timeout` seconds (a bound for a test that fails)."""
        with self.gate:
            return self.gate.wait_for(lambda: predicate(self), timeout)

    def _hold(self, prompt: str) -> None:
        with self.gate:
            self.gate.notify_all()  # a request came: waiters look again
            if self.holding is not None and self.holding in prompt:
                self.held += 1
                self.gate.wait_for(lambda: self.holding is None)

    # ---- serving ----------------------------------------------------------------------

    def __enter__(self) -> LLMServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms ACK delay

            def setup(self):
                super().setup()
                with server.lock:
                    server.connections.add(self.connection)

            def finish(self):
                with server.lock:
                    server.connections.discard(self.connection)
                super().finish()

            def do_POST(self):
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                except ValueError:  # a client gone mid-request, or not JSON: a provider's 400
                    with contextlib.suppress(OSError):
                        self._send(
                            400, {"error": {"message": "the request body is not JSON", "type": "invalid_request"}}
                        )
                    return
                with server.lock:
                    server.bodies.append({"path": self.path, **body})
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.flight_log.append((time.perf_counter(), server.in_flight))
                    times = server.gathered_times
                    if server.in_flight >= server.hold_for:  # enough have come: all of them go on
                        server.gathered_times += 1
                        server.gathered.notify_all()
                    else:
                        server.gathered.wait_for(lambda: server.gathered_times > times, timeout=60)
                try:
                    if self.path.endswith("/embeddings"):
                        server.embeddings += 1
                        self._send(200, server.embed(body))
                    else:
                        with server.one if server.serial else contextlib.nullcontext():
                            if server.serial and gone(self.connection):
                                server.dropped += 1
                                return
                            server.chats += 1
                            status, out, *headers = server.chat(body)
                            self._send(status, out, *headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server.lock:
                        server.in_flight -= 1
                        server.flight_log.append((time.perf_counter(), server.in_flight))

            def _send(self, status: int, payload, headers: dict | None = None) -> None:
                out = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # many calls at once: no refused connects (1 s SYN retries)

        self._srv = Server(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving, as a server whose process ended: its open connections are dropped too."""
        self.released.set()
        self.release()  # no handler left waiting
        if self._srv is not None:
            self._srv.shutdown()
            self._srv.server_close()
            self._srv = None
        with self.lock:
            dropped, self.connections = list(self.connections), set()
        for connection in dropped:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed meanwhile
                pass

    def mean_in_flight(self, since: float | None = None) -> float:
        """Calls in flight on average, over the time from `since` (or the first call) to
        the last answer."""
        log = [(t, n) for t, n in self.flight_log if since is None or t >= since]
        if len(log) < 2:
            return 0.0
        area = sum(n * (t1 - t0) for (t0, n), (t1, _) in zip(log, log[1:]))
        return area / ((log[-1][0] if since is None else log[-1][0]) - (log[0][0] if since is None else since))

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._srv.server_address[1]}/v1"

    def chat(self, body: dict) -> tuple[int, dict]:
        prompt = body["messages"][-1]["content"]
        fmt = body.get("response_format") or {}
        mode = fmt.get("type", "prompt")
        if mode in self.refuse_modes:
            return 500, {
                "error": {"message": f"response_format type {mode!r} is not supported", "type": "server_error"}
            }
        schema = (
            (fmt.get("json_schema") or {}).get("schema")
            or fmt.get("schema")
            or (json.loads(prompt.rsplit(SCHEMA_MARK, 1)[1].splitlines()[0]) if SCHEMA_MARK in prompt else None)
        )
        kind = (fmt.get("json_schema") or {}).get("name")
        with self.lock:
            self.prompts.append({"kind": kind, "system": body["messages"][0]["content"], "user": prompt, "mode": mode})
        refused = self._strict(fmt)
        if refused:
            return 400, {
                "error": {
                    "message": refused,
                    "type": "invalid_request_error",
                    "param": "response_format",
                    "code": "invalid_json_schema",
                }
            }
        self._hold(prompt)
        echoed = ECHO_MARK in prompt
        failure = self._failure(prompt, echoed or (schema is not None and PREFLIGHT not in prompt))
        if self.latency:
            time.sleep(self.latency)
        if failure == "429":
            return (
                429,
                {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
                ({"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}),
            )
        if failure == "500":
            return 500, {"error": {"message": "The server had an error", "type": "server_error"}}
        if failure == "hang":  # no answer until the client has given up
            self.released.wait(self.hang)
        if mode in self.ignore_modes and SCHEMA_MARK not in prompt:
            schema = None
        digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
        rng = random.Random(f"{self.seed}:{digest}")
        request = None
        if echoed:
            data = json.loads(prompt.rsplit(ECHO_MARK, 1)[1])
            request = kinds.REQUEST_KINDS[data["kind"]].from_dict(data)
            answer = to_model_json(self.brain.answer([request])[0])
        elif schema is not None:
            answer = instance(schema, rng, self.prefer)
        else:
            answer = None
        if self.news and isinstance(answer, dict) and schema is not None and (kind or kind_of(schema)) == "speak":
            answer = {**answer, "text": gossip(prompt, self.news) or answer["text"]}
        if "capable" in self.modes and isinstance(answer, dict) and schema is not None:
            answer = realistic(
                kind or kind_of(schema),
                schema,
                answer,
                rng,
                getattr(request, "start", None) if request is not None else None,
            )
        content = "Sure! Here is what you asked for." if answer is None else json.dumps(answer)
        if self.raw_newlines and PREFLIGHT not in prompt:
            content = content.replace(" ", "\n")
        finish = "stop"
        if failure == "invalid_json":
            content = content.replace('"', "'")
        elif failure == "schema":
            content = json.dumps({"answer": "I'd rather not say"})
        elif failure == "cutoff":
            content, finish = content[: len(content) // 2], "length"
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if self.modes & {"capable", "reasoning"}:
            message, finish, completion, reasoning = self._as_model(content, finish, limit, body["model"], rng)
        else:
            if limit and not echoed and len(content) // 4 + 1 > limit:  # cut off where a model would be
                content, finish = content[: (limit - 1) * 4], "length"
            message, completion, reasoning = {"role": "assistant", "content": content}, len(content) // 4 + 1, 0
        usage = {"prompt_tokens": count_tokens(body["messages"], body["model"]), "completion_tokens": completion}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        with self.lock:
            self.usages.append(usage)
        return 200, {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }

    def _strict(self, fmt: dict) -> str | None:
        """In `strict` mode, the API's message refusing a strict json_schema outside its subset."""
        spec = fmt.get("json_schema") or {}
        if "strict" not in self.modes or fmt.get("type") != "json_schema" or not spec.get("strict"):
            return None
        refused = problem(spec.get("schema") or {}, spec.get("name", ""), self.max_enum)
        if refused:
            with self.lock:
                self.refusals.append(refused)
        return refused

    def _as_model(
        self, content: str, finish: str, limit: int | None, model: str, rng: random.Random
    ) -> tuple[dict, str, int, int]:
        """The message a model sends: reasoning first (in `reasoning` mode), then the
        answer, cut at `limit` tokens as a model is; its finish reason, completion tokens
        and reasoning tokens (counted with the model's tokenizer)."""
        import litellm

        thought = litellm.encode(model=model, text=self._thinking(rng)) if "reasoning" in self.modes else []
        said = litellm.encode(model=model, text=content)
        if limit and len(thought) >= limit:
            thought, said, finish = thought[:limit], [], "length"
        elif limit and len(thought) + len(said) > limit:
            said, finish = said[: limit - len(thought)], "length"
        answer = litellm.decode(model=model, tokens=said) if said else ""
        reasoning = litellm.decode(model=model, tokens=thought) if thought else ""
        if not thought:
            return {"role": "assistant", "content": answer}, finish, len(said), 0
        if self.reasoning == "think":
            content = f"<think>\n{reasoning}" + (f"\n</think>\n\n{answer}" if answer else "")  # none: cut off
            message = {"role": "assistant", "content": content}
        elif self.reasoning == "field":
            message = {"role": "assistant", "content": answer or None, "reasoning_content": reasoning}
        else:
            message = {
                "role": "assistant",
                "content": None,
                "reasoning_content": reasoning + (f"\n\n{answer}" if answer else ""),
            }
        return message, finish, len(thought) + len(said), len(thought)

    @staticmethod
    def _thinking(rng: random.Random) -> str:
        """A few hundred tokens of reasoning."""
        return " ".join(rng.choice(THINKING) for _ in range(rng.randint(18, 36)))

    def prompts_of(self, kind: str) -> list[str]:
        """The user messages of every chat request for `kind` (json_schema mode names it)."""
        return [p["user"] for p in self.prompts if p["kind"] == kind]

    def embed(self, body: dict) -> dict:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(texts)]
        data.reverse()  # servers may answer out of order; `index` says where each goes
        return {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }


def gone(conn: socket.socket) -> bool:
    """Whether the client closed its end (a request it gave up waiting for)."""
    import select

    if not select.select([conn], [], [], 0)[0]:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def count_tokens(messages: list[dict], model: str) -> int:
    """Prompt tokens as a provider would bill them (litellm's counter for the model)."""
    import litellm

    return int(litellm.token_counter(model=model, messages=messages))


def fake_vector(text: str, dim: int = 8) -> list[float]:
    """A deterministic vector for a text: the server's stand-in for an embedding model."""
    return np.random.default_rng(zlib.crc32(text.encode())).normal(size=dim).tolist()


def main() -> None:
    """Serve in a process of its own (for benchmarks, so that the server's work does not
    share the client's interpreter): prints the API base, serves until stdin closes,
    then prints the server's counts as JSON."""
    import argparse
    import os
    import sys

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = argparse.ArgumentParser(description="the test suite's OpenAI-compatible server")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--modes", default="", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--reasoning", default="think", choices=REASONING)
    args = parser.parse_args()
    count_tokens([{"role": "user", "content": "warm-up"}], "gpt-4o-mini")  # import litellm before serving
    modes = [m for m in args.modes.split(",") if m]
    with LLMServer(seed=args.seed, latency=args.latency, modes=modes, reasoning=args.reasoning) as server:
        print(server.api_base, flush=True)
        sys.stdin.read()
        refused = Counter(re.search(r"response_format '([^']*)'", r).group(1) for r in server.refusals)
        print(
            json.dumps(
                {
                    "chats": server.chats,
                    "max_in_flight": server.max_in_flight,
                    "mean_in_flight": round(server.mean_in_flight(), 2),
                    "refusals": dict(refused),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()


def gossip(prompt: str, news: tuple[str, ...]) -> str | None:
    """The line a speaker says to pass on news: the gist of the first memory the speak prompt
    shows that holds every word of `news` and does not name the listener (a line heard is passed
    on without who said it); None when there is none, or the conversation so far has it."""
    listener = prompt.split("Listener: ", 1)[1].split(";", 1)[0]
    recalled, _, history = prompt.partition("This conversation so far")
    for line in recalled.splitlines():
        if not line.startswith("- [") or listener in line:
            continue
        gist = line.split("] ", 1)[1].split(": ", 1)[-1] if " said to " in line else line.split("] ", 1)[1]
        gist = gist.removeprefix(HEARD)
        if all(w in gist.lower() for w in news):
            return None if gist in history else HEARD + gist
    return None
