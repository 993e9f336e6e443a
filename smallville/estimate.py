"""What a run on a model will cost, worked out offline before it starts.

The window is simulated with the offline brain. Every request the LLM brain would have sent
there is rendered from the same templates the LLM brain uses (`Template.render`), with the
same structured-output mode, and its prompt counted with the model's tokenizer (litellm's
token counter, offline). The requests counted are those that reach the model through the
same wrappers a run puts around it (`brain.assembly`): a rating whose texts the agent rated
before is not sent, since `RatingMemo` does not send it. Completions are expected at the
size of the offline answer written as the model's JSON. Prices are the LLM brain's own
(the brain settings, or litellm's bundled price map). No network, no key.

That assumes the model behaves as the offline brain does. Models do not: their answers
change what the agents do next, and they write longer or shorter answers than the minimal
JSON. Against the local test server's random valid answers, the estimate of a 3-hour window
came to 0.9x-3.8x the calls really sent and 2.8x-11x the completion tokens (cafe_trio and
the 25-agent town, 20 model/seed cases; see benchmarks/estimate.py). So the range, requests
and prompt tokens -20%..+20% and completion tokens 0.5x..2x, holds only for a model that
acts like the offline brain (`basis`). A pilot (`from_run`: a short run on the model, see
`smallville.pilot`) puts the model's own rates per agent-hour in its place: in the same 20
cases a 2-hour pilot predicted 3 hours within 0.71x-1.18x and 4 hours within 0.63x-1.32x, so
the range is +-30% up to twice the pilot's window and 0.5x..2x beyond (a day: 0.43x-2.48x).
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from smallville.brain.base import Brain, Wrapper, override
from smallville.errors import BrainError, UsageError

SPREAD = 0.2  # +- for requests and prompt tokens, assuming the offline brain's behaviour
VERBOSITY = (0.5, 2.0)  # completion tokens, assuming it
PILOT_SPREAD = 0.3  # +- for everything, with a pilot, up to twice the pilot's window
FAR = (0.5, 2.0)  # with a pilot, beyond twice its window
OFFLINE = "offline brain"


@dataclass
class Estimate:
    model: str
    window_s: float
    by_kind: dict = field(default_factory=dict)  # kind -> {requests, prompt_tokens, completion_tokens, cost_usd}
    rounds: int = 0  # instants that send at least one call
    wall_s: float | None = None  # expected wall time, in order (given latency and concurrency)
    cost_known: bool = True
    completion_from: str = "offline answers"
    basis: str = OFFLINE  # whose behaviour the figures assume: OFFLINE or "pilot"
    models: dict = field(default_factory=dict)  # request kind -> its own model (the rest go to `model`)
    pilot: dict | None = None  # the pilot's run, agents and hours (`Pilot.describe`)
    seconds: float = 0.0  # how long estimating took
    _costs: dict = field(default_factory=dict, repr=False)  # kind -> prompt and completion cost

    def total(self, name: str) -> float:
        return sum(row[name] for row in self.by_kind.values())

    def spreads(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(low, high) factors for requests and prompt tokens, and for completion tokens."""
        if self.pilot is None:
            return (1 - SPREAD, 1 + SPREAD), VERBOSITY
        near = self.window_s <= 2 * self.pilot["hours"] * 3600
        both = (1 - PILOT_SPREAD, 1 + PILOT_SPREAD) if near else FAR
        return both, both

    def to_dict(self) -> dict:
        requests, prompt, completion = (self.total(n) for n in ("requests", "prompt_tokens", "completion_tokens"))
        (low, high), (low_c, high_c) = self.spreads()
        cost = self.total("cost_usd") if self.cost_known else None
        out = {
            "model": self.model,
            "window_s": self.window_s,
            "basis": self.basis,
            "requests": int(requests),
            "prompt_tokens": int(prompt),
            "completion_tokens": int(completion),
            "cost_usd": None if cost is None else round(cost, 6),
            "range": {
                "requests": [int(requests * low), math.ceil(requests * high)],
                "prompt_tokens": [int(prompt * low), math.ceil(prompt * high)],
                "completion_tokens": [int(completion * low_c), math.ceil(completion * high_c)],
                "cost_usd": None
                if cost is None
                else [round(self._cost(low, low_c), 6), round(self._cost(high, high_c), 6)],
            },
            "by_kind": {
                k: {n: (round(v, 6) if n == "cost_usd" else int(v)) for n, v in row.items()}
                for k, row in sorted(self.by_kind.items())
            },
            "rounds": self.rounds,
            "wall_s": None if self.wall_s is None else round(self.wall_s, 1),
            "completion_from": self.completion_from,
            "seconds": round(self.seconds, 1),
        }
        if self.pilot is not None:
            out["pilot"] = self.pilot
        if self.models:
            out["models"] = dict(sorted(self.models.items()))
        if not self.cost_known:
            for row in out["by_kind"].values():
                row["cost_usd"] = None
        return out

    def _cost(self, prompt_scale: float, completion_scale: float) -> float:
        return sum(
            row["prompt_cost"] * prompt_scale + row["completion_cost"] * completion_scale
            for row in self._costs.values()
        )


class Meter(Wrapper):
    """The model, as far as an estimate needs one: the offline brain answers, and each
    request that reaches it is counted as the LLM brain would send it (to its kind's model,
    with that model's tokenizer)."""

    def __init__(self, inner: Brain, settings, templates, litellm) -> None:
        super().__init__(inner)
        self.settings, self.templates, self.litellm = settings, templates, litellm
        self.rows: dict[str, dict] = defaultdict(
            lambda: dict.fromkeys(("requests", "prompt_tokens", "completion_tokens"), 0)
        )
        self.batches: list[int] = []
        self._endpoints: dict[str, object] = {}

    def endpoint(self, kind: str):
        """The settings of the model that answers `kind`."""
        if kind not in self._endpoints:
            self._endpoints[kind] = self.settings.endpoint(kind)
        return self._endpoints[kind]

    @override
    def answer(self, requests):
        answers = self.inner.answer(requests)
        for request, answer in zip(requests, answers):
            row, model = self.rows[request.kind], self.endpoint(request.kind)
            row["requests"] += 1
            messages = self.templates[request.kind].render(request, model.structured, model.echo_request)
            row["prompt_tokens"] += self.litellm.token_counter(model=model.base_model, messages=messages)
            text = json.dumps(_model_json(answer), ensure_ascii=False)
            row["completion_tokens"] += self.litellm.token_counter(model=model.base_model, text=text)
        if requests:
            self.batches.append(len(requests))
        return answers


def _model_json(answer):
    from smallville.brain.prompts import to_model_json

    return to_model_json(answer)


def estimate(
    scenario,
    settings,
    *,
    duration: float | None = None,
    seed: int | None = None,
    from_run: str | Path | None = None,
    latency: float | None = None,
    concurrency: int | None = None,
    embedder: str = "use",
) -> Estimate:
    """Estimate a run of `scenario` on the model of `settings` (an `LLMConfig`) for
    `duration` simulated seconds (default: the scenario's); with `from_run`, at the rates of
    that pilot run on the model rather than the offline brain's."""
    from smallville.brain.assembly import assemble
    from smallville.brain.calls import import_litellm
    from smallville.brain.offline import OfflineBrain
    from smallville.brain.prompts import load_templates
    from smallville.pilot import Pilot

    if settings.is_offline:
        raise UsageError("estimate needs a model: --brain MODEL (the offline brain costs nothing)")
    began = time.perf_counter()
    litellm = import_litellm()
    _check_models(settings, litellm)
    duration = scenario.duration if duration is None else duration
    seed = scenario.seed if seed is None else seed
    pilot = Pilot.load(from_run) if from_run is not None else None
    meter = Meter(OfflineBrain(seed), settings, load_templates(), litellm)
    stack = assemble(replace(settings, budget={}), seed, model=meter)
    first = _simulate(scenario, stack.brain, meter, embedder, seed, duration)
    out = Estimate(settings.label, duration, models={k: settings.endpoint(k).label for k in settings.model_kinds()})
    rows, scale = meter.rows, 1.0
    if pilot is not None:
        rows = pilot.project(first, len(scenario.agents), duration / 3600)
        scale = _calls(rows) / max(1, _calls(meter.rows))  # rounds: as many more or fewer as the calls
        out.basis, out.pilot, out.completion_from = "pilot", pilot.describe(), f"averages of {pilot.path}"
    out.rounds = round(len(meter.batches) * scale)
    for kind, row in rows.items():
        prompt_cost, completion_cost = prices(meter.endpoint(kind), row["prompt_tokens"], row["completion_tokens"])
        if prompt_cost is None:
            out.cost_known = False
            prompt_cost = completion_cost = 0.0
        out._costs[kind] = {"prompt_cost": prompt_cost, "completion_cost": completion_cost}
        out.by_kind[kind] = {**row, "cost_usd": prompt_cost + completion_cost}
    if latency is not None:
        limit = concurrency or settings.concurrency_first
        out.wall_s = sum(math.ceil(n / limit) for n in meter.batches) * latency * scale
    out.seconds = time.perf_counter() - began
    return out


def _check_models(settings, litellm) -> None:
    """Every model the settings name is one litellm knows (a list's deployments, each kind's)."""
    from smallville.brain.deployments import targets_of

    for endpoint in [settings.endpoint()] + [settings.endpoint(k) for k in settings.model_kinds()]:
        for target in targets_of(endpoint):
            try:
                litellm.get_llm_provider(target.model, api_base=target.api_base)
            except Exception:
                raise BrainError(
                    f"unknown brain {target.model!r}: use a litellm model name such as "
                    "openai/gpt-4o-mini or ollama/llama3.1"
                ) from None


def _simulate(scenario, brain, meter: Meter, embedder: str, seed: int, duration: float) -> dict:
    """Run the window with `brain` (the stack around `meter`); what the first instant sent,
    by kind."""
    from smallville.embed import make_embedder
    from smallville.sim import Simulation
    from smallville.sim.log import EventLog, Nowhere

    log = EventLog(scenario.start, Nowhere())
    with Simulation(scenario, brain, make_embedder(embedder), seed=seed, log=log) as sim:
        sim.run(min(scenario.tick, duration))
        first = {kind: dict(row) for kind, row in meter.rows.items()}
        sim.run(duration)
    return first


def _calls(rows: dict) -> int:
    return sum(row["requests"] for kind, row in rows.items() if kind != "preflight")


def prices(settings, prompt: int, completion: int) -> tuple[float | None, float | None]:
    """The LLM brain's price of so many prompt and completion tokens (None: unknown)."""
    from smallville.brain.llm import price

    try:
        return price(settings, prompt, 0), price(settings, 0, completion)
    except BrainError:
        return None, None
