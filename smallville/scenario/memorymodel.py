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

from dataclasses import asdict, dataclass, fields, replace

from smallville.timefmt import parse_duration

MODELS = ("paper", "salience")
NORMALIZE = ("minmax", "fixed")
COUNTS = ("perceived", "all")
DECAY_PER = ("day", "year")
TAGGERS = ("brain", "keywords")
REFLECT_ON = ("kept", "all")
FRAMES = ("plain", "four_part")
DAY = 86400.0
MAX_INSIGHTS = 5  # per question: what the answer's schema allows (brain/contract.py INSIGHTS)

WEIGHT_PRESETS: dict[str, tuple[float, float, float]] = {
    "paper": (1.0, 1.0, 1.0),  # Park et al. (2023): every term weighted alike
    "original": (0.5, 2.0, 3.0),  # the released code (retrieve.py's gw: recency 0.5, relevance 3, importance 2)
}
"""Named (recency, importance, relevance) weights of the paper model's retrieval."""

SOURCES: tuple[tuple[str, float], ...] = (
    ("impact", 1.0),  # lived through directly: it happened to the agent or before its eyes
    ("personal", 1.0),  # about the agent's own life, thoughts and people
    ("strategic", 0.8),  # plans, goals, commitments
    ("neighbour", 0.8),  # heard from someone else
    ("routine", 0.1),  # an everyday sight or activity
)
EMOTIONS: tuple[tuple[str, float], ...] = (
    ("trauma", 1.5),
    ("fear", 1.3),
    ("anger", 1.2),
    ("sadness", 1.2),
    ("joy", 1.2),
    ("surprise", 1.1),
    ("neutral", 1.0),
    ("boredom", 0.8),
)
"""Seed 003's weight tables (the sources and trauma, neutral as given there; the other
emotions filled in between)."""

KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("impact", ("flood", "damage", "trauma")),
    ("personal", ("i", "my", "me")),
    ("strategic", ("decision", "relocate")),
    ("neighbour", ("neighbor", "neighbour", "others")),
    ("trauma", ("trauma",)),
)
"""Seed 003's keyword table (`tagger: keywords`): a source's or an emotion's name -> the words
that give a memory that tag. 003 gives the source words; `trauma` as an emotion word is how
its example ("Trauma High") carries its emotion."""


@dataclass(frozen=True)
class Adjust:
    """Seed 000's rule-based importance adjustments, added to the brain's rating of a memory
    (`smallville.memory.models.paper.adjusted`): `named_person` when it names another person
    of the town, `emotion` for an emotion word, `preference` for a stated preference,
    `goal` for a goal; the sum capped at `cap`."""

    named_person: int = 1
    emotion: int = 1
    preference: int = 1
    goal: int = 2
    cap: int = 10


@dataclass(frozen=True)
class Reflection:
    """When and how the paper model reflects: when the importance of the memories it
    `counts` (`perceived` events, the paper's, or `all` memories, 000/001/002's) since the
    last reflection reaches `threshold`, and at least `min_memories` of them were stored.
    `questions` questions of the latest `window` memories, up to `insights_per_question`
    insights each; an insight resting on insights `max_depth` deep is not stored (0: no bound)."""

    threshold: float = 150.0
    counts: str = "perceived"
    min_memories: int = 0
    max_depth: int = 0
    questions: int = 3
    insights_per_question: int = MAX_INSIGHTS
    window: int = 100


def resolve_weights(value) -> tuple[float, float, float]:
    """Retrieval weights from a preset's name or three numbers; ValueError otherwise."""
    if isinstance(value, str):
        if value not in WEIGHT_PRESETS:
            raise ValueError(f"weights must be {' or '.join(WEIGHT_PRESETS)} or three numbers, got {value!r}")
        return WEIGHT_PRESETS[value]
    try:
        ws = tuple(float(w) for w in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"weights must be {' or '.join(WEIGHT_PRESETS)} or three numbers "
            f"(recency, importance, relevance), got {value!r}"
        ) from None
    if len(ws) != 3:
        raise ValueError(f"weights must be three numbers (recency, importance, relevance), got {value!r}")
    return ws  # type: ignore[return-value]


BOTH_SETTINGS = ("frame",)
"""Settings of either model (how prompts are laid out reads nothing of the memory model)."""
PAPER_SETTINGS = ("decay", "normalize", "importance_adjust", "insight_floor", "reflection")
"""The paper model's settings: a scenario that sets one under `model: salience` is refused."""
SALIENCE_SETTINGS = (
    "threshold",
    "consolidation_prob",
    "window_size",
    "decay_rate",
    "emotion_decay",
    "top_k_significant",
    "importance_boost",
    "insights",
    "relevance",
    "sources",
    "emotions",
    "decay_per",
    "year",
    "reflect_every",
    "tagger",
    "reflect_on",
    "keywords",
)
"""The salience model's settings: refused unless `model: salience`."""


@dataclass(frozen=True)
class MemoryModel:
    """A memory model and its settings (docs/scenario-format.md, `memory:`).

    The paper model's (`PAPER_SETTINGS`): recency `decay` per game hour; `normalize`
    (`minmax`: each term min-max over the stream; `fixed`: importance / 10, raw cosine, raw
    recency, as 000 computes them); `importance_adjust` (000's rules, None: off);
    `insight_floor` (an insight's lowest importance); `reflection` (its trigger and size);
    `weights` (recency, importance, relevance; None: the scenario's or the paper's).

    The salience model's (`SALIENCE_SETTINGS`, defaults seed 003's):

    - `threshold`: a memory with I >= threshold may be consolidated into long-term memory,
      with probability `consolidation_prob` (a seeded draw of the agent's, one per memory);
      every other memory stays only in the working memory of the last `window_size`;
    - retrieval strength S = I x exp(-l' x t), t in days (`decay_per: day`) or in years of
      `year` simulated time (`decay_per: year`), l' = `decay_rate` x max(0, 1 -
      `emotion_decay` x W_emotion); the `top_k_significant` strongest long-term memories
      come with the working memory. `relevance` > 0 blends in the query's relevance:
      score = norm(S) + relevance x norm(cosine) (min-max over the stream);
    - sleep writes `insights` insights at importance 10 x `importance_boost`, every night
      or at the first sleep `reflect_every` after the last, from the memories kept since
      (`reflect_on: kept`) or every memory of those days (`all`);
    - `sources` and `emotions`: the weight tables, name -> weight; `tagger`: who tags a
      memory, the brain or `keywords` (a table name -> words; an agent's type's table first).

    Either model's: `frame`, how a prompt that carries the agent's context lays it out
    (`plain`, or 003's `four_part`: `smallville.sim.frame`).
    """

    model: str = "paper"
    decay: float = 0.995
    normalize: str = "minmax"
    importance_adjust: Adjust | None = None
    insight_floor: int = 1
    reflection: Reflection = Reflection()
    weights: tuple[float, float, float] | None = None
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
    decay_per: str = "day"
    year: str = "365d"
    reflect_every: str = "night"
    tagger: str = "brain"
    reflect_on: str = "kept"
    keywords: tuple[tuple[str, tuple[str, ...]], ...] = KEYWORDS
    frame: str = "plain"

    def __post_init__(self) -> None:
        for problem in self.problems():
            raise ValueError(problem)
        for name in ("sources", "emotions"):
            table = getattr(self, name)
            pairs = table.items() if isinstance(table, dict) else table
            object.__setattr__(self, name, tuple((str(k), float(v)) for k, v in pairs))
        object.__setattr__(self, "keywords", keyword_table(self.keywords))
        if self.weights is not None:
            object.__setattr__(self, "weights", resolve_weights(self.weights))

    def problems(self) -> list[str]:
        """What is wrong with these settings, one sentence each (empty when nothing is)."""
        out = []
        if not isinstance(self.reflection, Reflection):
            out.append(f"reflection must be a mapping of its settings, got {self.reflection!r}")
        if self.importance_adjust is not None and not isinstance(self.importance_adjust, Adjust):
            out.append(f"importance_adjust must be a mapping of its settings, got {self.importance_adjust!r}")
        for name, choices in (
            ("model", MODELS),
            ("normalize", NORMALIZE),
            ("decay_per", DECAY_PER),
            ("tagger", TAGGERS),
            ("reflect_on", REFLECT_ON),
            ("frame", FRAMES),
        ):
            if getattr(self, name) not in choices:
                out.append(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        if not _number(self.decay) or not 0 < self.decay <= 1:
            out.append(f"decay must be a number above 0 and at most 1 (per game hour), got {self.decay!r}")
        if not _whole(self.insight_floor) or not 1 <= self.insight_floor <= 10:
            out.append(f"insight_floor must be a whole number from 1 to 10, got {self.insight_floor!r}")
        out += _duration_problems("year", self.year)
        if self.reflect_every != "night":
            out += _duration_problems("reflect_every", self.reflect_every, "night or ")
        for name in ("threshold", "decay_rate", "emotion_decay", "importance_boost", "relevance"):
            value = getattr(self, name)
            if not _number(value) or value < 0:
                out.append(f"{name} must be a number >= 0, got {value!r}")
        if not _number(self.consolidation_prob) or not 0 <= self.consolidation_prob <= 1:
            out.append(f"consolidation_prob must be a number from 0 to 1, got {self.consolidation_prob!r}")
        for name in ("window_size", "top_k_significant", "insights"):
            value = getattr(self, name)
            if not _whole(value) or value < 0:
                out.append(f"{name} must be a whole number >= 0, got {value!r}")
        for name in ("sources", "emotions"):
            table = getattr(self, name)
            pairs = list(table.items()) if isinstance(table, dict) else list(table)
            if not pairs:
                out.append(f"{name} must name at least one weight")
            for key, weight in pairs:
                if not _number(weight) or weight <= 0:
                    out.append(f"{name}.{key} must be a number > 0, got {weight!r}")
        names = {k for k, _ in (self.sources.items() if isinstance(self.sources, dict) else self.sources)} | {
            k for k, _ in (self.emotions.items() if isinstance(self.emotions, dict) else self.emotions)
        }
        pairs = self.keywords.items() if isinstance(self.keywords, dict) else self.keywords
        out += [
            f"keywords.{name} names no source or emotion (known: {', '.join(sorted(names))})"
            for name, _ in pairs
            if name not in names
        ]
        return out

    @property
    def salience(self) -> bool:
        return self.model == "salience"

    def source_weight(self, source: str) -> float:
        return dict(self.sources)[source]

    def emotion_weight(self, emotion: str) -> float:
        return dict(self.emotions)[emotion]

    def decay_unit(self) -> float:
        """Simulated seconds in the unit `decay_rate` is per: a day, or a `year`."""
        return parse_duration(self.year) if self.decay_per == "year" else DAY

    def reflect_gap(self) -> float:
        """Simulated seconds from one sleep-time reflection to the next (0: every night)."""
        return 0.0 if self.reflect_every == "night" else parse_duration(self.reflect_every)

    def to_dict(self) -> dict:
        """As JSON: `model` and every setting of that model that is not its default (a
        manifest's `config.memory`; `of` reads it back). The weights a run used are the
        config's own `weights`."""
        default = MemoryModel(model=self.model)
        names = SALIENCE_SETTINGS if self.salience else PAPER_SETTINGS
        out: dict = {"model": self.model}
        for name in names:
            value = getattr(self, name)
            if self.salience or value != getattr(default, name):
                out[name] = _plain(value)
        out.update(
            (name, getattr(self, name)) for name in BOTH_SETTINGS if getattr(self, name) != getattr(default, name)
        )
        return out

    @classmethod
    def of(cls, value) -> MemoryModel:
        """A model from a name ("paper", "salience"), a mapping of settings (a `preset`'s
        name among them: its settings under the mapping's), or itself."""
        if isinstance(value, MemoryModel):
            return value
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(model=value)
        if not isinstance(value, dict):
            raise ValueError(f"memory must be a model's name or a mapping of its settings, got {value!r}")
        data = dict(value)
        if "preset" in data:
            data = {**preset(data.pop("preset")), **data}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"memory has no setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
        for name, default in (("sources", SOURCES), ("emotions", EMOTIONS)):
            if name in data and not isinstance(data[name], dict):
                raise ValueError(f"{name} must be a mapping of names to weights, got {data[name]!r}")
            if name in data:  # a table given in part keeps the other defaults
                data[name] = {**dict(default), **data[name]}
        for name, kind in (("importance_adjust", Adjust), ("reflection", Reflection)):
            if isinstance(data.get(name), dict):
                data[name] = section(kind, name, data[name])
        return cls(**data)


PRESETS: dict[str, dict] = {
    "paper": {},  # Park et al. (2023), the default
    "original": {"weights": "original"},  # the paper's released code's retrieval weights
    "integration-guide": {  # 000, the memory-stream integration guide
        "decay": 0.99,
        "normalize": "fixed",
        "importance_adjust": {},
        "insight_floor": 7,
        "reflection": {
            "threshold": 150,
            "counts": "all",
            "min_memories": 10,
            "max_depth": 3,
            "questions": 3,
            "insights_per_question": 1,
            "window": 100,
        },
    },
    "teaching-lab": {  # 001, the teaching lab
        "decay": 0.99,
        "reflection": {"threshold": 30, "counts": "all", "questions": 1, "insights_per_question": 3, "window": 20},
    },
    "reference-page": {  # 002, the reference page
        "decay": 0.99,
        "normalize": "fixed",
        "reflection": {"threshold": 150, "counts": "all", "insights_per_question": 5, "window": 100},
    },
    "overview": {"decay": 0.995},  # 004, the overview (the paper's numbers)
    "salience-annual": {  # 003, the salience model as written
        "model": "salience",
        "decay_per": "year",
        "year": "365d",
        "emotion_decay": 0.0,
        "reflect_every": "365d",
        "tagger": "keywords",
        "reflect_on": "all",
        "frame": "four_part",
    },
}
"""Named memory settings, each one source's configuration as written (docs/scenario-format.md
says what each follows and leaves out): `memory: {preset: NAME, ...}`, the block's own keys
over the preset's."""


def preset(name) -> dict:
    """The settings of the preset `name`; ValueError naming the presets otherwise."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {name!r}")
    return {k: dict(v) if isinstance(v, dict) else v for k, v in PRESETS[name].items()}


def section(kind, name: str, data: dict):
    """An `Adjust` or `Reflection` from a mapping of some of its settings (the rest default)."""
    known = [f.name for f in fields(kind)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{name} has no setting {unknown[0]!r} (known: {', '.join(known)})")
    made = replace(kind(), **data)
    problems = (reflection_problems if kind is Reflection else adjust_problems)(made)
    if problems:
        raise ValueError(problems[0])
    return made


def adjust_problems(adjust: Adjust) -> list[str]:
    out = [
        f"importance_adjust.{k} must be a whole number from 0 to 9, got {v!r}"
        for k, v in asdict(adjust).items()
        if k != "cap" and (not _whole(v) or not 0 <= v <= 9)
    ]
    if not _whole(adjust.cap) or not 1 <= adjust.cap <= 10:
        out.append(f"importance_adjust.cap must be a whole number from 1 to 10, got {adjust.cap!r}")
    return out


def reflection_problems(r: Reflection) -> list[str]:
    out = []
    if not _number(r.threshold) or r.threshold <= 0:
        out.append(f"reflection.threshold must be a number > 0, got {r.threshold!r}")
    if r.counts not in COUNTS:
        out.append(f"reflection.counts must be one of {', '.join(COUNTS)}, got {r.counts!r}")
    for name, low, high in (
        ("min_memories", 0, None),
        ("max_depth", 0, None),
        ("questions", 1, None),
        ("insights_per_question", 1, MAX_INSIGHTS),
        ("window", 1, None),
    ):
        value = getattr(r, name)
        if not _whole(value) or value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f">= {low}"
            out.append(f"reflection.{name} must be a whole number {bound}, got {value!r}")
    return out


def keyword_table(value) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A keyword table (name -> words, as a mapping or pairs), words lower-cased; ValueError
    when it is not one."""
    pairs = value.items() if isinstance(value, dict) else value
    try:
        table = tuple((str(name), tuple(str(w).lower() for w in words)) for name, words in pairs)
    except (TypeError, ValueError):
        raise ValueError(
            f"keywords must map a source's or an emotion's name to a list of words, got {value!r}"
        ) from None
    if any(isinstance(words, str) for _, words in (value.items() if isinstance(value, dict) else ())):
        raise ValueError("keywords must map each name to a list of words")
    return table


def _duration_problems(name: str, value, also: str = "") -> list[str]:
    try:
        parse_duration(str(value))
        return []
    except ValueError:
        return [f"{name} must be {also}a duration such as 365d, got {value!r}"]


def _plain(value):
    """A setting as JSON: sections as mappings, tables as mappings, tuples as lists."""
    if isinstance(value, (Adjust, Reflection)):
        return asdict(value)
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in value}
    return list(value) if isinstance(value, tuple) else value


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value == value
        and abs(value) != float("inf")
    )
