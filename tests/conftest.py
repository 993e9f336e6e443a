"""Shared fixtures: scenarios of the repository, and a helper that simulates one in memory."""

from __future__ import annotations

import json
import os
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
CAFE_TRIO = ROOT / "scenarios" / "cafe_trio.yaml"
THE_VILLE = ROOT / "scenarios" / "the_ville.yaml"


def simulate(path: Path, seconds: float, seed: int | None = None, embedder: str = "use"):
    """Run a scenario with the offline brain for `seconds` of simulated time, in memory."""
    from smallville.brain.offline import OfflineBrain
    from smallville.embed import make_embedder
    from smallville.scenario import load_scenario
    from smallville.sim import Simulation

    scenario = load_scenario(path)
    seed = scenario.seed if seed is None else seed
    sim = Simulation(scenario, OfflineBrain(seed), make_embedder(embedder), seed=seed)
    sim.run(seconds)
    return sim


@pytest.fixture(scope="session")
def ville_two_days():
    """The default town, two simulated days (shared: it takes several seconds)."""
    return simulate(THE_VILLE, 2 * 86400)


@pytest.fixture(scope="session")
def trio_day():
    return simulate(CAFE_TRIO, 86400)


# -- an OpenAI-compatible embeddings server on 127.0.0.1 ------------------------------


def fake_vector(text: str, dim: int = 8) -> list[float]:
    return np.random.default_rng(zlib.crc32(text.encode())).normal(size=dim).tolist()


@pytest.fixture
def server(monkeypatch):
    """An OpenAI-style /v1/embeddings endpoint on 127.0.0.1 that records its requests."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, **body})
            data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)}
                    for i, t in enumerate(body["input"])]
            data.reverse()  # servers may answer out of order; `index` says where each goes
            out = json.dumps({"object": "list", "data": data, "model": body["model"],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", requests
    srv.shutdown()
    srv.server_close()
