"""Exit codes as the README gives them: bad input from the user exits 2, a failure of the run
or the machine exits 1; either way one line, naming what and where, and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def smallville(*args, cwd=ROOT):
    """The command line as a user runs it: its own process, a clean environment."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "smallville", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_missing_file_has_no_made_up_position(tmp_path):
    result = smallville("validate", tmp_path / "nothing.yaml", ROOT / "agents" / "nobody_at_all.yaml")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"{tmp_path / 'nothing.yaml'}: cannot read file: No such file or directory",
                                          f"{ROOT / 'agents' / 'nobody_at_all.yaml'}: cannot read file: "
                                          "No such file or directory"]
    broken = tmp_path / "latin1.yaml"
    broken.write_bytes(b"name: Caf\xe9\n")
    assert smallville("validate", broken).stderr == f"{broken}:1:10: the file is not UTF-8 text (byte 9)\n"
