"""Text from outside (files, images, registries) made safe for one line of a terminal or a log."""

from __future__ import annotations

import re

from rich.markup import escape

# control characters (newlines too: one value never forges a second line) and the invisible format
# characters that reorder or hide text on a terminal (U+202E right-to-left override, zero-width spaces, ...),
# and lone surrogates (JSON's "\\udcff", a file name's undecodable byte), which no UTF-8 terminal can print
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
                     "\ufff9-\ufffb\ud800-\udfff]")


def safe(text: object) -> str:
    """Text from outside, made printable on one line (`printable`), rich markup escaped."""
    return escape(printable(text))


def printable(text: object) -> str:
    """Text from outside, for a plain print: control characters (newline included) shown as \\xNN, invisible
    format characters (U+202E) and lone surrogates as \\uNNNN."""
    return CONTROL.sub(_shown, str(text))


def _shown(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
