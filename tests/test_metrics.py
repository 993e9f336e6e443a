"""Metrics of a run: hand-made runs where the right answer is known, and one real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smallville.metrics import run_metrics

from conftest import manifest_of

ROOT = Path(__file__).resolve().parent.parent

SCENARIO = """\
name: Hand Made
start: 2023-02-13 07:00
duration: 2d
tick: 1m
seed: 1
map:
  tile_time: 10s
  vision: 4
  legend:
    "#": wall
    ".": Town / street
    "c": Hobbs Cafe / cafe
    "h": Homes / house
  grid: |
    ##########
    #cccc....#
    #....hhhh#
    ##########
agents: [ann, bob, cat, dan]
events:
  - at: 2023-02-14 17:00
    where: Hobbs Cafe
    what: The Valentine's Day party at Hobbs Cafe has started.
  - at: 2023-02-14 19:00
    where: Hobbs Cafe
    what: The Valentine's Day party at Hobbs Cafe has ended.
probes:
  party:
    question: Do you know about a Valentine's Day party?
    match: [valentine, party]
"""

AGENT = """\
name: {name}
home: Homes
routine:
  - {{at: "07:00", do: wake up, where: Homes / house}}
relationships: {rels}
"""

NAMES = {"ann": "Ann Able", "bob": "Bob Best", "cat": "Cat Cole", "dan": "Dan Dale"}
PARTY = "Ann is planning a Valentine's Day party at Hobbs Cafe on February 14th from 5pm to 7pm."


def clock(t):
    minutes = (7 * 60 + int(t) // 60) % 1440
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


class Log:
    def __init__(self, legacy=False):
        self.events, self.ids = [], {}
        self.legacy = legacy  # chat memories as logs wrote them before `speaker` and `listener`

    def add(self, t, event_kind, agent, **data):
        h, rest = divmod(int(t), 3600)
        day, h = divmod(7 + h, 24)
        time = f"2023-02-{13 + day:02d} {h:02d}:{rest // 60:02d}:{rest % 60:02d}"
        self.events.append({"t": t, "time": time, "kind": event_kind, "agent": agent, "data": data})

    def memory(self, t, agent, text, kind="observation", **said):
        mid = self.ids.get(agent, 0)
        self.ids[agent] = mid + 1
        self.add(t, "memory", agent, id=mid, kind=kind, importance=5, text=text, **said)
        if "valentine" in text.lower() and "party" in text.lower() and agent not in getattr(self, "knows", set()):
            self.__dict__.setdefault("knows", set()).add(agent)
            self.add(t, "learned", agent, probe="party", memory=mid)

    def talk(self, t, a, b, text):
        self.add(t, "talk_start", a, **{"with": b, "area": "Hobbs Cafe / cafe"})
        line = f"{NAMES[a]} said to {NAMES[b]}: {text}"
        said = {} if self.legacy else {"speaker": a, "listener": b, "line": text}
        self.memory(t + 60, a, line, "chat", **said)
        self.memory(t + 60, b, line, "chat", **said)
        self.add(t + 60, "talk_end", a, **{"with": b, "lines": 1})


def write_run(folder: Path, log: Log, relationships: dict, probes: dict, end="2023-02-15 07:00:00"):
    (folder / "scenario" / "agents").mkdir(parents=True)
    (folder / "scenario" / "hand.yaml").write_text(SCENARIO)
    for aid, name in NAMES.items():
        rels = json.dumps({o: "a friend" for o in relationships.get(aid, ())})
        (folder / "scenario" / "agents" / f"{aid}.yaml").write_text(AGENT.format(name=name, rels=rels))
    manifest = {
        "schema": 1,
        "run_id": folder.name,
        "status": "completed",
        "scenario": {"path": "hand.yaml", "name": "Hand Made", "sha256": "x"},
        "seed": 1,
        "brain": {"name": "offline"},
        "embedder": {"name": "lexical-512"},
        "agents": sorted(NAMES),
        "sim_start": "2023-02-13 07:00:00",
        "sim_end": end,
        "sim_reached": end,
        "duration_s": 172800,
        "requests": {"speak": 3, "plan_day": 8},
        "probes": probes,
        "usage": {"total": {"requests": 11, "prompt_tokens": 100, "completion_tokens": 20, "cost": 0.5}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log.events))
    return folder


def chain_log(legacy=False):
    """A knows of the party; A tells B, B tells C, C tells D."""
    log = Log(legacy)
    log.memory(0, "ann", PARTY, "seed")
    for i, a in enumerate(sorted(NAMES)):
        log.add(0, "spawn", a, tile=[1 + i, 1], area="Hobbs Cafe / cafe")
    log.talk(3600, "ann", "bob", f"Hi Bob! {PARTY}")
    log.talk(3 * 3600, "bob", "cat", f"Hi Cat! {PARTY}")
    log.talk(5 * 3600, "cat", "dan", f"Hi Dan! {PARTY}")
    log.add(5 * 3600 + 120, "replan", "dan", reason="talked with Cat", actions=[])
    log.memory(6 * 3600, "dan", "Dan thinks this matters: the party", "reflection")
    log.add(6 * 3600, "reflect", "dan", importance=150, questions=["q"])
    return log


@pytest.fixture
def chain_run(tmp_path):
    return write_run(
        tmp_path / "chain", chain_log(), {"ann": ["bob"]}, {"party": {"start": ["ann"], "end": sorted(NAMES)}}
    )


def test_a_chain_of_three_conversations_is_traced_back_to_the_seed(chain_run):
    m = run_metrics(chain_run)
    party = m.diffusion["party"]
    assert party["start"] == ["ann"]
    assert party["end"] == ["ann", "bob", "cat", "dan"]
    assert party["chains"]["dan"] == ["dan", "cat", "bob", "ann"]
    assert party["chains"]["bob"] == ["bob", "ann"]
    assert {r["agent"]: r["from"] for r in party["learned"]} == {"ann": None, "bob": "ann", "cat": "bob", "dan": "cat"}
    assert {r["agent"]: r["t"] for r in party["learned"]}["cat"] == 3 * 3600 + 60
    # knowers per simulated hour
    assert [c for h, c in party["curve"][:7]] == [1, 1, 2, 2, 3, 3, 4]
    assert party["curve"][-1] == [48, 4]
    row = m.flat()
    assert row["party_known_start"] == 1 and row["party_known_end"] == 4
    assert row["party_longest_chain"] == 3


def test_a_log_from_before_chat_lines_named_their_speaker_is_traced_by_its_sentences(tmp_path):
    old = write_run(
        tmp_path / "old", chain_log(legacy=True), {"ann": ["bob"]}, {"party": {"start": ["ann"], "end": sorted(NAMES)}}
    )
    assert "speaker" not in (old / "events.jsonl").read_text()
    party = run_metrics(old).diffusion["party"]
    assert party["chains"]["dan"] == ["dan", "cat", "bob", "ann"]
    assert {r["agent"]: r["from"] for r in party["learned"]} == {"ann": None, "bob": "ann", "cat": "bob", "dan": "cat"}


def test_the_speaker_field_not_the_sentence_says_who_told_whom(tmp_path):
    """The chat line's `speaker` is the source, whatever the memory's text says."""
    log = chain_log()
    for e in log.events:
        if e["kind"] == "memory" and e["data"]["kind"] == "chat":
            e["data"]["text"] = "someone said something to someone: " + e["data"]["line"]
    party = run_metrics(write_run(tmp_path / "run", log, {}, {})).diffusion["party"]
    assert party["chains"]["dan"] == ["dan", "cat", "bob", "ann"]


def test_network_density_and_activity(chain_run):
    m = run_metrics(chain_run)
    net = m.network
    assert net["edges_start"] == 1 and net["density_start"] == round(1 / 6, 4)
    assert net["edges_end"] == 3 and net["density_end"] == 0.5  # ann-bob, bob-cat, cat-dan
    assert net["talked_pairs"] == 3
    act = m.activity
    assert act["totals"]["conversations"] == 3
    assert act["per_agent"]["bob"]["conversations"] == 2
    assert act["per_agent"]["dan"]["replans"] == 1
    assert act["per_agent"]["dan"]["reflections"] == 1
    assert act["requests_total"] == 11
    assert act["usage"]["tokens"] == 120 and act["usage"]["cost"] == 0.5


@pytest.fixture
def party_run(tmp_path):
    """Ann hosts; Bob and Cat are told; Bob plans to go and comes, Cat does not; Dan wanders in
    without being told."""
    log = Log()
    log.memory(0, "ann", PARTY, "seed")
    for i, a in enumerate(sorted(NAMES)):
        log.add(0, "spawn", a, tile=[5 + i, 2], area="Homes / house")
    log.talk(3600, "ann", "bob", f"Hi Bob! {PARTY}")
    log.talk(2 * 3600, "ann", "cat", f"Hi Cat! {PARTY}")
    day2 = 24 * 3600
    for a, where in (
        ("ann", "Hobbs Cafe / cafe"),
        ("bob", "Hobbs Cafe"),
        ("cat", "Homes / house"),
        ("dan", "Homes / house"),
    ):
        log.add(
            day2 + 60,
            "plan",
            a,
            date="Tuesday, February 14, 2023",
            blocks=[
                ["07:00", "16:45", "working", "Homes / house"],
                ["16:45", "19:00", "going out", where],
                ["19:00", "07:00", "going to bed and sleeping", "Homes / house"],
            ],
        )
    party_t = day2 + 10 * 3600  # 17:00 on the 14th
    for a, t in (("ann", party_t - 1800), ("bob", party_t - 600), ("dan", party_t + 3600)):
        log.add(
            t,
            "move",
            a,
            **{"from": [5, 2], "to": [2, 1], "area": "Hobbs Cafe / cafe", "tiles": 4, "arrive": clock(t + 60)},
        )
    log.add(
        party_t,
        "event",
        None,
        what="The Valentine's Day party at Hobbs Cafe has started.",
        where="Hobbs Cafe",
        present=["ann", "bob"],
    )
    log.add(
        party_t + 7200,
        "event",
        None,
        what="The Valentine's Day party at Hobbs Cafe has ended.",
        where="Hobbs Cafe",
        present=["ann", "bob", "dan"],
    )
    return write_run(tmp_path / "party", log, {}, {"party": {"start": ["ann"], "end": ["ann", "bob", "cat"]}})


def test_an_event_with_two_invited_guests_of_whom_one_came(party_run):
    m = run_metrics(party_run)
    [party] = m.coordination
    assert party["where"] == "Hobbs Cafe" and party["matched_end"]
    assert party["start"] == "2023-02-14 17:00:00" and party["end"] == "2023-02-14 19:00:00"
    assert party["told"] == ["ann", "bob", "cat"]
    assert party["planned"] == ["ann", "bob"]
    assert party["attended"] == ["ann", "bob", "dan"]
    assert party["told_and_attended"] == ["ann", "bob"]
    guests = set(party["told"]) - set(m.diffusion["party"]["start"])
    assert guests == {"bob", "cat"} and guests & set(party["attended"]) == {"bob"}
    row = m.flat()
    assert row["event_hobbs_cafe_told"] == 3 and row["event_hobbs_cafe_told_and_attended"] == 2


def test_metrics_of_a_real_run_agree_with_its_manifest(tmp_path):
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    result = run_scenario(
        load_scenario(str(ROOT / "scenarios" / "cafe_trio.yaml")),
        runs_dir=tmp_path,
        duration=8 * 3600,
        embedder="lexical",
    )
    m = run_metrics(result.path)
    for name, probe in result.manifest.probes.items():
        assert m.diffusion[name]["start"] == probe["start"]
        assert m.diffusion[name]["end"] == probe["end"]
        assert m.diffusion[name]["curve"][-1][1] == len(probe["end"])
    counts = result.manifest.counts
    assert m.activity["totals"]["conversations"] == counts["conversations"]
    assert m.activity["totals"]["reflections"] == counts["reflections"]
    assert m.activity["totals"]["replans"] == counts["replans"]
    assert m.activity["totals"]["memories"] == counts["memories"]
    assert m.activity["requests_total"] == sum(result.manifest.requests.values())
    for d in m.diffusion.values():
        for row in d["learned"]:
            if row["via"] == "chat":  # heard in a conversation: traced back to a seed holder
                assert row["from"] in result.manifest.agents
                assert d["chains"][row["agent"]][-1] in d["start"]


def test_metrics_command_prints_a_table_and_json(chain_run, capsys):
    from smallville.cli import main

    assert main(["metrics", str(chain_run), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["diffusion"]["party"]["chains"]["dan"] == ["dan", "cat", "bob", "ann"]
    assert main(["metrics", str(chain_run)]) == 0
    out = capsys.readouterr().out
    assert "party" in out and "density" in out


def test_python_api_gives_plain_rows_and_pandas_when_installed(chain_run):
    m = run_metrics(chain_run)
    json.dumps(m.to_dict())  # plain data all the way down
    row = m.flat()
    assert all(isinstance(v, (int, float, type(None))) for v in row.values())
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            m.to_pandas()
    else:
        assert m.to_pandas().loc[0, "party_known_end"] == 4


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, from its header (and a check that it is one)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_metrics_plot_draws_diffusion_network_and_attendance_beside_the_run(party_run, tmp_path):
    import matplotlib.image

    from smallville.cli import main

    assert main(["metrics", str(party_run), "--plot"]) == 0
    names = ("diffusion.png", "network.png", "attendance.png")
    assert sorted(p.name for p in (party_run / "plots").iterdir()) == sorted(names)
    for name in names:
        path = party_run / "plots" / name
        width, height = png_size(path)
        assert 500 <= width <= 2000 and 300 <= height <= 1200 and path.stat().st_size > 10_000
        pixels = matplotlib.image.imread(path)[..., :3]
        assert (pixels.min(axis=2) < 0.5).mean() > 0.005  # something is drawn, not a blank page
    assert main(["metrics", str(party_run), "--json", "--plot", str(tmp_path / "elsewhere")]) == 0
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == sorted(names)


def test_a_run_with_no_scheduled_event_has_no_attendance_plot(chain_run, tmp_path):
    from smallville.metrics import compute
    from smallville.plots import plot_run

    m = run_metrics(chain_run)
    m.coordination = []
    assert [p.name for p in plot_run(m, tmp_path)] == ["diffusion.png", "network.png"]
    empty = compute(manifest_of(sim_start="2023-02-13 07:00:00"), [])  # nothing to draw still draws
    assert all(png_size(p)[0] > 0 for p in plot_run(empty, tmp_path / "empty"))


def test_plots_say_what_to_install_without_matplotlib(chain_run, tmp_path, monkeypatch):
    import sys

    from smallville.cli import main
    from smallville.plots import plot_attendance, plot_diffusion, plot_network, plot_run

    for name in [n for n in sys.modules if n.split(".")[0] == "matplotlib"] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    m = run_metrics(chain_run)
    for plot in (plot_diffusion, plot_network, plot_attendance):
        with pytest.raises(ImportError, match=r"smallville\[plot\]"):
            plot(m, tmp_path / "one.png")
    with pytest.raises(ImportError, match=r"smallville\[plot\]"):
        plot_run(m, tmp_path / "plots")
    assert main(["metrics", str(chain_run), "--plot", str(tmp_path / "plots")]) == 1
