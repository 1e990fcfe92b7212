"""The OS families' registry (builder/core/osfamilies/__init__.py): every family module has every name of the interface,
and every OS release names a known family."""

from __future__ import annotations

import inspect

import pytest

from builder.core import facts, osfamilies
from builder.core.osfamilies.base import OsFamily


@pytest.mark.parametrize("name", sorted(osfamilies.FAMILIES))
def test_every_family_module_has_every_name_of_the_interface(name: str) -> None:
    module = osfamilies.of(name)
    wanted = {n for n in vars(OsFamily) if not n.startswith("_")} | set(OsFamily.__annotations__)
    missing = sorted(n for n in wanted if not hasattr(module, n))
    assert not missing, f"{name}: {missing}"
    assert name == module.NAME
    for fn in ("cache_mounts", "install_commands", "remove_command", "cleanup_command", "sdk_steps", "install_fix"):
        assert inspect.isfunction(getattr(module, fn)), fn



def test_every_os_release_names_a_known_family() -> None:
    assert {release.family for release in facts.os_releases().values()} <= set(osfamilies.FAMILIES)
