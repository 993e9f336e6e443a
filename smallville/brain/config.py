"""Settings of the LLM brain, from a scenario's `brain:` block, a `--brain-config` YAML
file and command-line flags (later ones win). API keys are never settings: they come from
the provider's usual environment variables (or the one named by `api_key_env`).

A model is a litellm model name or a list of deployments of one model (deployments.py);
a request kind may have a model of its own (`kinds: {rate_importance: {model: ...}}`): the
settings of the model that answers a kind are `endpoint(kind)`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from smallville.brain.prompts import STRUCTURED_MODES
from smallville.errors import BrainError

CHILD_AGENTS = 100  # towns this big make model calls from a child process (call_process: auto)
KIND_SETTINGS = ("max_tokens", "temperature", "reasoning_tokens")  # what `kinds` may set per request kind
KIND_MODEL = ("model", "api_base", "api_key_env", "structured", "price")  # and the model that answers it


@dataclass(frozen=True)
class LLMConfig:
    model: str | list = "offline"  # a litellm model name, "offline", or a list of deployments
    # ({model, api_base, api_key_env, weight, max_concurrency})
    api_base: str | None = None  # e.g. http://127.0.0.1:8000/v1 for a local server
    api_key_env: str | None = None  # name of the environment variable holding the key
    temperature: float | None = None  # None: each request kind's own (its template's)
    max_tokens: int | None = None  # None: each kind's own, enough for its largest valid answer
    reasoning_tokens: int | None = None  # room for reasoning, added to every kind's max_tokens; None: a
    # default for a model litellm marks as reasoning, or one seen
    # reasoning in the preflight, else 0
    kinds: dict = field(default_factory=dict)  # per request kind: {plan_day: {max_tokens: 2000, temperature: 0.7}},
    # and a model of its own: {rate_importance: {model: ..., api_base: ...}}
    max_concurrency: int | None = None  # calls in flight at once; None: found by AIMD (throttle.py)
    concurrency_start: int = 32  # where an adaptive limit starts (a town's first rounds ask for everyone)
    concurrency_ceiling: int = 64  # and the most it may reach
    timeout: float = 60.0  # seconds per call
    retries: int = 2  # after the first try
    backoff: float = 1.0  # seconds before the first retry, doubled after each
    structured: str = "json_schema"  # json_schema | json_object | prompt
    embedding_model: str | None = None  # a litellm embedding model, used as the embedder
    embedding_api_base: str | None = None  # default: api_base
    price_prompt: float | None = None  # USD per prompt token, when litellm does not know the model
    price_completion: float | None = None  # USD per completion token
    reuse_ratings: bool = True  # rate each observation text once per agent
    echo_request: bool = False  # end prompts with REQUEST_JSON (for test servers)
    preflight: bool = True  # one small call before the run starts
    lookahead: float = 3600.0  # simulated seconds agents may run ahead to fetch answers (0: off)
    budget: dict = field(default_factory=dict)  # limits for the run: {usd, requests, tokens}
    max_requests_per_agent_hour: int = 60  # runaway guard: more requests of one agent in one game hour fall back
    call_process: bool | str = "auto"  # model calls from a process of their own (calls.py): true, false,
    # or auto: in towns of CHILD_AGENTS agents or more
    extra: dict = field(default_factory=dict)  # passed to litellm.completion as is
    routing: str = "least-busy"  # a deployment list: least-busy, or weighted (at random by `weight`)
    cooldown: float = 5.0  # seconds a deployment that failed is left out of the routing
    allowed_fails: int = 0  # failures of a deployment in a minute before it is cooled down

    def __post_init__(self) -> None:
        self._check_model()
        if self.structured not in STRUCTURED_MODES:
            raise BrainError(f"brain setting structured={self.structured!r}: use one of {', '.join(STRUCTURED_MODES)}")
        for name in (
            "max_concurrency",
            "concurrency_start",
            "concurrency_ceiling",
            "max_tokens",
            "max_requests_per_agent_hour",
        ):
            if name in ("max_concurrency", "max_tokens") and getattr(self, name) is None:
                continue
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise BrainError(f"brain setting {name}={getattr(self, name)!r}: must be a positive integer")
        for name in ("retries", "reasoning_tokens", "allowed_fails"):
            value = getattr(self, name)
            if name == "reasoning_tokens" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BrainError(f"brain setting {name}={value!r}: must be an integer >= 0")
        for name in ("price_prompt", "price_completion"):
            value = getattr(self, name)
            if isinstance(value, str):  # YAML reads 2e-6 (no dot) as a string
                try:
                    object.__setattr__(self, name, float(value))
                except ValueError:
                    raise BrainError(f"brain setting {name}={value!r}: must be a number (USD per token)") from None
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise BrainError(f"brain setting {name}={value!r}: must be a number >= 0 (USD per token)")
        if self.call_process not in (True, False, "auto"):
            raise BrainError(f"brain setting call_process={self.call_process!r}: use true, false or auto")
        for name in ("timeout", "backoff", "temperature", "lookahead", "cooldown"):
            value = getattr(self, name)
            if name == "temperature" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise BrainError(f"brain setting {name}={value!r}: must be a number >= 0")
        self._check_kinds()

    def _check_model(self) -> None:
        """A model name, or a list of deployments (kept as their settings); how to route it."""
        from smallville.brain.deployments import ROUTINGS, deployments_of

        if isinstance(self.model, (list, tuple)):
            if self.api_base is not None:
                raise BrainError(
                    "brain setting api_base: the model is a list of deployments: give each its own api_base"
                )
            object.__setattr__(self, "model", [d.settings() for d in deployments_of(list(self.model))])
        elif not isinstance(self.model, str) or not self.model:
            raise BrainError(f"brain setting model={self.model!r}: a litellm model name or a list of deployments")
        if self.routing not in ROUTINGS:
            raise BrainError(f"brain setting routing={self.routing!r}: use one of {', '.join(ROUTINGS)}")

    def _check_kinds(self) -> None:
        """`kinds` names known request kinds, each with known settings of the right type."""
        from smallville.brain.kinds import REQUEST_KINDS

        if not isinstance(self.kinds, dict):
            raise BrainError(f"brain setting kinds={self.kinds!r}: must be a mapping of request kind -> settings")
        for kind, settings in self.kinds.items():
            where = f"brain setting kinds.{kind}"
            if kind not in REQUEST_KINDS:
                raise BrainError(f"{where}: unknown request kind (known: {', '.join(sorted(REQUEST_KINDS))})")
            if not isinstance(settings, dict):
                raise BrainError(f"{where}: must be a mapping, e.g. {{max_tokens: 1600, temperature: 0.7}}")
            for key, value in settings.items():
                if key not in KIND_SETTINGS + KIND_MODEL:
                    raise BrainError(f"{where}.{key}: unknown (known: {', '.join(KIND_SETTINGS + KIND_MODEL)})")
                if key == "max_tokens" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                    raise BrainError(f"{where}.max_tokens={value!r}: must be a positive integer")
                if key == "reasoning_tokens" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                    raise BrainError(f"{where}.reasoning_tokens={value!r}: must be an integer >= 0")
                if key == "temperature" and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
                ):
                    raise BrainError(f"{where}.temperature={value!r}: must be a number >= 0")
            if any(key in settings for key in KIND_MODEL):
                self._check_kind_model(kind, settings, where)

    def _check_kind_model(self, kind: str, settings: dict, where: str) -> None:
        """A kind's own model: its settings must make a whole model's."""
        if settings.get("model") == "offline":
            raise BrainError(
                f"{where}.model: a kind's model is a litellm model name or a list of deployments; "
                "the offline brain answers a whole run or none of it"
            )
        price = settings.get("price")
        if price is not None and (not isinstance(price, dict) or set(price) - {"prompt", "completion"}):
            raise BrainError(f"{where}.price: a mapping {{prompt: USD, completion: USD}} per token")
        try:
            self.endpoint(kind)
        except BrainError as exc:
            raise BrainError(f"{where}: {str(exc).removeprefix('brain setting ')}") from None

    def setting(self, kind: str, name: str, default):
        """A setting (`max_tokens`, `temperature`, `reasoning_tokens`) for requests of `kind`: the kind's own
        (`kinds`), else the one for every kind, else `default` (the kind's template's)."""
        own = self.kinds.get(kind, {}).get(name)
        if own is not None:
            return own
        shared = getattr(self, name)
        return shared if shared is not None else default

    # ---- the models ----------------------------------------------------------------------

    @property
    def deployments(self) -> tuple:
        """The model's deployments (`Deployment`s); none for a model name."""
        from smallville.brain.deployments import deployments_of

        return deployments_of(self.model) if isinstance(self.model, list) else ()

    @property
    def base_model(self) -> str:
        """The litellm name that counts tokens and prices them: the model, or a list's first."""
        return self.model if isinstance(self.model, str) else self.model[0]["model"]

    @property
    def label(self) -> str:
        """The model's name in the usage and on screen."""
        from smallville.brain.deployments import label_of

        return label_of(self.model)

    def endpoint(self, kind: str | None = None) -> LLMConfig:
        """The settings of the model that answers requests of `kind` (None: every kind that
        names no model of its own). A kind that names `model` names its whole model (its
        `api_base`, `api_key_env`, `price`: none unless given); one that names only `api_base`
        is the same model on another server. Only `max_tokens`, `temperature` and
        `reasoning_tokens` stay in its `kinds`."""
        own = {k: v for k, v in self.kinds.get(kind, {}).items() if k in KIND_MODEL} if kind else {}
        kinds = {k: {n: v for n, v in s.items() if n in KIND_SETTINGS} for k, s in self.kinds.items()}
        changes: dict[str, Any] = {"kinds": {k: s for k, s in kinds.items() if s}}
        if "model" in own:
            changes.update(
                model=own["model"], api_base=None, api_key_env=None, price_prompt=None, price_completion=None
            )
        changes.update({k: own[k] for k in ("api_base", "api_key_env", "structured") if k in own})
        changes.update({f"price_{k}": v for k, v in (own.get("price") or {}).items()})
        return replace(self, **changes)

    def model_kinds(self) -> list[str]:
        """The request kinds that name a model of their own."""
        return sorted(k for k, s in self.kinds.items() if any(n in s for n in KIND_MODEL))

    def identity(self) -> str:
        """What makes two settings the same model (the same endpoint)."""
        return json.dumps(
            [self.model, self.api_base, self.api_key_env, self.structured, self.price_prompt, self.price_completion],
            sort_keys=True,
        )

    # ---- calls in flight ------------------------------------------------------------------

    @property
    def adaptive(self) -> bool:
        """Whether the calls in flight are found as the run goes (no `max_concurrency` pinned)."""
        return self.max_concurrency is None

    @property
    def concurrency_first(self) -> int:
        """The calls in flight at the start: the pinned number, or where an adaptive one starts
        (a deployment list's, added up)."""
        if self.deployments:
            return sum(d.max_concurrency or self.max_concurrency or self.concurrency_start for d in self.deployments)
        return self.max_concurrency or self.concurrency_start

    @property
    def concurrency_limit(self) -> int:
        """The most calls that may ever be in flight at once, to every model the settings name."""
        ceiling = self.max_concurrency or max(self.concurrency_start, self.concurrency_ceiling)
        own = sum(d.max_concurrency or ceiling for d in self.deployments) if self.deployments else ceiling
        others = {self.endpoint(k).identity(): self.endpoint(k) for k in self.model_kinds()}
        others.pop(self.endpoint().identity(), None)
        return own + sum(other.concurrency_limit for other in others.values())

    def calls_in_child(self, agents: int | None) -> bool:
        """Whether a town of `agents` makes its model calls from a child process: litellm's
        CPU per call (about 5 ms) matters once many agents ask at once, and costs a second
        import of litellm and about 200 MB when few do."""
        if self.call_process == "auto":
            return agents is not None and agents >= CHILD_AGENTS
        return bool(self.call_process)

    @property
    def is_offline(self) -> bool:
        return self.model == "offline"

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def describe(self) -> dict:
        """The settings for a manifest: never a key, only the name of its variable."""
        return {k: v for k, v in asdict(self).items() if v not in (None, {})}

    def merged(self, settings: dict[str, Any] | None, source: str) -> LLMConfig:
        """These settings with `settings` on top; unknown keys and keys are refused."""
        if not settings:
            return self
        if not isinstance(settings, dict):
            raise BrainError(f"{source}: brain settings must be a mapping, got {type(settings).__name__}")
        known = {f.name for f in fields(self)}
        aliases = {"brain": "model", "price": None}
        updates: dict[str, Any] = {}
        for key, value in settings.items():
            key = aliases.get(key, key) or key
            if key in ("api_key", "key"):
                raise BrainError(
                    f"{source}: an API key is not a setting; put it in the provider's environment "
                    "variable (e.g. OPENAI_API_KEY) or name a variable with api_key_env"
                )
            if key == "price" and isinstance(value, dict):
                updates.update({f"price_{k}": v for k, v in value.items() if k in ("prompt", "completion")})
                continue
            if key not in known:
                raise BrainError(f"{source}: unknown brain setting {key!r} (known: {', '.join(sorted(known))})")
            updates[key] = value
        return replace(self, **updates)


def load_config(
    *,
    scenario: dict | None = None,
    file: str | Path | None = None,
    flags: dict[str, Any] | None = None,
    scenario_path: str = "scenario",
) -> LLMConfig:
    """Defaults, then the scenario's `brain:` block, the config file, then flags that were given.

    The brain stays offline unless a model is chosen: by `--brain MODEL`, by a config file
    naming one, or by `--brain llm` (the model the scenario's `brain:` block names). The
    scenario's block alone only supplies settings, so a town runs offline by default."""
    config = LLMConfig().merged(scenario, f"{scenario_path}: brain")
    scenario_model = config.model
    config = replace(config, model="offline")
    if file is not None:
        import yaml

        try:
            data = yaml.safe_load(Path(file).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise BrainError(f"cannot read brain config {file}: {exc}".splitlines()[0]) from None
        config = config.merged(data, str(file))
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    if flags.get("model") == "llm":
        model = config.model if not config.is_offline else scenario_model
        if model == "offline":
            raise BrainError("--brain llm: no model named in the scenario's brain: block or in --brain-config")
        flags["model"] = model
    return config.merged(flags, "command line")
