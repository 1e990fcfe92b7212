"""builder.core.logfiles: a tool's output in its log file, ANSI stripped, and the tail shown on failure."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from builder.core.logfiles import logged_run, strip_ansi


def test_strip_ansi_removes_colours_and_cursor_moves() -> None:
    assert strip_ansi("\x1b[1;31mred\x1b[0m \x1b[2Kline") == "red line"
    assert strip_ansi("\x1b[91mdebconf\x1b[0m") == "debconf"



def test_logged_run_keeps_output_in_the_log_and_shows_the_tail_on_failure(tmp_path: Path) -> None:
    log = tmp_path / "tool.log"
    logged_run([sys.executable, "-c", "print('\\x1b[32mok\\x1b[0m')"], log)
    assert log.read_text() == "ok\n"
    console = Console(file=io.StringIO(), width=120)
    script = "import sys\nfor i in range(40): print(f'line {i}')\nsys.exit(3)"
    with pytest.raises(subprocess.CalledProcessError):
        logged_run([sys.executable, "-c", script], log, console)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "line 39" in shown and "line 20" not in shown and f"full log: {log}" in shown
    assert len(log.read_text().splitlines()) == 40
