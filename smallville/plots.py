"""PNG plots of a run's metrics: diffusion and activity, the relationship network, attendance.

Needs matplotlib (`pip install 'smallville[plot]'`), imported only when a plot is drawn and
always with the Agg backend, so plotting works on a machine without a display.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from smallville.errors import ExtraMissing
from smallville.metrics import RunMetrics, summary_measures

MAX_NAMES = 60  # more agents than this are drawn without their names
ATTENDANCE_BARS = (
    ("told", "told of it"),
    ("planned", "planned to go"),
    ("attended", "attended"),
    ("told_and_attended", "told and attended"),
)


def figure(**kwargs):
    """A matplotlib Figure drawn by Agg, or `ExtraMissing` (an ImportError) saying what to install. No pyplot:
    nothing global changes, so a notebook keeps its own backend."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ExtraMissing("plots need matplotlib: pip install 'smallville[plot]'") from None
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def plot_run(m: RunMetrics, folder: str | Path) -> list[Path]:
    """Every plot of a run into FOLDER: diffusion.png, network.png and, when the scenario has
    events somewhere, attendance.png. Returns the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = [plot_diffusion(m, folder / "diffusion.png"), plot_network(m, folder / "network.png")]
    if m.coordination:
        written.append(plot_attendance(m, folder / "attendance.png"))
    return written


def plot_diffusion(m: RunMetrics, out: str | Path) -> Path:
    """Knowers of each probe per simulated hour, and activity per agent."""
    fig = figure(figsize=(12, 4.5))
    left, right = fig.subplots(1, 2)
    n = len(m.info.get("agents", []))
    for name, d in m.diffusion.items():
        left.step([h for h, _ in d["curve"]], [c for _, c in d["curve"]], where="post", label=name)
    left.set(
        xlabel="simulated hours", ylabel="agents who know", title="Diffusion of information", ylim=(0, max(1, n) * 1.05)
    )
    if m.diffusion:
        left.legend()
    agents = sorted(m.activity["per_agent"])
    cols = ("conversations", "reflections", "replans")
    width = 0.8 / len(cols)
    for i, col in enumerate(cols):
        right.bar(
            [j + i * width for j in range(len(agents))],
            [m.activity["per_agent"][a][col] for a in agents],
            width=width,
            label=col,
        )
    if len(agents) <= MAX_NAMES:
        right.set_xticks([j + width for j in range(len(agents))], _labels(agents), rotation=60, fontsize=7)
    else:
        right.set(xticks=[], xlabel=f"{len(agents)} agents, in id order")
    right.set(title="Activity per agent")
    right.legend()
    fig.suptitle(_title(m))
    return save(fig, out)


def plot_network(m: RunMetrics, out: str | Path) -> Path:
    """Who knows or has talked with whom, at the start and at the end: agents on a circle,
    one line per pair; at the end, pairs new since the start are coloured and thicker the more
    the two talked."""
    fig = figure(figsize=(12, 6.2))
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    axes = fig.subplots(1, 2)
    net = m.network
    agents = sorted(m.info.get("agents", []))
    n = len(agents)
    pos = {
        a: (math.sin(2 * math.pi * i / max(1, n)), math.cos(2 * math.pi * i / max(1, n))) for i, a in enumerate(agents)
    }
    start = {tuple(p) for p in net.get("start", [])}
    talks = {(a, b): c for a, b, c in net.get("talks", [])}
    possible = n * (n - 1) // 2
    panels = (
        ("start", net.get("start", []), net.get("density_start", 0.0)),
        ("end", net.get("end", []), net.get("density_end", 0.0)),
    )
    for ax, (when, pairs, density) in zip(axes, panels):
        old = [p for p in map(tuple, pairs) if p in start]
        new = [p for p in map(tuple, pairs) if p not in start]
        alpha = max(0.25, min(0.8, 100 / max(1, len(pairs))))  # a dense town stays legible
        ax.add_collection(
            LineCollection(
                [[pos[a], pos[b]] for a, b in old if a in pos and b in pos],
                colors="0.55",
                alpha=alpha + 0.2,
                linewidths=1.0,
                zorder=1,
            )
        )
        ax.add_collection(
            LineCollection(
                [[pos[a], pos[b]] for a, b in new if a in pos and b in pos],
                colors="tab:blue",
                alpha=alpha,
                zorder=1,
                linewidths=[1.0 + math.log1p(talks.get(p, 0)) for p in new if p[0] in pos and p[1] in pos],
            )
        )
        ax.scatter(
            [pos[a][0] for a in agents],
            [pos[a][1] for a in agents],
            s=max(12, 240 - 4 * n),
            color="tab:orange",
            edgecolors="black",
            linewidths=0.5,
            zorder=2,
        )
        if n <= MAX_NAMES:
            for a, label in zip(agents, _labels(agents)):
                x, y = pos[a]
                ax.annotate(
                    label,
                    (x * 1.1, y * 1.1),
                    ha="left" if x > 0.01 else "right" if x < -0.01 else "center",
                    va="center",
                    fontsize=max(5, 9 - n // 10),
                )
        ax.set_title(f"{when}: density {density:.3f} ({len(pairs)} of {possible} pairs)")
        ax.set(xlim=(-1.6, 1.6), ylim=(-1.3, 1.3), aspect="equal")
        ax.axis("off")
    axes[1].legend(
        handles=[
            Line2D([], [], color="0.55", label="knew each other at the start"),
            Line2D([], [], color="tab:blue", label="new: talked or met (thicker: more talks)"),
        ],
        loc="lower center",
        bbox_to_anchor=(0.5, -0.08),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(f"Relationship network, {_title(m)}")
    return save(fig, out)


def plot_attendance(m: RunMetrics, out: str | Path) -> Path:
    """For each scheduled event: how many agents were told of it, planned to go, attended, and
    were both told and there."""
    events = m.coordination
    n = len(m.info.get("agents", []))
    fig = figure(figsize=(max(6.0, 2.2 + 2.6 * len(events)), 4.8))
    ax = fig.subplots()
    width = 0.8 / len(ATTENDANCE_BARS)
    for i, (key, label) in enumerate(ATTENDANCE_BARS):
        bars = ax.bar(
            [j + i * width for j in range(len(events))], [len(ev[key]) for ev in events], width=width, label=label
        )
        ax.bar_label(bars, fontsize=8)
    reached = m.info.get("sim_reached") or ""
    ax.set_xticks(
        [j + width * (len(ATTENDANCE_BARS) - 1) / 2 for j in range(len(events))],
        [
            textwrap.fill(
                f"{ev['what']} ({ev['start'][:16]}"
                + (", after the run ended)" if reached and ev["start"] >= reached else ")"),
                28,
            )
            for ev in events
        ],
        fontsize=8,
    )
    ax.set(ylabel=f"agents (of {n})", ylim=(0, max(1, n) * 1.12), title=f"Attendance, {_title(m)}")
    ax.legend(fontsize=8, ncols=len(ATTENDANCE_BARS), loc="upper center")
    return save(fig, out)


def _labels(agents: list[str]) -> list[str]:
    """First names (`maria` for maria_lopez), or whole ids where first names repeat."""
    first = [a.split("_")[0] for a in agents]
    return [f if first.count(f) == 1 else a for f, a in zip(first, agents)]


def _title(m: RunMetrics) -> str:
    return " ".join(x for x in (m.info.get("scenario"), m.run) if x)


def save(fig, out: str | Path) -> Path:
    """Write `fig` (from `figure`) laid out to the PNG file `out`, as every plot of smallville is."""
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    return out


# ---- experiments: conditions side by side -------------------------------------------------


def plot_summary(summary: list[dict], out: str | Path) -> Path:
    """A PNG of an experiment: each summary metric's mean and standard deviation per condition."""
    keys = summary_measures(summary)
    cols = 3
    rows = max(1, math.ceil(len(keys) / cols))
    fig = figure(figsize=(4 * cols, 3.2 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    names = [r["condition"] for r in summary]
    for ax, key in zip(axes.flat, keys):
        ax.bar(
            range(len(names)),
            [r.get(key + "_mean", 0) for r in summary],
            yerr=[r.get(key + "_std", 0) for r in summary],
            capsize=3,
        )
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.set_title(key.replace("_", " "), fontsize=9)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    return save(fig, out)


def plot_diffusion_by_condition(curves: dict[str, dict[str, list]], out: str | Path) -> Path:
    """One panel per probe: for each condition, knowers per simulated hour, the mean over its
    seeds as a line and the range from the lowest to the highest seed shaded.
    `curves[condition][probe]` is a list of curves (`[[hour, knowers], ...]`), one per run."""
    probes = sorted({p for by_probe in curves.values() for p in by_probe})
    fig = figure(figsize=(5.5 * max(1, len(probes)), 4.2))
    axes = fig.subplots(1, max(1, len(probes)), squeeze=False)
    for ax, probe in zip(axes.flat, probes):
        for condition, by_probe in curves.items():
            runs = [[c for _, c in curve] for curve in by_probe.get(probe, []) if curve]
            if not runs:
                continue
            hours = max(map(len, runs))
            runs = [r + [r[-1]] * (hours - len(r)) for r in runs]  # a shorter run stays where it ended
            columns = list(zip(*runs))
            (line,) = ax.step(
                range(hours), [sum(c) / len(c) for c in columns], where="post", label=f"{condition} ({len(runs)})"
            )
            ax.fill_between(
                range(hours),
                [min(c) for c in columns],
                [max(c) for c in columns],
                step="post",
                color=line.get_color(),
                alpha=0.15,
                linewidth=0,
            )
        ax.set(xlabel="simulated hours", ylabel="agents who know", title=f"Diffusion of {probe!r}")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, title="condition (runs)", title_fontsize=7)
    return save(fig, out)


def plot_attendance_by_condition(summary: list[dict], out: str | Path) -> Path | None:
    """One panel per scheduled event: told, planned, attended, told and attended per condition,
    mean with the standard deviation across seeds. None when the scenario has no such event."""
    suffix = "_told_mean"
    events = sorted(
        {k[: -len(suffix)] for row in summary for k in row if k.startswith("event_") and k.endswith(suffix)}
    )
    if not events:
        return None
    names = [row["condition"] for row in summary]
    fig = figure(figsize=(max(6.0, 1.6 + 1.4 * len(names)) * len(events), 4.8))
    axes = fig.subplots(1, len(events), squeeze=False)
    width = 0.8 / len(ATTENDANCE_BARS)
    for ax, event in zip(axes.flat, events):
        for i, (key, label) in enumerate(ATTENDANCE_BARS):
            ax.bar(
                [j + i * width for j in range(len(names))],
                [row.get(f"{event}_{key}_mean", 0) for row in summary],
                yerr=[row.get(f"{event}_{key}_std", 0) for row in summary],
                width=width,
                capsize=2,
                label=label,
            )
        ax.set_xticks(
            [j + width * (len(ATTENDANCE_BARS) - 1) / 2 for j in range(len(names))],
            [textwrap.fill(n, 18) for n in names],
            fontsize=7,
        )
        ax.set(ylabel="agents (mean ± sd over seeds)", title=f"Attendance: {event[len('event_') :].replace('_', ' ')}")
        ax.legend(fontsize=7)
    return save(fig, out)
