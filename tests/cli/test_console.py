"""builder.cli.console: sizes for a person, errors and failed checks printed with outside text made safe."""

from __future__ import annotations

import io

import pytest

from builder.cli import console
from builder.validate.runner import Check
from tests.fakes import consoles


@pytest.mark.parametrize(("size", "shown"), [
    (None, "-"), (0, "-"), (456_000_000, "456 MB"), (999_999_999, "1000 MB"), (1_000_000_000, "1.00 GB"),
    (54_321_000_000, "54.32 GB"),
])
def test_gb_is_a_size_for_a_person(size: int | None, shown: str) -> None:
    assert console.gb(size) == shown


@pytest.fixture
def err(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    return consoles.capture(monkeypatch, "err")


def test_error_escapes_markup_and_control_characters(err: io.StringIO) -> None:
    console.error("bad [bold]value[/bold]\nforged")
    assert err.getvalue() == "error: bad [bold]value[/bold]\\x0aforged\n"


def test_failed_checks_show_only_failures_and_their_fixes(err: io.StringIO) -> None:
    checks = [Check("smoke", "torch", "pass", "ok"), Check("smoke", "hip", "fail", "no device", "add --device"),
              Check("image", "apt", "fail", "lists\nleft")]
    console.print_failed_checks("tag1", checks)
    assert err.getvalue().splitlines() == ["validation failed tag1:", "    smoke/hip: no device",
                                           "        fix: add --device", "    image/apt: lists\\x0aleft"]
