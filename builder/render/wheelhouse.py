"""Offline input: a wheelhouse of every wheel the chosen cells install, fetched with the host's pip.

For air-gapped sites and for hosts whose containers cannot verify PyPI's certificate: the build then
installs from the wheelhouse with --no-index, through the same template as the index URL path.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from builder.core.logfiles import LOG_DIR, logged_run
from builder.core.spec import CellSpec
from builder.render.installs import requirements

# pip needs explicit platform tags to fetch for a Python other than its own; these cover the wheels
# PyTorch, NumPy and their pure-Python dependencies publish for x86-64 glibc distros.
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "linux_x86_64"]
PYPI = "https://pypi.org/simple"


def download_commands(cells: list[CellSpec], dest: Path, index_url: str | None,
                      use_pip_config: bool) -> list[list[str]]:
    """One `pip download` per (python, index) group of cells; pure, so it is unit-tested."""
    groups: dict[tuple[str, str], set[str]] = defaultdict(set)
    for cell in cells:
        groups[(cell.python, index_url or cell.index_url)].update(requirements(cell))
    commands = []
    for (python, index), reqs in sorted(groups.items()):
        cmd = [sys.executable, "-m", "pip", "download", "--dest", str(dest), "--only-binary=:all:",
               "--implementation", "cp", "--python-version", python]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        if not use_pip_config:
            cmd += ["--index-url", index]
            if index.rstrip("/") != PYPI:
                cmd += ["--extra-index-url", PYPI]
        commands.append(cmd + sorted(reqs))
    return commands


def fill(cells: list[CellSpec], dest: Path, index_url: str | None = None, use_pip_config: bool = False) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for cmd in download_commands(cells, dest, index_url, use_pip_config):
        logged_run(cmd, LOG_DIR / "wheelhouse.log")
