"""builder.cli.console's streams captured for a test: what a person would read, in one StringIO, 300 columns wide (no
line of the factory's wraps) and without highlighting (rich's colours of numbers and paths)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from builder.cli import console

WIDTH = 300


def capture(monkeypatch: pytest.MonkeyPatch, *streams: str) -> io.StringIO:
    """The named streams of builder.cli.console ("out", "err") written into one StringIO, in the order written."""
    text = io.StringIO()
    for name in streams:
        monkeypatch.setattr(console, name, Console(file=text, width=WIDTH, highlight=False))
    return text


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """stdout and stderr together."""
    return capture(monkeypatch, "out", "err")
