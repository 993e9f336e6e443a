"""The code passes the project's linter, formatter check and type checker, as configured in
pyproject.toml (ruff on everything; mypy, strictly, on the packages it lists), so CI runs
them with the rest of the suite."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def check(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_to_fix():
    done = check("ruff", "check", "--no-cache", "smallville", "tests", "benchmarks", "tools")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_code_is_formatted_as_ruff_formats_it():
    done = check("ruff", "format", "--check", "--no-cache", "smallville", "tests", "benchmarks", "tools")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_strictly_typed_packages_type_check(tmp_path):
    done = check("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success" in done.stdout
