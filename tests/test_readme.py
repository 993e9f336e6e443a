"""The README's examples run as written, and say what they print.

Every ```python block is executed, and every `$ ` line of a ```console block is run as a
command (in a folder of its own that holds the repository's scenarios and agents, with a
clean environment and no API key); the lines a console block shows after a command must be
what the command printed, digits aside (run ids, wall times and counts vary), and lines
that are only `...` skip what the README leaves out. ```text blocks are not run: they need
a model or a key.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text(encoding="utf-8")) if lang == language]


def shape(line: str) -> str:
    """A line with its digits, table rules and spacing taken out."""
    line = re.sub(r"\d+(?:[.,]\d+)*", "#", line)
    line = re.sub(r"[\u2500-\u257f\u2580-\u259f]+", " ", line)  # box drawing and progress bars
    return " ".join(line.split())


@pytest.fixture
def town(tmp_path) -> Path:
    for name in ("scenarios", "agents", "experiments"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", COLUMNS="80")
    return env


def test_the_readme_has_examples_of_both_kinds():
    assert blocks("python") and blocks("console")


def test_the_python_examples_run(town):
    for code in blocks("python"):
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=town, env=clean_env(), capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-2000:]


def test_the_console_examples_print_what_the_readme_shows(town):
    for block in blocks("console"):
        steps: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        for command, shown in steps:
            done = subprocess.run(
                ["bash", "-c", command.replace("smallville ", f"{sys.executable} -m smallville ", 1)],
                cwd=town,
                env=clean_env(),
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
            printed = [shape(line) for line in (done.stdout + done.stderr).splitlines()]
            at = 0
            for line in shown:
                if line.strip() == "...":
                    continue
                wanted = shape(line)
                found = next((i for i in range(at, len(printed)) if printed[i] == wanted), None)
                assert found is not None, f"{command}: the README shows {line!r}, not printed (in order)"
                at = found + 1
