"""How `run_scenario` runs a scenario: its options, checked together when they are made."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smallville.errors import UsageError

if TYPE_CHECKING:
    from smallville.brain import LLMConfig
    from smallville.run.manifest import Manifest


@dataclass(frozen=True)
class RunOptions:
    """What a new run is to be; every field is also a keyword of `run_scenario`.

    - where: `runs_dir` (a new folder in it; default `runs`) or `folder` (this new folder,
      whose name is the run id), not both;
    - `seed` and `duration` (simulated seconds); default: the scenario's;
    - the brain: `brain` ("offline", the default, a litellm model name, or an `LLMConfig`);
      settings come from the scenario's `brain:` block, then `brain_config` (a YAML file),
      then `brain` and `api_base`, so an `LLMConfig`, whole settings, comes alone. `budget`
      ({"usd", "requests", "tokens"}) limits what the model may be sent, on top of the
      settings' own; `cache` is an answer cache shared across runs;
    - a replay: with `replay_from` (a run folder) the brain answers from that run's record,
      and `defaults` takes from that run what is not given (one rule, written there);
      `replay_fallthrough`, only with it, sends what the record lacks to the live brain;
    - `embedder` ("use", "lexical" or a litellm model name) and `embedder_api_base`;
    - `config` (a `SimConfig`: the architecture's knobs and ablations; default: the
      paper's), `checkpoint_every` simulated seconds (0: only where the run stops), and
      `experiment`, recorded in the manifest (the experiment, condition and seed it is of).
    """

    runs_dir: str | Path | None = None
    folder: str | Path | None = None
    seed: int | None = None
    duration: float | None = None
    brain: Any = None
    brain_config: str | Path | None = None
    api_base: str | None = None
    budget: dict | None = None
    cache: str | Path | None = None
    replay_from: str | Path | None = None
    replay_fallthrough: bool = False
    embedder: str | None = None
    embedder_api_base: str | None = None
    config: Any = None
    checkpoint_every: float = 3600.0
    experiment: dict | None = None

    def __post_init__(self) -> None:
        from smallville.brain import LLMConfig

        if self.replay_fallthrough and self.replay_from is None:
            raise UsageError(
                "--replay-fallthrough goes with --replay-from: it sends what the replayed record "
                "lacks to the live brain"
            )
        if self.runs_dir is not None and self.folder is not None:
            raise UsageError("a run goes to a new folder in runs_dir or to folder, not both")
        if isinstance(self.brain, LLMConfig) and (self.brain_config is not None or self.api_base is not None):
            raise UsageError("brain is an LLMConfig, the whole settings: give it without brain_config or api_base")

    def settings(self, scenario) -> LLMConfig:
        """The brain settings of this run of `scenario`, its budget included."""
        from smallville.brain import LLMConfig
        from smallville.brain.config import load_config

        settings = (
            self.brain
            if isinstance(self.brain, LLMConfig)
            else load_config(
                scenario=scenario.brain,
                file=self.brain_config,
                flags={"model": self.brain, "api_base": self.api_base},
                scenario_path=str(scenario.path),
            )
        )
        limits = {k: v for k, v in (self.budget or {}).items() if v is not None}
        return replace(settings, budget={**settings.budget, **limits}) if limits else settings

    def defaults(self, scenario, settings: LLMConfig, replayed: Manifest | None) -> RunOptions:
        """These options with what was not given filled in. The rule of a replay: it takes the
        seed, the duration and the embedder from the run it replays; else the seed and the
        duration are the scenario's. The brain settings' embedding model comes before either
        run's embedder; the default embedder is `use`."""
        from smallville.run.run import embedder_spec

        seed = (replayed.seed if replayed else scenario.seed) if self.seed is None else self.seed
        duration = (replayed.duration_s if replayed else scenario.duration) if self.duration is None else self.duration
        embedder, api_base = self.embedder, self.embedder_api_base
        if embedder is None and settings.embedding_model:
            embedder = settings.embedding_model
            api_base = api_base or settings.embedding_api_base or settings.api_base
        elif embedder is None:
            embedder, recorded_base = embedder_spec(replayed.embedder) if replayed else ("use", None)
            api_base = api_base or recorded_base
        return replace(self, seed=seed, duration=duration, embedder=embedder, embedder_api_base=api_base)
