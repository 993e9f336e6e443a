"""Terminal output of a run: a progress bar over simulated time and a summary table."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from smallville.opening import brain_name, count, opening
from smallville.run import Manifest, RunOptions, RunResult, Session, run_scenario
from smallville.tables import Table, make_console, print_table
from smallville.timefmt import format_sim


def run_with_progress(scenario, args, console: Console | None = None) -> RunResult:
    """Run a scenario as the CLI does: progress while it runs, a summary at the end."""
    duration = args.duration or scenario.duration
    options = RunOptions(
        runs_dir=args.runs_dir,
        seed=args.seed,
        duration=args.duration,
        brain=args.brain,
        embedder=args.embedder,
        embedder_api_base=args.embedder_api_base,
        brain_config=getattr(args, "brain_config", None),
        api_base=getattr(args, "api_base", None),
        cache=getattr(args, "cache", None),
        replay_from=getattr(args, "replay_from", None),
        replay_fallthrough=getattr(args, "replay_fallthrough", False),
        checkpoint_every=getattr(args, "checkpoint_every", 3600.0),
        budget={
            "usd": getattr(args, "budget", None),
            "requests": getattr(args, "max_requests", None),
            "tokens": getattr(args, "max_tokens", None),
        },
    )

    def launch(on_start, on_step) -> RunResult:
        return run_scenario(scenario, options, on_start=on_start, on_step=on_step)

    return with_progress(launch, scenario.start, duration, args.quiet, console)


def with_progress(launch, start, duration: float, quiet: bool, console: Console | None = None) -> RunResult:
    """Call `launch(on_start, on_step)` (a run, resume or fork) with a progress bar over simulated
    time, then print the summary and where the run is."""
    console = console or make_console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
        transient=True,
    )
    seen: dict = {"session": None, "free_until": 0.0}

    with progress:
        task = progress.add_task("starting", total=duration)

        def on_start(session: Session) -> None:
            from smallville.brain.bykind import notes_of

            seen["session"], sim, manifest = session, session.sim, session.run.manifest
            if not quiet:
                console.print(
                    opening(manifest, session.run.path, brain_name(manifest.brain or {}), sim.embedder.name),
                    markup=False,
                    highlight=False,
                )
            for note in notes_of(sim.brain.describe()):  # another mode chosen, a model found reasoning
                console.print(note, markup=False, highlight=False)

        def on_step(now: float) -> None:
            progress.update(
                task,
                completed=now,
                description=f"simulated {format_sim(start, now)}" + spend_so_far(seen, now, duration),
            )

        result = launch(on_start, on_step)
    if not quiet:
        print_table(console, summary(result))
        if (result.manifest.usage or {}).get("by_kind"):
            print_table(console, usage_table(result.manifest))
            print_table(console, agent_usage_table(result.manifest))
        if result.manifest.answers:
            print_table(console, answers_table(result.manifest))
    warning = poorly_served(result.manifest)
    if warning:
        console.print(warning, markup=False, highlight=False, style="yellow")
    status = result.manifest.status
    style = "green" if status == "completed" else "yellow"
    if quiet:
        print(f"{status}: run written to {result.path}")
    else:
        console.print(Text.assemble((status, style), f": run written to {result.path}"), highlight=False)
    return result


def spend_so_far(seen: dict, now: float, until: float) -> str:
    """`; 120 calls, 50,000 tok, $0.0123 (about $0.0400 by the end)` for a run on a model:
    the spend so far (the session's `ledger`), and the cost of the whole window at the rate
    of the time that cost."""
    ledger = seen["session"].ledger if seen.get("session") is not None else None
    total = ledger.total() if ledger is not None else None
    if not total or not total["calls"]:
        seen["free_until"] = now  # re-simulated from a record so far: nothing spent
        return ""
    text = f"; {int(total['calls']):,} calls, {int(total['prompt_tokens'] + total['completion_tokens']):,} tok"
    if ledger.cost_known:
        text += f", ${total['cost']:.4f}"
        if now > seen["free_until"]:
            rate = total["cost"] / (now - seen["free_until"])
            text += f" (about ${total['cost'] + rate * max(0.0, until - now):.4f} by the end)"
    return text


def summary(result: RunResult) -> Table:
    """Per-agent figures and the spread of each probe."""
    sim, m = result.simulation, result.manifest
    table = Table(title=f"{m.scenario['name']}: {m.sim_start} to {m.sim_reached}  ({m.wall['seconds']:.1f} s wall)")
    for col in ("agent", "memories", "reflections", "talks", "knows"):
        table.add_column(col, justify="left" if col in ("agent", "knows") else "right")
    for agent in sim.agents.values():
        kinds = [agent.stream[i].kind for i in range(len(agent.stream))]
        table.add_row(
            agent.name,
            str(len(kinds)),
            str(kinds.count("reflection")),
            str(sum(agent.talks.values())),
            ", ".join(sorted(agent.knows)),
        )
    c = m.counts
    table.caption = (
        f"{c['memories']} memories, {c['reflections']} reflections, {c['conversations']} conversations, "
        f"{c['actions']} actions, {c['replans']} re-plans.  Probes: "
        + "; ".join(f"{k} {len(v['start'])} -> {len(v['end'])}" for k, v in m.probes.items())
    )
    return table


def usage_table(manifest: Manifest) -> Table:
    """What the brain's requests took, by request kind: calls, retries, fallbacks, tokens, cost."""
    from smallville.brain.ledger import FIGURES  # (a model's run: the brain is loaded already)

    usage = manifest.usage
    hidden = {"cut"} | ({"reasoning_tokens"} if not usage["total"].get("reasoning_tokens") else set())
    cols = tuple(f for f in FIGURES if f not in hidden)  # reasoning tokens: part of the completion tokens
    table = Table(title=f"brain {manifest.brain.get('model', manifest.brain.get('name'))}")
    table.add_column("request")
    for col in cols:
        table.add_column(col.replace("_tokens", " tok"), justify="right")

    def row(name: str, figures: dict) -> list[str]:
        return [name] + [f"{figures[c]:.4f}" if c == "cost" else str(figures[c]) for c in cols]

    for kind, figures in usage["by_kind"].items():
        table.add_row(*row(kind, figures))
    table.add_row(*row("total", usage["total"]), style="bold")
    per = usage.get("per_agent_hour", {})
    calls = sum(v["calls"] for v in per.values())
    tokens = sum(v["tokens"] for v in per.values())
    table.caption = f"per agent per game hour: {calls:.2f} calls, {tokens:.0f} tokens" + (
        "" if usage["cost_known"] else "; cost unknown for this model (set price_prompt/price_completion)"
    )
    return table


def answers_table(manifest: Manifest) -> Table:
    """How the model served the run, by request kind: answers valid as given, repaired,
    fallen back to safe defaults, given by the runaway guard; calls cut at max_tokens."""
    cols = ("requests", "valid", "repaired", "fallbacks", "over_ceiling", "cut")
    table = Table(title="answers")
    table.add_column("request")
    for col in cols:
        table.add_column(col.replace("_", " "), justify="right")
    for kind, row in manifest.answers.items():
        table.add_row(kind, *(f"{row[c]:,}" for c in cols))
    return table


FALLBACK_SHARE = 0.05  # more of a kind's requests than this falling back is said at the end of a run


def poorly_served(manifest: Manifest) -> str | None:
    """One line if the model's answers fell back for more than 5% of a kind's requests:
    which kinds, how many, and the setting to raise if answers were cut at max_tokens."""
    rows = {
        kind: row
        for kind, row in (manifest.answers or {}).items()
        if row["fallbacks"] > FALLBACK_SHARE * row["requests"]
    }
    if not rows:
        return None
    shares = ", ".join(
        f"{kind} {row['fallbacks']:,} of {row['requests']:,} ({row['fallbacks'] / row['requests']:.0%})"
        for kind, row in rows.items()
    )
    cut = [kind for kind, row in rows.items() if row["cut"]]
    mend = (
        f"; answers were cut off at max_tokens: raise {', '.join(f'kinds.{k}.max_tokens' for k in cut)}"
        if cut
        else "; the brain_fallback events say why"
    )
    return f"the model's answers fell back to safe defaults for {shares}{mend}"


def agent_usage_table(manifest: Manifest, top: int = 10) -> Table:
    """What each agent's requests took (the `top` agents by calls, the rest summed)."""
    usage = manifest.usage
    cols = ("requests", "calls", "fallbacks", "prompt_tokens", "completion_tokens", "cost")
    table = Table(title="by agent")
    table.add_column("agent")
    for col in cols:
        table.add_column(col.replace("_tokens", " tok"), justify="right")
    rows = sorted(usage["by_agent"].items(), key=lambda kv: (-kv[1]["calls"], kv[0]))
    rest = rows[top:]
    if len(rest) > 1:
        rows = rows[:top] + [(f"{len(rest)} others", {c: sum(r[c] for _, r in rest) for c in cols})]
    for name, figures in rows:
        table.add_row(name, *(f"{figures[c]:.4f}" if c == "cost" else f"{int(figures[c]):,}" for c in cols))
    return table


def print_estimate(est: dict, scenario, latency: float, concurrency: int, console: Console | None = None) -> None:
    """`smallville estimate` for people: a table by request kind, the totals with their
    range (a row for each end, so every figure stays whole), and the expected wall time."""
    console = console or make_console()
    hours = est["window_s"] / 3600
    table = Table(
        title=f"{scenario.name} on {est['model']}: {hours:g} simulated hours, {len(scenario.agents)} agents "
        f"(estimated offline in {est['seconds']:.1f} s)"
    )
    for col in ("request", "requests", "prompt tok", "completion tok", "cost USD"):
        table.add_column(col, justify="left" if col == "request" else "right")
    models = est.get("models", {})

    def usd(value) -> str:
        return "unknown" if value is None else f"{value:.4f}"

    for kind, row in est["by_kind"].items():
        name = f"{kind} ({models[kind]})" if kind in models else kind  # a kind on a model of its own
        table.add_row(
            name,
            f"{row['requests']:,}",
            f"{row['prompt_tokens']:,}",
            f"{row['completion_tokens']:,}",
            usd(row["cost_usd"]),
        )
    table.add_row(
        "total",
        f"{est['requests']:,}",
        f"{est['prompt_tokens']:,}",
        f"{est['completion_tokens']:,}",
        usd(est["cost_usd"]),
        style="bold",
    )
    r = est["range"]
    for end, name in enumerate(("range low", "range high")):
        table.add_row(
            name,
            *(f"{r[k][end]:,}" for k in ("requests", "prompt_tokens", "completion_tokens")),
            usd(None if r["cost_usd"] is None else r["cost_usd"][end]),
            style="dim",
        )
    print_table(console, table)
    console.print(
        _basis(est)
        + "; "
        + ("cost unknown for this model: set price_prompt and price_completion\n" if est["cost_usd"] is None else "")
        + f"in order, {est['rounds']:,} rounds of calls at {latency:g} s a call and up to {concurrency} at "
        f"once take about {est['wall_s'] / 60:.0f} min (run-ahead can do better)",
        markup=False,
    )


def _basis(est: dict) -> str:
    """Whose behaviour an estimate assumes, in a line."""
    if est["basis"] != "pilot":
        return (
            "assumes the offline brain's behaviour, completions sized from its answers (a model that acts "
            "otherwise sends otherwise: estimate --from a short run on it)"
        )
    pilot = est["pilot"]
    return (
        f"at the rates of pilot {pilot['run']} ({pilot['agents']} agents, {pilot['hours']:g} simulated hours) "
        "per agent-hour by request kind, plus the first instant simulated offline"
    )


def print_check(check, console: Console | None = None) -> None:
    """`smallville check-model` for people: a row per request kind, the cost of a day of the
    town at the model's rates, and for each kind it cannot serve, the setting that mends it."""
    console = console or make_console()
    for note in check.notes:
        console.print(note, markup=False, highlight=False)
    table = Table(title=f"{check.model} on a moment of {check.scenario} ({check.structured})")
    several = len({row.model for row in check.rows}) > 1  # kinds on models of their own
    for col in ("request", "result", "prompt tok", "completion tok", "max tok", "reasoning tok", "seconds", "note"):
        table.add_column(col, justify="left" if col in ("request", "result", "note") else "right")
    for row in check.rows:
        style = "green" if row.usable else "red"
        kind = f"{row.kind} ({row.model})" if several else row.kind
        table.add_row(
            kind,
            Text(row.result, style=style),
            f"{row.prompt_tokens:,}",
            f"{row.completion_tokens:,}",
            f"{row.max_tokens:,}",
            f"{row.reasoning_tokens:,}",
            f"{row.seconds:.1f}",
            _brief(row.note),
        )
    print_table(console, table)
    if check.missing:
        console.print(
            f"not tried: {', '.join(check.missing)} (the town did not ask them in two simulated days)", markup=False
        )
    day = check.day
    if day:
        cost = (
            "cost unknown (set price_prompt and price_completion)"
            if day["cost_usd"] is None
            else (f"${day['cost_usd']:.2f}")
        )
        console.print(
            f"a day of {check.scenario} ({check.agents} agents) at these rates: about {day['requests']:,} "
            f"requests, {day['prompt_tokens']:,} prompt and {day['completion_tokens']:,} completion tokens, "
            f"{cost} (if the model acts as the offline brain does: estimate --from a pilot run says better)",
            markup=False,
            highlight=False,
        )
    for row in check.rows:
        if not row.usable:
            console.print(f"{row.kind}: {row.mend}", markup=False, highlight=False)
    verdict = (
        "every request kind is usable"
        if check.ok
        else (f"{sum(not r.usable for r in check.rows)} of {len(check.rows)} request kinds are not usable")
    )
    console.print(f"{verdict} ({check.seconds:.0f} s)", markup=False, highlight=False)


def _brief(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def print_inspection(command: str, out, console: Console | None = None) -> None:
    """`smallville inspect` and `interview` for people."""
    console = console or make_console()
    if command == "interview":
        console.print(f"[bold]{escape(out['name'])}[/], {out['time']} ({escape(out['brain'])} brain)")
        if "note" in out:
            console.print(f"[dim]{escape(out['note'])}[/]")
        console.print(f"[dim]Q:[/] {escape(out['question'])}")
        console.print(f"[dim]A:[/] {escape(out['answer'])}")
        for m in out["memories"]:
            console.print(f"   [dim]#{m['id']}[/] {escape(m['text'])}")
        return
    if isinstance(out, list):
        table = Table("agent", "where", "doing")
        for row in out:
            table.add_row(row["agent"], row["area"], row["activity"])
        print_table(console, table)
        return
    console.print(
        f"[bold]{escape(out['name'])}[/] at {out['time']}: {escape(out['activity'])} ({out['status']}), "
        f"{escape(out['area'])} {escape(str(out['tile']))}; {out['memories']} memories; "
        f"knows: {escape(', '.join(out['knows'])) or '-'}"
    )
    if out["plan"]:
        console.print("[bold]Plan[/]")
        for start, end, activity, where, now in _plan_groups(out):
            place = f" [dim]({escape(where)})[/]" if where else ""
            console.print(f" {'▶' if now else ' '} {start}-{end} {escape(activity)}{place}")
    recall = Table("score", "rec", "imp", "rel", "kind", "memory", title=f"Recalled for: {escape(out['query'])}")
    for m in out["recall"]:
        recall.add_row(
            f"{m['score']:.2f}",
            f"{m['recency']:.2f}",
            f"{m['importance']:.2f}",
            f"{m['relevance']:.2f}",
            m["kind"],
            m["text"],
        )
    print_table(console, recall)
    if out["reflections"]:
        console.print("[bold]Reflections[/]")
        for r in out["reflections"]:
            console.print(f" • {escape(r['text'])}")
            for b in r["because"]:
                console.print(f"     [dim]<- #{b['id']} {escape(b['text'])}[/]")
    if out["relationships"]:
        console.print("[bold]Relationships[/]")
        for other, r in out["relationships"].items():
            talks = f" [dim](talked {count(r['talks'], 'time')})[/]" if r["talks"] else ""
            console.print(f" • {escape(r.get('name') or other)}: {escape(r['view'])}{talks}")


def _plan_groups(out: dict) -> list[list]:
    """The plan's blocks, neighbours with the same activity joined: [start, end, activity, where, now]."""
    groups: list[list] = []
    for start, end, activity, where in out["plan"]:
        now = bool(out["now"]) and out["now"][0] == start
        if groups and groups[-1][2] == activity and groups[-1][1] == start:
            groups[-1][1] = end
            groups[-1][4] = groups[-1][4] or now
        else:
            groups.append([start, end, activity, where, now])
    return groups
