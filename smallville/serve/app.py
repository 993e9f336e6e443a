"""The HTTP side of `smallville serve`: the standard library's threading server, a handler
that only reads run folders under the served one (interviews aside), and the pages.

Routes: `/` the runs; `/run?id=RUN` a run's page; `/api/runs`; `/api/town?run=RUN` its map
and agents; `/api/feed?run=RUN&offset=N` its events from byte N on, as server-sent events,
following the log while the run goes; `/api/agent?run=RUN&agent=ID&t=T` the agent panel
(as of T, or on a big town of the saved state before it: `smallville.run.shown`);
`/api/why?run=RUN&agent=ID&t=T[&kind=K]` why the agent did what it did last by T (its last
line said or plan made, with `kind=say` or `plan`: `Run.why`);
`/api/spread?run=RUN&probe=P` who told whom the probe's news, when (`Run.probe_tree`);
`POST /api/interview` `{run, agent, t, question[, exact]}` (the same choice of state, unless
`exact` is true). An agent is named by its id or its name, in any case (`Run.agent_id`); one
the run does not have is a 404.
"""

from __future__ import annotations

import ipaddress
import json
import math
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from smallville.errors import BadRequest, Outside, SmallvilleError, Truncated, UnknownAgent
from smallville.events import DECISIONS, MEMORY
from smallville.serve.feed import read_from
from smallville.serve.minds import EXACT_WORK, Minds
from smallville.serve.runs import RunsRoot, summary

_HERE = Path(__file__).parent
WAIT = 0.5  # seconds between looks at a followed run's log
HEARTBEAT = 15.0  # seconds between comments on a quiet feed (a closed page is noticed)
MOST_BODY = 1 << 16  # bytes an interview's request may have
WHY_KINDS = tuple(k for k in DECISIONS if k != MEMORY)  # what /api/why's `kind` may name

# The pages load nothing from the network and send only to this server.
POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, runs: RunsRoot, exact_work: float = EXACT_WORK) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)
        self.runs = runs
        self.minds = Minds(exact_work=exact_work)
        self.closing = threading.Event()
        self.local = _loopback(address[0])

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"

    def server_close(self) -> None:
        self.closing.set()
        super().server_close()
        self.minds.close()


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # quiet: the terminal shows the address only
        pass

    # ---- answering ------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self._safety()
        self.end_headers()
        self.wfile.write(body)

    def _safety(self) -> None:
        self.send_header("Content-Security-Policy", POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")

    def _json(self, data, status: int = 200) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json({"error": message}, status)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request, a method not served) as
        the pages' one line of JSON too, not an HTML page."""
        self.close_connection = True
        self._error(code, message or HTTPStatus(code).phrase)

    def _page(self, name: str) -> None:
        from smallville.replay.page import inline

        page = inline((_HERE / name).read_text(encoding="utf-8"))
        page = page.replace("/*API_JS*/", (_HERE / "api.js").read_text(encoding="utf-8"))
        self._send(200, page.encode(), "text/html; charset=utf-8")

    # ---- requests ---------------------------------------------------------------------------

    def _allowed(self) -> bool:
        """A server on this machine answers only to its own names (no page of another site
        reaches it through a name that resolves here)."""
        if not self.server.local:
            return True
        host = urlsplit("//" + (self.headers.get("Host") or "")).hostname or ""
        if _loopback(host):
            return True
        self._error(HTTPStatus.MISDIRECTED_REQUEST, f"this server answers to 127.0.0.1 and localhost, not {host!r}")
        return False

    def do_GET(self) -> None:
        if not self._allowed():
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        routes = {
            "/": lambda: self._page("index.html"),
            "/run": lambda: self._page("run.html"),
            "/api/runs": lambda: self._json(self.server.runs.summaries()),
            "/api/town": lambda: self._town(query),
            "/api/feed": lambda: self._feed(query),
            "/api/agent": lambda: self._agent(query),
            "/api/why": lambda: self._why(query),
            "/api/spread": lambda: self._spread(query),
        }
        self._route(routes.get(url.path))

    def do_POST(self) -> None:
        if not self._allowed():
            return
        if urlsplit(self.path).path != "/api/interview":
            return self._error(404, "nothing here")
        self._route(self._interview)

    def _route(self, answer) -> None:
        if answer is None:
            return self._error(404, "nothing here")
        try:
            answer()
        except Outside as exc:
            self._error(403 if "leaves" in str(exc) else 404, str(exc))
        except UnknownAgent as exc:
            self._error(404, str(exc))
        except SmallvilleError as exc:
            self._error(409 if exc.exit_code == 2 else 500, str(exc))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # a run folder that breaks the reader, or a bug: one line
            self._error(500, self._failed(exc))

    def _failed(self, exc: Exception) -> str:
        """What went wrong, in one line for the page, and in the server's terminal."""
        message = f"could not answer {urlsplit(self.path).path}: {type(exc).__name__}: {exc}".replace("\n", " ")
        sys.stderr.write(f"smallville serve: {message}\n")
        return message

    def _run(self, query: dict) -> Path:
        return self.server.runs.find(query.get("run"))

    def _town(self, query: dict) -> None:
        from smallville.replay.page import agent_list, start_tiles, town_data

        path = self._run(query)
        run = self.server.minds.run(path)
        scenario = run.scenario
        self._json(
            {
                "id": self.server.runs.id_of(path),
                "title": f"{scenario.name} — {run.manifest.run_id}",
                "start": run.manifest.sim_start,
                "tick": scenario.tick,
                "map": town_data(scenario),
                "agents": agent_list({a.id: a.name for a in scenario.agents}),
                "starts": start_tiles(scenario),
                "probes": [p.name for p in scenario.probes],
                "run": summary(path, self.server.runs.id_of(path)),
            }
        )

    def _time(self, text) -> float:
        try:
            t = float(text)
        except (TypeError, ValueError):
            t = math.nan
        if not math.isfinite(t) or t < 0:
            raise BadRequest(f"t must be seconds since the run's start, not {text!r}")
        return t

    def _moment(self, query: dict) -> tuple[Path, float] | None:
        """The run and time a query names; None, with a 400 sent, for a time that is none."""
        path = self._run(query)
        try:
            return path, self._time(query.get("t"))
        except BadRequest as exc:
            self._error(400, str(exc))
            return None

    def _agent_id(self, path: Path, given) -> str:
        """The id of the agent a request names, by id or name as `smallville interview` takes
        it (`Run.agent_id`); UnknownAgent (HTTP 404) if the run has none such."""
        return self.server.minds.run(path).agent_id(str(given or ""))

    def _agent(self, query: dict) -> None:
        if (at := self._moment(query)) is not None:
            self._json(self.server.minds.panel(*at, self._agent_id(at[0], query.get("agent"))))

    def _why(self, query: dict) -> None:
        """Why the agent did what it did last, as of `t` (`Run.why`): read from the run's files."""
        if (at := self._moment(query)) is None:
            return
        kind = query.get("kind") or None
        if kind not in (None, *WHY_KINDS):
            return self._error(400, f"kind must be one of {', '.join(WHY_KINDS)}, not {kind!r}")
        agent = self._agent_id(at[0], query.get("agent"))
        try:
            self._json(self.server.minds.run(at[0]).why(agent, at=at[1], kind=kind))
        except SmallvilleError as exc:  # (no decision yet: the page shows it as the answer)
            self._json({"error": str(exc)})

    def _spread(self, query: dict) -> None:
        """Who told whom a probe's news, and when (`Run.probe_tree`)."""
        from smallville.run import Run

        try:
            self._json(Run.open(self._run(query)).probe_tree(query.get("probe") or ""))
        except SmallvilleError as exc:
            self._json({"error": str(exc)})

    def _interview(self) -> None:
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        size = int(self.headers.get("Content-Length") or 0)
        if kind != "application/json" or not 0 < size <= MOST_BODY:  # (a form of another site cannot send JSON)
            return self._error(400, "an interview is a JSON object {run, agent, t, question}")
        try:
            asked = json.loads(self.rfile.read(size))
            path, t = self._run(asked), self._time(asked.get("t"))
            question = str(asked.get("question") or "").strip()
        except (ValueError, AttributeError, BadRequest) as exc:
            return self._error(400, f"not an interview: {exc}")
        if not question:
            return self._error(400, "ask a question")
        agent, exact = self._agent_id(path, asked.get("agent")), asked.get("exact") is True
        self._json(self.server.minds.interview(path, t, agent, question, exact))

    def _feed(self, query: dict) -> None:
        """Server-sent events: `items` (what the page draws, from the lines after `offset`),
        `caught` once the log is read to its end, `status` when the manifest changes, `reset`
        when the log was cut back, `done` when the run is no longer going (the feed goes on
        watching: a run resumed later is followed again), `failed` when the log cannot be read."""
        from smallville.replay.page import Drawing

        path = self._run(query)
        try:
            offset = max(0, int(query.get("offset") or 0))
        except ValueError:
            return self._error(400, f"offset must be a byte offset, not {query.get('offset')!r}")
        run = self.server.minds.run(path)
        drawing = Drawing(
            run.scenario, {a.id: a.name for a in run.scenario.agents}, minds=False, from_start=offset == 0
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self._safety()
        self.end_headers()
        self.close_connection = True
        try:
            self._follow(path, drawing, offset)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:  # (the headers are sent: the page hears it as an event)
            self._event("failed", {"error": str(exc) if isinstance(exc, SmallvilleError) else self._failed(exc)})

    def _follow(self, path: Path, drawing, offset: int) -> None:
        events, manifest = path / "events.jsonl", path / "manifest.json"
        seen, caught, going, quiet = None, False, True, time.monotonic()
        while not self.server.closing.is_set():
            try:
                lines, offset = read_from(events, offset)
            except Truncated:
                return self._event("reset", {})
            if lines:
                for e in lines:
                    drawing.add(e)
                self._event("items", {"offset": offset, **drawing.take()}, offset)
                continue
            if not caught:
                caught = True
                self._event("caught", {"offset": offset})
            stamp = manifest.stat().st_mtime_ns
            if stamp != seen:
                seen = stamp
                status = summary(path, self.server.runs.id_of(path))
                self._event("status", status)
                if status["status"] == "running":
                    going = True
                elif going:
                    if read_from(events, offset)[0]:  # (the run's last lines come before its manifest)
                        seen = None
                        continue
                    going = False
                    self._event("done", {"offset": offset})
            if time.monotonic() - quiet > HEARTBEAT:
                self.wfile.write(b": waiting\n\n")
                self.wfile.flush()
                quiet = time.monotonic()
            self.server.closing.wait(WAIT)

    def _event(self, name: str, data: dict, ident: int | None = None) -> None:
        head = f"event: {name}\n" + (f"id: {ident}\n" if ident is not None else "")
        self.wfile.write((head + "data: " + json.dumps(data, ensure_ascii=False) + "\n\n").encode())
        self.wfile.flush()


def make_server(
    runs_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, exact_work: float = EXACT_WORK
) -> Server:
    """A server for the runs under `runs_dir` (not yet answering: `serve_forever`); `exact_work`:
    the most agent-seconds a panel or an interview simulates on from a saved state
    (`smallville.run.shown`)."""
    return Server((host, port), RunsRoot(runs_dir), exact_work)


def serve(runs_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, say=print) -> None:
    """Serve until Ctrl-C."""
    server = make_server(runs_dir, host, port)
    say(f"smallville serve: {server.url} (the runs in {runs_dir}; Ctrl-C to stop)")
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
