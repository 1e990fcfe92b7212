"""OS families, one module each behind one interface (base.OsFamily), listed here once: adding a family is one
module, its row of FAMILIES, its releases in builder/data/os.yaml, and its test module (docs/architecture.md,
"Adding an OS family or a wheel channel").

A family's name is its module's NAME, stated there once. os.yaml's `family` names a key of FAMILIES (builder.core.facts
loads the data below this package, so it holds the name as a string; `of` refuses an unknown one, and
tests/core/test_osfamilies.py holds every OS release to the registry)."""

from __future__ import annotations

from builder.core.osfamilies import apt, dnf
from builder.core.osfamilies.base import OsFamily

FAMILIES: dict[str, OsFamily] = {apt.NAME: apt, dnf.NAME: dnf}  # mypy holds each module to OsFamily


def of(name: str) -> OsFamily:
    """The family's module; a KeyError naming the known families for any other name."""
    if name not in FAMILIES:
        raise KeyError(f"unknown OS family {name!r} (known: {', '.join(FAMILIES)})")
    return FAMILIES[name]
