"""torch-smoke's names and versions: gfx targets from kfd and the override, arch spellings, platform kinds."""

from __future__ import annotations

import pytest

from builder.smoke.torch_smoke.core import (
    base_arch,
    first_line,
    gfx_from_override,
    gfx_from_version,
    major_minor,
    platform_kind,
    public,
    sm_arch,
    unique,
)
from tests.fakes.smoke import CPU_CELL, CUDA_CELL, ROCM_CELL


@pytest.mark.parametrize(("value", "gfx"), [
    (110000, "gfx1100"), (90402, "gfx942"), (90010, "gfx90a"), (120001, "gfx1201"), (100300, "gfx1030"),
    (90012, "gfx90c"), (110003, "gfx1103"), (90500, "gfx950"), (0, None)])
def test_gfx_target_version_names_the_target(value: int, gfx: str | None) -> None:
    assert gfx_from_version(value) == gfx


@pytest.mark.parametrize(("value", "gfx"), [("11.0.0", "gfx1100"), ("10.3.0", "gfx1030"), ("9.0.10", "gfx90a"),
                                            ("9.4.2", "gfx942"), ("eleven", None), ("11.0", None)])
def test_override_names_the_target_it_pretends(value: str, gfx: str | None) -> None:
    assert gfx_from_override(value) == gfx


def test_small_helpers() -> None:
    assert base_arch("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert [sm_arch(a) for a in ("9.0", "90", "sm_90")] == ["sm_90"] * 3
    assert major_minor("7.2.53211-e7e6d5b") == "7.2"
    assert public("2.13.0+cpu") == "2.13.0"
    assert [platform_kind(c) for c in (ROCM_CELL, CPU_CELL, CUDA_CELL)] == ["rocm", "cpu", "cuda"]
    assert unique(["b", "", "a", "b"]) == ["b", "a"]
    assert first_line(ZeroDivisionError("division by zero\nsecond line")) == "ZeroDivisionError: division by zero"
