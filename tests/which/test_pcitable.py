"""builder.which.pcitable: gfx targets from KFD's encoding and from HSA_OVERRIDE_GFX_VERSION, and the PCI ID table."""

from __future__ import annotations

import pytest

from builder import which
from builder.core import facts


@pytest.mark.parametrize(("value", "target"), [
    (110000, "gfx1100"), (90402, "gfx942"), (90012, "gfx90c"), (90010, "gfx90a"), (110501, "gfx1151"),
    (120001, "gfx1201"), (100300, "gfx1030"), (110003, "gfx1103"), (90006, "gfx906"), (0, None),
])
def test_gfx_target_version_is_major_then_hex_minor_and_stepping(value: int, target: str | None) -> None:
    assert which.gfx_from_version(value) == target



@pytest.mark.parametrize(("value", "target"), [("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.0", "gfx900"),
                                               ("9.0.12", "gfx90c"), ("11", None), ("a.b.c", None)])
def test_override_names_the_target_the_gpu_poses_as(value: str, target: str | None) -> None:
    assert which.gfx_from_override(value) == target



def test_pci_table_targets_are_known_and_overrides_land_on_targets_images_carry() -> None:
    table = which.pci_table()
    family_targets = {t for fam in facts.gfx_families().values() for t in fam.targets}
    wheel_targets = {t for minor in facts.compat().torch.values() for t in minor.pytorch.gfx}
    for device, entry in table.devices.items():
        assert entry.target in family_targets | set(table.igpu_targets) | wheel_targets, device
        assert (entry.kind == "igpu") == (entry.target in table.igpu_targets), device
    for target, value in table.overrides.items():
        poses = which.gfx_from_override(value)
        assert poses in wheel_targets and poses != target, target
    assert table.lookup(0x74A1) is not None and table.lookup(0x74A1).target == "gfx942"  # type: ignore[union-attr]
    assert table.lookup(0x744C).revisions["c8"] == "AMD Radeon RX 7900 XTX"  # type: ignore[union-attr]
    assert table.lookup(0x1586).target == "gfx1151" and table.lookup(0x1638).target == "gfx90c"  # type: ignore[union-attr]
