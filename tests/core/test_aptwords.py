"""Debian's grammar for package names and versions (Policy 5.6.7, 5.6.12), archive URLs and loopback trust."""

from __future__ import annotations

import pytest

from builder.core import aptwords


@pytest.mark.parametrize(("version", "ok"), [
    ("1.0", True), ("1:2.36-9+deb12u4", True), ("2.1-1-2", True), ("1:1.2:3-4", True), ("1.0~rc1", True),
    ("0", True), ("1.0-", False), ("1.0-a_b", False), ("a1.0", False), ("1.0:2", False), ("x:1.0", False),
    ("1.0 2", False), ("", False), ("1" * 128, True), ("1" * 129, False), ("1.0\n", False), ("1-2:3", False),
])
def test_versions(version: str, ok: bool) -> None:
    assert aptwords.is_version(version) is ok


@pytest.mark.parametrize(("name", "ok"), [("libc6", True), ("g++", True), ("a", False), ("Ab", False),
                                          ("-ab", False), ("a" * 128, True), ("a" * 129, False), ("a_b", False)])
def test_names(name: str, ok: bool) -> None:
    assert aptwords.is_name(name) is ok


@pytest.mark.parametrize(("url", "loopback"), [("http://127.0.0.1:8127", True), ("http://127.9.9.9/", True),
                                               ("http://[::1]:1/", True), ("http://localhost:1", True),
                                               ("http://localhost.evil:1", False), ("http://10.0.0.1/", False),
                                               ("http://2130706433/", False), ("http://[::1/", False)])
def test_loopback(url: str, loopback: bool) -> None:
    assert aptwords.is_loopback_url(url) is loopback


def test_a_refused_value_is_echoed_cut() -> None:
    shown = aptwords.shown("x" * 1_900_000)
    assert len(shown) < 120 and "1,900,000 characters" in shown


@pytest.mark.parametrize("value", [None, "", "no"])
def test_trust_is_off_unless_yes(value: str | None) -> None:
    assert aptwords.trust_setting(value) is False
    assert aptwords.trust_setting("yes") is True
