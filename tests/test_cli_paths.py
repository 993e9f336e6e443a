"""The command line's paths as a user takes them, each in a subprocess with a clean
environment: Ctrl-C, --version, --checkpoint-every, inspect and interview as text, the
limits, --cache and --replay-from on a model run, and estimate (with --from, and with no
key and no way out to the network)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from importlib.metadata import version

import pytest
import yaml

from smallville.run import run_scenario
from smallville.scenario import load_scenario

from conftest import CAFE_TRIO, ROOT, THE_VILLE
from llmserver import LLMServer

PRICES = {"price_prompt": 2e-6, "price_completion": 8e-6}


def clean_env(home, **more) -> dict:
    """What a user's shell might hold: no keys, no proxies, nothing of this test process."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COLUMNS": "1000",
    }
    env.update(more)
    return env


def smallville(*args, env, check=True):
    out = subprocess.run(
        [sys.executable, "-m", "smallville", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return out


def only_run(runs_dir):
    (run,) = runs_dir.iterdir()
    return run, json.loads((run / "manifest.json").read_text())


# ---- Ctrl-C --------------------------------------------------------------------------


def read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    """What the terminal shows until `marker` appears (or the program ends, or `timeout`
    seconds pass: a bound for a test that fails, not a wait)."""
    seen = b""
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the program ended and closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    return seen


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_a_run_with_exit_130_and_keeps_what_it_wrote(tmp_path, sig):
    """In a terminal, once the progress line shows simulated time (the simulation is
    running), Ctrl-C (SIGINT), or SIGTERM as `kill` and batch schedulers send: exit 130, the
    manifest says `interrupted`, the log so far kept."""
    import pty

    terminal, program_side = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "smallville",
            "run",
            str(THE_VILLE),
            "--for",
            "2d",
            "--embedder",
            "lexical",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=program_side,
        stderr=program_side,
        cwd=ROOT,
        env=clean_env(tmp_path, TERM="xterm", COLUMNS="120"),
    )
    os.close(program_side)
    try:
        shown = read_until(terminal, b"simulated 2023-02-1", timeout=300)
        assert b"simulated 2023-02-1" in shown, shown.decode(errors="replace")
        proc.send_signal(sig)
        shown += read_until(terminal, b"\0", timeout=300)  # everything, to the end
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(terminal)
    text = shown.decode(errors="replace")
    assert code == 130, text
    assert "interrupted" in text and "Traceback" not in text
    run, manifest = only_run(tmp_path / "runs")
    assert manifest["status"] == "interrupted"
    assert manifest["sim_start"] < manifest["sim_reached"] < manifest["sim_end"]
    lines = (run / "events.jsonl").read_text().splitlines()
    assert len(lines) == manifest["counts"]["events"] > 0
    assert json.loads(lines[-1])["time"] <= manifest["sim_reached"]


# ---- offline flags -----------------------------------------------------------------------


def test_version_is_the_installed_package(tmp_path):
    out = smallville("--version", env=clean_env(tmp_path))
    assert out.stdout.strip() == f"smallville {version('smallville')}"


def test_checkpoint_every_sets_how_often_a_run_is_saved(tmp_path):
    from smallville.checkpoint import checkpoints

    env = clean_env(tmp_path)
    for name, every in (("hourly", []), ("half_hourly", ["--checkpoint-every", "30m"])):
        smallville(
            "run",
            CAFE_TRIO,
            "--for",
            "2h",
            "--embedder",
            "lexical",
            "--quiet",
            "--runs-dir",
            tmp_path / name,
            *every,
            env=env,
        )
    hourly, half_hourly = only_run(tmp_path / "hourly")[0], only_run(tmp_path / "half_hourly")[0]
    assert [c.t for c in checkpoints(hourly)] == [3600.0, 7200.0]
    assert [c.t for c in checkpoints(half_hourly)] == [1800.0, 3600.0, 5400.0, 7200.0]
    assert (hourly / "events.jsonl").read_bytes() == (half_hourly / "events.jsonl").read_bytes()
    bad = smallville("run", CAFE_TRIO, "--checkpoint-every", "often", env=env, check=False)
    assert bad.returncode == 2 and "often" in bad.stderr


# ---- inspect and interview as text ----------------------------------------------------


@pytest.fixture(scope="module")
def trio_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return run_scenario(load_scenario(CAFE_TRIO), runs_dir=runs, duration=10 * 3600, embedder="lexical").path


def ask(*args, home):
    """The command's text and its --json, which says what the text must show."""
    env = clean_env(home)
    return smallville(*args, env=env).stdout, json.loads(smallville(*args, "--json", env=env).stdout)


def test_inspect_as_text_shows_place_plan_and_recalled_memories(trio_run, tmp_path):
    text, state = ask("inspect", trio_run, "--agent", "maria_lopez", "--at", "2023-02-13 15:00", home=tmp_path)
    assert state["recall"] and state["plan"]
    for shown in (
        [state["name"], "2023-02-13 15:00", state["activity"], state["area"]]
        + [m["text"] for m in state["recall"]]
        + [block[2] for block in state["plan"]]
    ):
        assert shown in text, shown


def test_inspect_query_recalls_for_the_question_asked(trio_run, tmp_path):
    query = "Valentine's Day party at Hobbs Cafe"
    text, state = ask(
        "inspect", trio_run, "--agent", "klaus_mueller", "--at", "2023-02-13 17:00", "--query", query, home=tmp_path
    )
    assert state["query"] == query and query in text
    assert any("Valentine" in m["text"] for m in state["recall"]), state["recall"]
    for memory in state["recall"]:
        assert memory["text"] in text


def test_inspect_without_an_agent_lists_everyone(trio_run, tmp_path):
    text, everyone = ask("inspect", trio_run, "--at", "2023-02-13 12:00", home=tmp_path)
    assert sorted(a["agent"] for a in everyone) == ["isabella_rodriguez", "klaus_mueller", "maria_lopez"]
    for agent in everyone:
        assert agent["activity"] in text and agent["area"] in text


def test_interview_as_text_gives_the_answer_and_the_memories_it_rests_on(trio_run, tmp_path):
    question = "What are you working on these days?"
    text, answer = ask("interview", trio_run, "klaus_mueller", question, "--at", "2023-02-13 16:00", home=tmp_path)
    assert answer["answer"] and answer["memories"]
    assert question in text and answer["answer"] in text
    for memory in answer["memories"]:
        assert memory["text"] in text


def test_an_agent_can_be_named_as_the_run_shows_it(trio_run, tmp_path):
    # the run's tables show names; interview, inspect and why take a name as well as an id
    env = clean_env(tmp_path)
    question = ("What are you working on these days?", "--at", "2023-02-13 16:00", "--json")
    by_id = json.loads(smallville("interview", trio_run, "klaus_mueller", *question, env=env).stdout)
    by_name = json.loads(smallville("interview", trio_run, "Klaus Mueller", *question, env=env).stdout)
    assert by_name == by_id and by_id["agent"] == "klaus_mueller"
    state = json.loads(
        smallville("inspect", trio_run, "--agent", "MARIA LOPEZ", "--at", "2023-02-13 15:00", "--json", env=env).stdout
    )
    assert state["agent"] == "maria_lopez"
    why = smallville("why", trio_run, "--agent", "Maria Lopez", "--at", "2023-02-13 15:00", env=env, check=False)
    assert why.returncode == 0, why.stderr
    nobody = smallville("interview", trio_run, "Klaus", "hi?", env=env, check=False)
    assert nobody.returncode == 2 and "unknown agent 'Klaus'" in nobody.stderr and "klaus_mueller" in nobody.stderr


def test_replay_takes_a_name_and_times_of_the_runs_one_day_as_hh_mm(trio_run, tmp_path):
    # trio_run covers 2023-02-13 07:00 to 17:00: "09:00" can only be that day's
    env = clean_env(tmp_path)
    replay = ("replay", trio_run, "--format", "text", "--agent")
    by_id = smallville(*replay, "klaus_mueller", "--at", "2023-02-13 09:00", "--until", "2023-02-13 11:00", env=env)
    by_name = smallville(*replay, "KLAUS mueller", "--at", "9:00", "--until", "11:00", env=env)
    by_id, by_name = by_id.stdout, by_name.stdout
    assert by_name == by_id and "Klaus Mueller" in by_id
    stamps = [line[:16] for line in by_id.splitlines()]
    assert stamps and min(stamps) >= "2023-02-13 09:00" and max(stamps) <= "2023-02-13 11:00"
    everyone = smallville("replay", trio_run, "--format", "text", "--at", "09:00", "--until", "11:00", env=env).stdout
    assert len(everyone.splitlines()) > len(stamps)  # (the agent's filter took)
    nobody = smallville("replay", trio_run, "--agent", "Klaus", env=env, check=False)
    assert nobody.returncode == 2 and nobody.stdout == ""
    assert nobody.stderr == (
        f"smallville: error: unknown agent 'Klaus' in {trio_run}: it has isabella_rodriguez, klaus_mueller, maria_lopez\n"
    )


@pytest.mark.parametrize(
    "command", [("replay", "--format", "text"), ("why", "--agent", "klaus_mueller", "--at", "12:00"), ("inspect",)]
)
def test_output_piped_to_a_reader_that_stops_ends_quietly(trio_run, tmp_path, command):
    # `smallville why RUN ... | head`: the reader goes away, and every command stops without
    # an error line, as `cat` does (why said "smallville: error: Broken pipe")
    read, write = os.pipe()
    os.close(read)  # gone before the command writes anything
    try:
        out = subprocess.run(
            [sys.executable, "-m", "smallville", command[0], str(trio_run), *command[1:]],
            cwd=ROOT,
            env=clean_env(tmp_path),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    finally:
        os.close(write)
    assert out.stderr == ""
    assert out.returncode == 1


def test_inspect_interview_and_why_take_hh_mm_on_the_runs_one_day(trio_run, tmp_path):
    env = clean_env(tmp_path)
    state = json.loads(
        smallville("inspect", trio_run, "--agent", "Maria Lopez", "--at", "15:00", "--json", env=env).stdout
    )
    assert (state["agent"], state["time"]) == ("maria_lopez", "2023-02-13 15:00")
    question = ("What are you working on these days?", "--json")
    short = smallville("interview", trio_run, "klaus mueller", *question, "--at", "16:00", env=env).stdout
    full = smallville("interview", trio_run, "klaus_mueller", *question, "--at", "2023-02-13 16:00", env=env).stdout
    assert short == full and json.loads(short)["time"] == "2023-02-13 16:00"
    why = smallville("why", trio_run, "--agent", "Isabella Rodriguez", "--at", "12:30", env=env).stdout
    assert (
        why == smallville("why", trio_run, "--agent", "isabella_rodriguez", "--at", "2023-02-13 12:30", env=env).stdout
    )
    assert why.startswith("isabella_rodriguez at 2023-02-13 12:")


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["replay", "RUN", "--at", "25:00"],
            "--at: bad date-time '25:00': expected YYYY-MM-DD HH:MM, or HH:MM on a day",
        ),
        (["replay", "RUN", "--at", "18:00"], "--at 18:00: RUN covers 2023-02-13 07:00:00 to 2023-02-13 17:00:00"),
        (["replay", "RUN", "--at", "12:00", "--until", "11:00"], "--until 11:00 comes before the start of the replay"),
        (["why", "RUN", "--agent", "maria_lopez", "--at", "noon"], "--at: bad date-time 'noon'"),
        (["inspect", "RUN", "--at", "06:00"], "2023-02-13 06:00:00 is outside the time RUN covers"),
    ],
)
def test_a_bad_time_is_one_line_saying_what_and_where(trio_run, tmp_path, args, line):
    out = smallville(*[str(trio_run) if a == "RUN" else a for a in args], env=clean_env(tmp_path), check=False)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith("smallville: error: " + line.replace("RUN", str(trio_run))), out.stderr


def test_interview_far_from_a_saved_state_says_which_state_answered(tmp_path):
    """the_ville checkpointed only where it stops (3 hours in): at 09:30 going on from the start
    would cost its 25 agents more than the threshold, so the answer comes from the town's start,
    said in one line of the text and in the JSON; `--exact` answers as of 09:30 itself."""
    env = clean_env(tmp_path)
    runs = tmp_path / "runs"
    smallville(
        "run", THE_VILLE, "--for", "3h", "--checkpoint-every", "4h", "--embedder", "lexical", "--runs-dir", runs,
        "--quiet", env=env,
    )  # fmt: skip
    run, _ = only_run(runs)
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["000010800"]
    asked = ("interview", run, "isabella_rodriguez", "What are you planning?", "--at", "2023-02-13 09:30")
    text, saved = ask(*asked, home=tmp_path)
    note = "as of 07:00, the town's start (seed memories, no one's day begun); the clock is at 09:30"
    assert (saved["state"], saved["t"], saved["asked"], saved["note"]) == ("start", 0, 9000, note)
    assert saved["time"] == "2023-02-13 07:00" and text.splitlines()[1] == note
    ville = load_scenario(THE_VILLE)
    (isabella,) = [a for a in ville.agents if a.id == "isabella_rodriguez"]
    seeds = len(isabella.memories) + len(ville.memories.get(isabella.id, ()))
    assert saved["memories"] and all(m["id"] < seeds for m in saved["memories"])  # seed memories only
    text, exact = ask(*asked, "--exact", home=tmp_path)
    assert (exact["state"], exact["t"], exact["time"], "note" in exact) == ("exact", 9000, "2023-02-13 09:30", False)
    assert "as of" not in text
    assert "--exact" in smallville("interview", "--help", env=env).stdout


# ---- on a model: the local test server ------------------------------------------------


@pytest.fixture(scope="module")
def llm():
    with LLMServer(seed=load_scenario(CAFE_TRIO).seed) as server:
        yield server


def model_config(tmp_path, server, **more) -> str:
    """Brain settings for the test server. It answers at whatever length, never cut at
    `max_tokens` as a model would be: so `max_tokens` is above its longest answer (a day's
    plan), or a token limit could be passed by what no model would have sent."""
    settings = {
        "model": "openai/test-model",
        "api_base": server.api_base,
        "preflight": False,
        "max_tokens": 1000,
        **more,
    }
    path = tmp_path / "brain.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def model_run(tmp_path, server, name, *flags, config=None, check=True):
    """`smallville run` of cafe_trio for 2 hours on the test server; the process's output
    and the requests the server got meanwhile."""
    before = len(server.usages)
    out = smallville(
        "run",
        CAFE_TRIO,
        "--for",
        "2h",
        "--embedder",
        "lexical",
        "--quiet",
        "--brain-config",
        config or model_config(tmp_path, server),
        "--runs-dir",
        tmp_path / name,
        *flags,
        env=clean_env(tmp_path),
        check=check,
    )
    return out, server.usages[before:]


def test_max_tokens_and_budget_flags_stop_a_run_with_exit_3(tmp_path, llm):
    out, billed = model_run(tmp_path, llm, "tokens", "--max-tokens", "6000", check=False)
    assert out.returncode == 3, out.stderr
    run, manifest = only_run(tmp_path / "tokens")
    tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for u in billed)
    assert 0 < tokens <= 6000 and manifest["spend"]["tokens"] == tokens
    assert manifest["budget_stop"]["limit"] == "max-tokens"
    assert f"smallville resume {run} --max-tokens MORE" in out.stderr

    config = model_config(tmp_path, llm, **PRICES)
    out, billed = model_run(tmp_path, llm, "usd", "--budget", "0.02", config=config, check=False)
    assert out.returncode == 3, out.stderr
    run, manifest = only_run(tmp_path / "usd")
    cost = sum(
        u["prompt_tokens"] * PRICES["price_prompt"] + u["completion_tokens"] * PRICES["price_completion"]
        for u in billed
    )
    assert 0 < cost <= 0.02 and manifest["spend"]["usd"] == pytest.approx(cost)
    assert manifest["budget_stop"]["limit"] == "budget"
    assert f"smallville resume {run} --budget MORE" in out.stderr


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, llm):
    """A model run, its answers also put in a cache."""
    home = tmp_path_factory.mktemp("recorded")
    out, billed = model_run(home, llm, "runs", "--cache", home / "cache")
    assert billed
    return only_run(home / "runs")[0], home / "cache"


def test_cache_answers_a_second_run_without_the_model(tmp_path, llm, recorded):
    first, cache = recorded
    _, billed = model_run(tmp_path, llm, "again", "--cache", cache)
    again, manifest = only_run(tmp_path / "again")
    assert billed == []
    assert manifest["usage"]["total"]["calls"] == 0
    assert manifest["usage"]["total"]["cached"] == manifest["usage"]["total"]["requests"] > 0
    assert (again / "events.jsonl").read_bytes() == (first / "events.jsonl").read_bytes()


def test_replay_from_needs_no_model_and_no_key(tmp_path, llm, recorded):
    first, _ = recorded
    chats = llm.chats
    smallville(
        "run",
        CAFE_TRIO,
        "--replay-from",
        first,
        "--quiet",
        "--runs-dir",
        tmp_path / "replayed",
        env=clean_env(tmp_path),
    )
    replayed, manifest = only_run(tmp_path / "replayed")
    assert llm.chats == chats
    assert manifest["brain"]["name"] == "replay"
    assert (replayed / "events.jsonl").read_bytes() == (first / "events.jsonl").read_bytes()


def test_estimate_from_a_recorded_run_on_the_command_line(tmp_path, recorded):
    from smallville.brain import LLMConfig
    from smallville.estimate import estimate

    first, _ = recorded
    sized = json.loads(
        smallville(
            "estimate",
            CAFE_TRIO,
            "--brain",
            "openai/test-model",
            "--for",
            "2h",
            "--embedder",
            "lexical",
            "--json",
            "--from",
            first,
            env=clean_env(tmp_path),
        ).stdout
    )

    def offline(**more) -> dict:
        return json.loads(
            json.dumps(
                estimate(
                    load_scenario(CAFE_TRIO),
                    LLMConfig(model="openai/test-model"),
                    duration=7200,
                    embedder="lexical",
                    **more,
                ).to_dict()
            )
        )

    expected, plain = offline(from_run=first), offline()
    for figure in ("requests", "prompt_tokens", "completion_tokens", "by_kind", "range", "completion_from"):
        assert sized[figure] == expected[figure], figure
    assert sized["completion_from"].startswith("averages of") and sized["completion_from"] != plain["completion_from"]
    assert sized["completion_tokens"] != plain["completion_tokens"]


# ---- estimate: no network, no key ----------------------------------------------------


class Trap:
    """A proxy on 127.0.0.1 that answers nothing and notes who connected to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.peers: list[tuple] = []
        self.accepted = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:  # closed
                return
            conn.close()
            with self.accepted:
                self.peers.append(peer)
                self.accepted.notify_all()

    def close(self) -> int:
        """How many connected, counted once a last connection of its own has been accepted
        (connections are accepted in the order they came)."""
        with socket.create_connection(self.sock.getsockname()) as last:
            mine = last.getsockname()
            with self.accepted:
                assert self.accepted.wait_for(lambda: mine in self.peers, timeout=60)
        self.sock.close()
        return len(self.peers) - 1


def test_estimate_needs_no_key_and_no_network(tmp_path):
    trap = Trap()
    proxies = {
        name: trap.address
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    }
    try:
        out = smallville(
            "estimate",
            CAFE_TRIO,
            "--brain",
            "openai/gpt-4o-mini",
            "--for",
            "1h",
            "--embedder",
            "lexical",
            "--json",
            env=clean_env(tmp_path, NO_PROXY="", no_proxy="", **proxies),
        )
    finally:
        connections = trap.close()
    data = json.loads(out.stdout)
    assert data["requests"] > 0 and data["cost_usd"] > 0
    assert connections == 0
