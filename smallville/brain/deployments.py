"""A model served by several deployments at once, through litellm's Router.

In the brain settings `model` may be a list of deployments of one model, each
`{model, api_base, api_key_env, weight, max_concurrency}` (only `model` is required): a
model on several GPUs, or a hosted model beside local ones. litellm's Router spreads the
calls over them (`routing`: `least-busy`, where the fewest calls are in flight, or
`weighted`, at random by `weight`), and cools down for `cooldown` seconds a deployment that
fails or rate-limits (more than `allowed_fails` failures in a minute), so its calls go to
the others. The Router makes one try per call (our `Retrying` makes the retries, each routed
anew), so every call is one request to one deployment, counted against it. Which deployment
answered is the response's `model_id`; which one failed, the exception's `failed_deployment_id`.
"""

from __future__ import annotations

from dataclasses import dataclass

from smallville.errors import BrainError

DEPLOYMENT_KEYS = ("model", "api_base", "api_key_env", "weight", "max_concurrency")
ROUTINGS = {"least-busy": "least-busy", "weighted": "simple-shuffle"}  # our name -> litellm's routing_strategy


@dataclass(frozen=True)
class Deployment:
    """One server of a model: `label` names it in the usage (`model@api_base`)."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    weight: float = 1.0
    max_concurrency: int | None = None
    label: str = ""

    def settings(self) -> dict:
        """As the brain settings (and a run's manifest) keep it."""
        out = {
            "model": self.model,
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "weight": self.weight,
            "max_concurrency": self.max_concurrency,
        }
        return {k: v for k, v in out.items() if v is not None}


def deployments_of(value: list, where: str = "brain setting model") -> tuple[Deployment, ...]:
    """The deployments a settings list names, each checked; a `BrainError` names what is wrong."""
    if not value:
        raise BrainError(f"{where}: an empty list of deployments; name at least one {{model: ..., api_base: ...}}")
    out, seen = [], {}
    for i, entry in enumerate(value):
        entry = {"model": entry} if isinstance(entry, str) else entry
        here = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise BrainError(f"{here}: a deployment is a mapping such as {{model: openai/local, api_base: URL}}")
        unknown = sorted(set(entry) - set(DEPLOYMENT_KEYS))
        if unknown:
            raise BrainError(f"{here}.{unknown[0]}: unknown (known: {', '.join(DEPLOYMENT_KEYS)})")
        _check(entry, here)
        label = entry["model"] + (f"@{entry['api_base']}" if entry.get("api_base") else "")
        seen[label] = seen.get(label, 0) + 1
        label += f"#{seen[label]}" if seen[label] > 1 else ""
        out.append(
            Deployment(
                entry["model"],
                entry.get("api_base"),
                entry.get("api_key_env"),
                float(entry.get("weight", 1.0)),
                entry.get("max_concurrency"),
                label,
            )
        )
    return tuple(out)


def _check(entry: dict, here: str) -> None:
    """A deployment's values of the right types."""
    if not isinstance(entry.get("model"), str) or not entry["model"] or entry["model"] == "offline":
        raise BrainError(f"{here}.model: a litellm model name is required, e.g. openai/local")
    for key in ("api_base", "api_key_env"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise BrainError(f"{here}.{key}={entry[key]!r}: must be a string")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
        raise BrainError(f"{here}.weight={weight!r}: must be a number > 0")
    cap = entry.get("max_concurrency")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise BrainError(f"{here}.max_concurrency={cap!r}: must be a positive integer")


def targets_of(config) -> tuple[Deployment, ...]:
    """Where the calls of `config` (an `LLMConfig`) may go: its deployments, or its one model."""
    return config.deployments or (
        Deployment(
            config.model,
            config.api_base,
            config.api_key_env,
            max_concurrency=config.max_concurrency,
            label=config.label,
        ),
    )


def label_of(model) -> str:
    """A model's name in the usage: the litellm name, or a deployment list's models and size."""
    if isinstance(model, str):
        return model
    names = sorted({(d if isinstance(d, str) else d.get("model", "?")) for d in model})
    return f"{'+'.join(names)} x{len(model)}"


def router_spec(
    group: str,
    deployments: tuple[Deployment, ...],
    keys: dict[str, str | None],
    *,
    routing: str,
    cooldown: float,
    allowed_fails: int,
    timeout: float,
) -> dict:
    """The arguments of litellm's `Router` for `deployments` as the model group `group`; `keys`
    by deployment label (None: litellm finds the provider's own variable)."""
    model_list = []
    for d in deployments:
        params = {"model": d.model, "weight": d.weight, "timeout": timeout}
        if d.api_base:
            params["api_base"] = d.api_base
        if keys.get(d.label):
            params["api_key"] = keys[d.label]
        model_list.append({"model_name": group, "litellm_params": params, "model_info": {"id": d.label}})
    spec = {
        "model_list": model_list,
        "routing_strategy": ROUTINGS[routing],
        "num_retries": 0,
        "cooldown_time": cooldown,
        "timeout": timeout,
    }
    if len(deployments) > 1:  # (a lone deployment is never cooled down: nowhere else to go)
        spec["allowed_fails"] = allowed_fails
    return spec
