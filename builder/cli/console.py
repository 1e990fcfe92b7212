"""What every command prints through: the two consoles, errors, sizes and failed checks. It only prints.

Each command group's own tables and summaries live beside its commands (matrix.py, runs.py, which.py ...).
Every string that came from a file, an image or a registry goes through `safe` first: rich markup is
escaped and control characters (an escape sequence in a matrix's override reason) never reach the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console

from builder.core.text import safe
from builder.validate.runner import Check

# Piped output (CI logs, files) gets wide tables instead of rich's 80-column default.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    err.print(f"[red]error:[/red] {safe(message)}")


def gb(n: int | None) -> str:
    """A size for a person: '1.23 GB', '456 MB', or '-' when unknown."""
    if not n:
        return "-"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def print_failed_checks(tag: str, checks: Sequence[Check]) -> None:
    """The failed checks of one image with their fixes (`builder test`, and a run's failure report)."""
    err.print(f"[red]validation failed[/red] {safe(tag)}:")
    for c in checks:
        if c.status == "fail":
            err.print(f"    {safe(c.suite)}/{safe(c.name)}: {safe(c.detail)}")
            if c.fix:
                err.print(f"        fix: {safe(c.fix)}")
