"""builder.core.text: text from outside printed on one line, nothing hidden, no markup."""

from __future__ import annotations

import pytest

from builder.core.text import printable, safe


@pytest.mark.parametrize(("text", "shown"), [
    ("plain", "plain"),
    ("tab\tstays", "tab\tstays"),
    ("two\nlines", "two\\x0alines"),
    ("\x1b[31mred", "\\x1b[31mred"),
    ("\x7f\x9f", "\\x7f\\x9f"),
    ("exe\u202etxt", "exe\\u202etxt"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("bom\ufeff", "bom\\ufeff"),
    ("lone \udcff", "lone \\udcff"),
    ("ünïcode 文字", "ünïcode 文字"),
])
def test_printable_shows_control_and_invisible_characters_as_escapes(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_takes_any_object() -> None:
    assert printable(42) == "42"


def test_safe_also_escapes_rich_markup() -> None:
    assert safe("[red]x[/red]\n") == "\\[red]x\\[/red]\\x0a"
