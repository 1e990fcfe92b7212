"""Log files: every tool's output goes to one file under .rif/logs, ANSI escapes stripped.

A person sees one line per step; the file has everything, and a failure shows its last lines and the path.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from rich.console import Console

from builder.core.safefs import open_log

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
LOG_DIR = Path(".rif/logs")
TAIL_LINES = 15


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def log_path(log_dir: Path, tag: str) -> Path:
    return log_dir / f"{tag}.log"


def logged_run(cmd: list[str], log: Path, console: Console | None = None, **kwargs: object) -> None:
    """Run cmd with its output in log (ANSI stripped); on failure show the last lines and the log's path."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open_log(log) as fh:  # a link or FIFO planted at log is replaced, never written through
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                **kwargs)  # type: ignore[call-overload]
        assert proc.stdout is not None
        for text in proc.stdout:
            fh.write(strip_ansi(text))
        code = proc.wait()
    if code != 0:
        out = console or Console(stderr=True, highlight=False)
        for text in log.read_text(encoding="utf-8").splitlines()[-TAIL_LINES:]:
            out.print(f"    {text}", markup=False)
        out.print(f"full log: {log}", markup=False)
        raise subprocess.CalledProcessError(code, cmd)
