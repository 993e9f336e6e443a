"""Which memory model a run's agents use, and its settings: the scenario's `memory:` block
(docs/scenario-format.md), a `SimConfig(memory=...)`, an experiment condition's `memory:`.

Two models: `paper` (the default: every memory is rated 1..10 and kept, and retrieval is
the paper's recency + importance + relevance) and `salience` (each memory tagged with a
source and an emotion, importance I = W_source x W_emotion, a salience filter into
long-term memory, a working memory of the last few, retrieval by decaying strength,
insights written during the night's sleep: `smallville.memory.models`). This module is
plain data, so reading a scenario needs no numpy or FAISS.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

MODELS = ("paper", "salience")

WEIGHT_PRESETS: dict[str, tuple[float, float, float]] = {
    "paper": (1.0, 1.0, 1.0),       # Park et al. (2023): every term weighted alike
    "original": (0.5, 2.0, 3.0),    # the released code (retrieve.py's gw: recency 0.5, relevance 3, importance 2)
}
"""Named (recency, importance, relevance) weights of the paper model's retrieval."""

SOURCES: tuple[tuple[str, float], ...] = (
    ("impact", 1.0),        # lived through directly: it happened to the agent or before its eyes
    ("personal", 1.0),      # about the agent's own life, thoughts and people
    ("strategic", 0.8),     # plans, goals, commitments
    ("neighbour", 0.8),     # heard from someone else
    ("routine", 0.1),       # an everyday sight or activity
)
EMOTIONS: tuple[tuple[str, float], ...] = (
    ("trauma", 1.5), ("fear", 1.3), ("anger", 1.2), ("sadness", 1.2), ("joy", 1.2), ("surprise", 1.1),
    ("neutral", 1.0), ("boredom", 0.8),
)
"""Seed 003's weight tables (the sources and trauma, neutral as given there; the other
emotions filled in between)."""


def resolve_weights(value) -> tuple[float, float, float]:
    """Retrieval weights from a preset's name or three numbers; ValueError otherwise."""
    if isinstance(value, str):
        if value not in WEIGHT_PRESETS:
            raise ValueError(f"weights must be {' or '.join(WEIGHT_PRESETS)} or three numbers, got {value!r}")
        return WEIGHT_PRESETS[value]
    try:
        ws = tuple(float(w) for w in value)
    except (TypeError, ValueError):
        raise ValueError(f"weights must be {' or '.join(WEIGHT_PRESETS)} or three numbers "
                         f"(recency, importance, relevance), got {value!r}") from None
    if len(ws) != 3:
        raise ValueError(f"weights must be three numbers (recency, importance, relevance), got {value!r}")
    return ws  # type: ignore[return-value]


@dataclass(frozen=True)
class MemoryModel:
    """A memory model and its settings. The numbers other than `model` matter only for
    `salience` (their defaults are seed 003's):

    - `threshold`: a memory with I >= threshold may be consolidated into long-term memory,
      with probability `consolidation_prob` (a seeded draw of the agent's, one per memory);
      every other memory stays only in the working memory of the last `window_size`;
    - retrieval strength S = I x exp(-l' x days since the memory), l' = `decay_rate` x
      max(0, 1 - `emotion_decay` x W_emotion); the `top_k_significant` strongest long-term
      memories come with the working memory. `relevance` > 0 blends in the query's
      relevance: score = norm(S) + relevance x norm(cosine) (min-max over the stream);
    - each night's sleep writes `insights` insights from the day's memories, at importance
      10 x `importance_boost`;
    - `sources` and `emotions`: the weight tables, name -> weight.
    """

    model: str = "paper"
    threshold: float = 0.6
    consolidation_prob: float = 0.7
    window_size: int = 5
    decay_rate: float = 0.1
    emotion_decay: float = 0.5
    top_k_significant: int = 2
    importance_boost: float = 0.9
    insights: int = 3
    relevance: float = 0.0
    sources: tuple[tuple[str, float], ...] = SOURCES
    emotions: tuple[tuple[str, float], ...] = EMOTIONS

    def __post_init__(self) -> None:
        for problem in self.problems():
            raise ValueError(problem)
        for name in ("sources", "emotions"):
            table = getattr(self, name)
            if isinstance(table, dict):
                object.__setattr__(self, name, tuple((str(k), float(v)) for k, v in table.items()))
            else:
                object.__setattr__(self, name, tuple((str(k), float(v)) for k, v in table))

    def problems(self) -> list[str]:
        """What is wrong with these settings, one sentence each (empty when nothing is)."""
        out = []
        if self.model not in MODELS:
            out.append(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        for name in ("threshold", "decay_rate", "emotion_decay", "importance_boost", "relevance"):
            value = getattr(self, name)
            if not _number(value) or value < 0:
                out.append(f"{name} must be a number >= 0, got {value!r}")
        if not _number(self.consolidation_prob) or not 0 <= self.consolidation_prob <= 1:
            out.append(f"consolidation_prob must be a number from 0 to 1, got {self.consolidation_prob!r}")
        for name in ("window_size", "top_k_significant", "insights"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                out.append(f"{name} must be a whole number >= 0, got {value!r}")
        for name in ("sources", "emotions"):
            table = getattr(self, name)
            pairs = list(table.items()) if isinstance(table, dict) else list(table)
            if not pairs:
                out.append(f"{name} must name at least one weight")
            for key, weight in pairs:
                if not _number(weight) or weight <= 0:
                    out.append(f"{name}.{key} must be a number > 0, got {weight!r}")
        return out

    @property
    def salience(self) -> bool:
        return self.model == "salience"

    def source_weight(self, source: str) -> float:
        return dict(self.sources)[source]

    def emotion_weight(self, emotion: str) -> float:
        return dict(self.emotions)[emotion]

    def to_dict(self) -> dict:
        """As JSON: only `model` for the paper model, every setting for salience."""
        if not self.salience:
            return {"model": self.model}
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["sources"], out["emotions"] = dict(self.sources), dict(self.emotions)
        return out

    @classmethod
    def of(cls, value) -> "MemoryModel":
        """A model from a name ("paper", "salience"), a mapping of settings, or itself."""
        if isinstance(value, MemoryModel):
            return value
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(model=value)
        if not isinstance(value, dict):
            raise ValueError(f"memory must be a model's name or a mapping of its settings, got {value!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"memory has no setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
        data = dict(value)
        for name, default in (("sources", SOURCES), ("emotions", EMOTIONS)):
            if name in data and not isinstance(data[name], dict):
                raise ValueError(f"{name} must be a mapping of names to weights, got {data[name]!r}")
            if name in data:                    # a table given in part keeps the other defaults
                data[name] = {**dict(default), **data[name]}
        return cls(**data)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")
