"""OS families, one module each behind one interface (base.OsFamily), listed here: adding a family is one module
and one row of FAMILIES (and its releases in builder/data/os.yaml)."""

from __future__ import annotations

from builder.core.osfamilies import apt, dnf
from builder.core.osfamilies.base import OsFamily

FAMILIES: dict[str, OsFamily] = {"apt": apt, "dnf": dnf}


def of(name: str) -> OsFamily:
    return FAMILIES[name]
