"""Tables never lose data: at 80 columns a cell wraps or folds, a table too wide for the width
is shown in parts, and output to a pipe is plain and whole. Rendered at a fixed width and
compared as exact text."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from rich.console import Console

from smallville.metrics import compute, print_metrics
from smallville.render import print_estimate, print_inspection
from smallville.tables import Table, print_table

from conftest import ROOT, manifest_of


def render(draw, width: int = 80) -> str:
    """What `draw(console)` prints on a console `width` columns wide, without trailing blanks."""
    out = io.StringIO()
    draw(Console(file=out, width=width, color_system=None))
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def test_a_word_longer_than_its_column_folds_instead_of_being_cut():
    table = Table("id", "n")
    table.add_row("isabella_rodriguez_the_second", "628,789,943")
    assert (
        render(lambda c: print_table(c, table), width=20)
        == """\
┏━━━━━━━━━┳━━━━━━━━┓
┃ id      ┃ n      ┃
┡━━━━━━━━━╇━━━━━━━━┩
│ isabell │ 628,78 │
│ a_rodri │ 9,943  │
│ guez_th │        │
│ e_secon │        │
│ d       │        │
└─────────┴────────┘"""
    )


def test_names_stay_whole_while_text_wraps():
    table = Table("agent", "memory")
    table.add_row(
        "isabella_rodriguez",
        "Isabella is planning a Valentine's Day party at Hobbs Cafe on February "
        "14th, from 5pm to 7pm, and hopes that everyone she knows will come.",
    )
    assert (
        render(lambda c: print_table(c, table), width=60)
        == """\
┏━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ agent              ┃ memory                              ┃
┡━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ isabella_rodriguez │ Isabella is planning a Valentine's  │
│                    │ Day party at Hobbs Cafe on February │
│                    │ 14th, from 5pm to 7pm, and hopes    │
│                    │ that everyone she knows will come.  │
└────────────────────┴─────────────────────────────────────┘"""
    )


def test_a_cell_that_looks_like_markup_is_shown_as_written():
    table = Table("memory")
    table.add_row("[bold]not bold[/] and [note]")
    assert "[bold]not bold[/] and [note]" in render(lambda c: print_table(c, table))


ESTIMATE = {
    "model": "openai/gpt-4o-mini",
    "window_s": 86400,
    "seconds": 4.4,
    "rounds": 1463,
    "wall_s": 3000.0,
    "completion_from": "offline answers",
    "basis": "offline brain",
    "by_kind": {
        "decompose": {"requests": 578, "prompt_tokens": 205618, "completion_tokens": 68699, "cost_usd": 0.0721},
        "rate_importance": {"requests": 1384, "prompt_tokens": 192416, "completion_tokens": 12654, "cost_usd": 0.0365},
        "reflect_questions": {"requests": 35, "prompt_tokens": 49725, "completion_tokens": 1169, "cost_usd": 0.0082},
    },
    "requests": 1997,
    "prompt_tokens": 447759,
    "completion_tokens": 82522,
    "cost_usd": 0.1168,
    "range": {
        "requests": [1597, 2397],
        "prompt_tokens": [358207, 537311],
        "completion_tokens": [41261, 165044],
        "cost_usd": [0.0801, 0.1794],
    },
}


def test_the_estimate_at_80_columns_keeps_every_figure_whole():
    town = SimpleNamespace(name="The Ville", agents=[None] * 25)
    assert (
        render(lambda c: print_estimate(ESTIMATE, town, 2.0, 8, c))
        == """\
The Ville on openai/gpt-4o-mini: 24 simulated hours, 25 agents (estimated
                            offline in 4.4 s)
┏━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━┳━━━━━━━━━━┓
┃ request           ┃ requests ┃ prompt tok ┃ completion tok ┃ cost USD ┃
┡━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━━┩
│ decompose         │      578 │    205,618 │         68,699 │   0.0721 │
│ rate_importance   │    1,384 │    192,416 │         12,654 │   0.0365 │
│ reflect_questions │       35 │     49,725 │          1,169 │   0.0082 │
│ total             │    1,997 │    447,759 │         82,522 │   0.1168 │
│ range low         │    1,597 │    358,207 │         41,261 │   0.0801 │
│ range high        │    2,397 │    537,311 │        165,044 │   0.1794 │
└───────────────────┴──────────┴────────────┴────────────────┴──────────┘
assumes the offline brain's behaviour, completions sized from its answers (a
model that acts otherwise sends otherwise: estimate --from a short run on it);
in order, 1,463 rounds of calls at 2 s a call and up to 8 at once take about 50
min (run-ahead can do better)"""
    )


def event(t: int, kind: str, agent: str, data: dict) -> dict:
    return {
        "t": t,
        "time": f"2023-02-13 {7 + t // 3600:02d}:{t % 3600 // 60:02d}:00",
        "kind": kind,
        "agent": agent,
        "data": data,
    }


AGENTS = ["isabella_rodriguez", "klaus_mueller", "maria_lopez"]
EVENTS = [
    event(
        0,
        "memory",
        "isabella_rodriguez",
        {"id": 0, "kind": "seed", "importance": 8, "text": "Isabella is planning a party.", "links": []},
    ),
    event(0, "learned", "isabella_rodriguez", {"probe": "party", "memory": 0}),
    *(event(0, "spawn", a, {"tile": [1, 1], "area": "Hobbs Cafe / cafe"}) for a in AGENTS),
    event(3600, "talk_start", "isabella_rodriguez", {"with": "klaus_mueller", "area": "Hobbs Cafe / cafe"}),
    event(
        3660,
        "memory",
        "klaus_mueller",
        {
            "id": 4,
            "kind": "chat",
            "importance": 6,
            "links": [],
            "text": "Isabella Rodriguez said to Klaus Mueller: come to my party!",
        },
    ),
    event(3660, "learned", "klaus_mueller", {"probe": "party", "memory": 4}),
    event(
        3720,
        "action",
        "maria_lopez",
        {"action": "reading", "area": "Hobbs Cafe / cafe", "object": None, "until": "08:30"},
    ),
]
MANIFEST = manifest_of(
    run_id="the_ville-seed7-20230213-070000",
    status="completed",
    seed=7,
    scenario={"name": "The Ville"},
    agents=AGENTS,
    sim_start="2023-02-13 07:00:00",
    sim_reached="2023-02-13 09:00:00",
    probes={"party": {}},
    requests={"speak": 2, "react": 1},
)


def test_metrics_at_80_columns_wrap_chains_and_split_wide_tables():
    assert (
        render(lambda c: print_metrics(compute(MANIFEST, EVENTS), c))
        == """\
The Ville: run the_ville-seed7-20230213-070000, seed 7, 3 agents, 2.0 simulated
hours, status completed
                            Diffusion of information
┏━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━┳━━━━┳━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┓
┃       ┃ known at ┃ known at ┃    ┃ chain    ┃ told via  ┃                    ┃
┃ probe ┃ start    ┃ end      ┃ of ┃ depth    ┃ recall    ┃ longest chain      ┃
┡━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━╇━━━━╇━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━┩
│ party │ 1        │ 2        │ 3  │ -        │ -         │ klaus_mueller <-   │
│       │          │          │    │          │           │ isabella_rodriguez │
└───────┴──────────┴──────────┴────┴──────────┴───────────┴────────────────────┘
                  Who learned 'party', when, from whom
┏━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━━━┓
┃ agent              ┃ when                ┃ via  ┃ from               ┃
┡━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━┩
│ isabella_rodriguez │ 2023-02-13 07:00:00 │ seed │                    │
│ klaus_mueller      │ 2023-02-13 08:01:00 │ chat │ isabella_rodriguez │
└────────────────────┴─────────────────────┴──────┴────────────────────┘
┏━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ agent              ┃ chain                               ┃
┡━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ isabella_rodriguez │ isabella_rodriguez                  │
│ klaus_mueller      │ klaus_mueller <- isabella_rodriguez │
└────────────────────┴─────────────────────────────────────┘
party: knowers per simulated hour: 0h:1 1h:1 2h:2
Relationship network: 0 -> 1 pairs, density 0.0 -> 0.3333 (1 pairs talked)
                                    Activity
┏━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━━┓
┃                    ┃               ┃             ┃         reflect ┃         ┃
┃ agent              ┃ conversations ┃ reflections ┃        sessions ┃ replans ┃
┡━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━┩
│ isabella_rodriguez │             1 │           0 │               0 │       0 │
│ klaus_mueller      │             1 │           0 │               0 │       0 │
│ maria_lopez        │             0 │           0 │               0 │       0 │
│ total              │             1 │           0 │               0 │       0 │
└────────────────────┴───────────────┴─────────────┴─────────────────┴─────────┘
┏━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━┓
┃ agent              ┃ memories ┃ actions ┃
┡━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━┩
│ isabella_rodriguez │        1 │       0 │
│ klaus_mueller      │        1 │       0 │
│ maria_lopez        │        0 │       1 │
│ total              │        2 │       1 │
└────────────────────┴──────────┴─────────┘
Brain requests: 3 (react 1, speak 2)"""
    )


def spoken(events: list[dict]) -> list[dict]:
    """`events` as a log of this version writes them: the chat memory names its speaker,
    listener and line, the line is a `say` event, and decisions name their request."""
    out = []
    for e in events:
        if e["kind"] == "memory" and e["data"]["kind"] == "chat":
            line = "come to my party!"
            said = {"to": "klaus_mueller", "text": line, "req": 1}
            out.append(event(e["t"], "say", "isabella_rodriguez", said))
            data = {**e["data"], "speaker": "isabella_rodriguez", "listener": "klaus_mueller", "line": line}
            e = {**e, "data": data}
        out.append(e)
    return out


def test_metrics_say_the_chain_depth_of_a_log_that_names_its_tellers():
    """A legacy log's chat memory names no speaker, so its depth is unknown ('-', above); a log
    that names them has a real depth: one telling, Isabella to Klaus."""
    text = render(lambda c: print_metrics(compute(MANIFEST, spoken(EVENTS)), c))
    assert "│ party │ 1        │ 2        │ 3  │ 1        │ 0% of 1   │ klaus_mueller <-   │" in text


INSPECTION = {
    "agent": "maria_lopez",
    "name": "Maria Lopez",
    "time": "2023-02-13 10:00",
    "area": "Oak Hill College / classroom",
    "tile": [18, 19],
    "status": "acting",
    "activity": "attending physics lectures",
    "knows": ["party"],
    "memories": 33,
    "plan": [
        ["09:08", "11:52", "attending physics lectures", "Oak Hill College / classroom"],
        ["11:52", "13:20", "having lunch and a coffee at Hobbs Cafe", "Hobbs Cafe / cafe"],
    ],
    "now": ["09:08", "11:52", "attending physics lectures"],
    "next": [],
    "query": "attending physics lectures",
    "recall": [
        {
            "id": 3,
            "kind": "observation",
            "text": "Klaus Mueller is attending a sociology seminar",
            "score": 2.08,
            "recency": 1.0,
            "importance": 0.33,
            "relevance": 0.74,
        },
        {
            "id": 7,
            "kind": "seed",
            "score": 1.89,
            "recency": 0.89,
            "importance": 1.0,
            "relevance": 0.0,
            "text": "[note to self] the electromagnetism problem set is due on Wednesday morning",
        },
    ],
    "reflections": [],
    "relationships": {
        "ayesha_khan": {"name": None, "view": "a dormmate who lends her novels", "talks": 0},
        "klaus_mueller": {"name": "Klaus Mueller", "view": "a thoughtful classmate", "talks": 1},
    },
}


def test_inspect_shows_the_plan_recall_and_relationships():
    assert (
        render(lambda c: print_inspection("inspect", INSPECTION, c))
        == """\
Maria Lopez at 2023-02-13 10:00: attending physics lectures (acting), Oak Hill
College / classroom [18, 19]; 33 memories; knows: party
Plan
 ▶ 09:08-11:52 attending physics lectures (Oak Hill College / classroom)
   11:52-13:20 having lunch and a coffee at Hobbs Cafe (Hobbs Cafe / cafe)
                    Recalled for: attending physics lectures
┏━━━━━━━┳━━━━━━┳━━━━━━┳━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ score ┃ rec  ┃ imp  ┃ rel  ┃ kind        ┃ memory                            ┃
┡━━━━━━━╇━━━━━━╇━━━━━━╇━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ 2.08  │ 1.00 │ 0.33 │ 0.74 │ observation │ Klaus Mueller is attending a      │
│       │      │      │      │             │ sociology seminar                 │
│ 1.89  │ 0.89 │ 1.00 │ 0.00 │ seed        │ [note to self] the                │
│       │      │      │      │             │ electromagnetism problem set is   │
│       │      │      │      │             │ due on Wednesday morning          │
└───────┴──────┴──────┴──────┴─────────────┴───────────────────────────────────┘
Relationships
 • ayesha_khan: a dormmate who lends her novels
 • Klaus Mueller: a thoughtful classmate (talked 1 time)"""
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    town = ROOT / "tests" / "fixtures" / "tiny_town" / "scenarios" / "tiny.yaml"
    return run_scenario(
        load_scenario(town), runs_dir=tmp_path_factory.mktemp("runs"), duration=3 * 3600, embedder="lexical"
    ).path


def piped(*args, columns: str | None = None) -> str:
    """stdout of the command line writing to a pipe, in a clean environment."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), **({"COLUMNS": columns} if columns else {})}
    result = subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("columns, width", [(None, 80), ("60", 60)])
def test_piped_output_is_plain_and_whole(run, columns, width):
    for text in (piped("metrics", run, columns=columns), piped("inspect", run, "--agent", "ann_lee", columns=columns)):
        assert "\x1b" not in text and "…" not in text
        tables = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
        assert tables and all(len(line) <= width for line in tables)
    lines = piped("inspect", run, "--agent", "ann_lee", columns=columns).splitlines()
    assert len(lines[0]) > width and lines[0].startswith("Ann Lee at 2023-02-13 10:00: ")  # prose is not broken
    assert lines[-2:] == ["Relationships", " • Bob Ray: a neighbour who talks too much"]
