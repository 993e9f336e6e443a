"""Shared fixtures: scenarios of the repository, and a helper that simulates one in memory."""

from __future__ import annotations

import os
from pathlib import Path

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


def smallville_threads() -> set:
    """The threads alive now that smallville started (all are named `smallville-...`)."""
    import threading

    return {t for t in threading.enumerate() if t.name.startswith("smallville-")}


def manifest_of(**fields):
    """A run's `Manifest` with the given fields, the required ones it lacks left blank."""
    from smallville.run import Manifest

    blank = {
        "run_id": "",
        "scenario": {},
        "seed": 0,
        "brain": {},
        "embedder": {},
        "agents": [],
        "sim_start": "",
        "sim_end": "",
        "duration_s": 0.0,
    }
    return Manifest.from_dict({**blank, **fields})


@pytest.fixture(scope="session")
def ville_two_days():
    """The default town, two simulated days (shared: it takes several seconds)."""
    return simulate(THE_VILLE, 2 * 86400)


@pytest.fixture(scope="session")
def trio_day():
    return simulate(CAFE_TRIO, 86400)


# -- an OpenAI-compatible embeddings server on 127.0.0.1 ------------------------------


@pytest.fixture
def server(monkeypatch):
    """An OpenAI-style server on 127.0.0.1 (tests/llmserver.py): its address, and the
    requests it received."""
    from llmserver import LLMServer

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with LLMServer() as srv:
        yield srv.api_base, srv.bodies
