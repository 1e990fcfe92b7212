"""The OS families' registry and interface (builder/core/osfamilies/__init__.py, base.py): every OS release names a
known family, and a family states what it does not support in one place (the interface's optional parts). Every
listed module against the interface: tests/core/test_registries.py."""

from __future__ import annotations

from typing import get_args

from builder.core import facts, osfamilies
from builder.core.osfamilies.base import OsFamily
from tests.core.test_registries import protocol_members


def test_every_os_release_names_a_known_family() -> None:
    assert {release.family for release in facts.os_releases().values()} <= set(osfamilies.FAMILIES)


def test_a_family_states_what_it_does_not_support_in_its_optional_parts() -> None:
    """The interface has only what every family answers; the rest is one optional part each, None where absent."""
    optional = {n for n, hint in protocol_members(OsFamily)[0].items() if type(None) in get_args(hint)}
    assert optional == {"BASE_TOOL", "PACKAGE_INDEX", "PINNED_INSTALL", "SDK"}
    assert all(getattr(osfamilies.of("apt"), n) is not None for n in optional)
    assert all(getattr(osfamilies.of("dnf"), n) is None for n in optional)
