"""builder.which.host: the host's AMD GPUs from the KFD topology or PCI IDs, and the groups of its device nodes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from builder.which import host
from tests.fakes.hosts import HOSTS


def test_a_host_with_kfd_lists_its_gpus_in_node_order() -> None:
    found = host.detect(HOSTS / "mi300x")
    assert found.source == "kfd" and len(found.gpus) == 8 and found.notes == []
    assert [g.index for g in found.gpus] == list(range(8))
    assert (found.gpus[0].name, found.gpus[0].target, found.gpus[0].pci) == ("AMD Instinct MI300X", "gfx942",
                                                                             "0000:05:00.0")
    assert [o.vendor for o in found.others] == [0x1A03]  # the BMC's display: another vendor's


def test_an_apu_is_an_igpu_beside_the_dgpu() -> None:
    found = host.detect(HOSTS / "apu-rx6800")
    assert [(g.target, g.igpu) for g in found.gpus] == [("gfx1030", False), ("gfx90c", True)]


def test_a_host_without_amd_gpus_names_the_others() -> None:
    found = host.detect(HOSTS / "no-amd-gpu")
    assert (found.source, found.gpus) == ("none", [])
    assert [o.vendor for o in found.others] == [0x8086, 0x10DE]


def test_without_kfd_the_gpus_come_from_pci_and_a_note_says_load_amdgpu(tmp_path: Path) -> None:
    assert host.read_kfd(tmp_path / "missing") is None
    pci_only = tmp_path / "pci-only"
    (pci_only / "sys/bus/pci").mkdir(parents=True)
    (pci_only / "sys/bus/pci/devices").symlink_to(HOSTS / "rx7900xtx" / "sys/bus/pci/devices")
    found = host.detect(pci_only)
    assert found.source == "pci" and [g.target for g in found.gpus] == ["gfx1100"]
    assert found.gpus[0].index is None and "modprobe amdgpu" in found.notes[0]


def test_properties_keep_integer_pairs_only() -> None:
    text = "gfx_target_version 110000\nname gfx1100\nlocation_id ²\nbroken\ndomain 0 1\nhuge 1234567890123456789\n"
    assert host.parse_properties(text) == {"gfx_target_version": 110000}


@pytest.mark.parametrize(("domain", "location", "address"), [(0, 0x0300, "0000:03:00.0"), (1, 0xC50B, "0001:c5:01.3")])
def test_kfd_location_is_a_pci_address(domain: int, location: int, address: str) -> None:
    assert host._bdf(domain, location) == address


def fake_stat(gids: dict[str, int]) -> object:
    def stat_fn(path: Path) -> os.stat_result:
        if path.name not in gids:
            raise FileNotFoundError(path)
        return os.stat_result((stat.S_IFCHR | 0o660, 0, 0, 1, 0, gids[path.name], 0, 0, 0, 0))
    return stat_fn


def test_the_device_nodes_groups_win_over_etc_group(tmp_path: Path) -> None:
    (tmp_path / "dev/dri").mkdir(parents=True)
    for name in ("kfd", "dri/renderD128", "dri/renderD129"):
        (tmp_path / "dev" / name).touch()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/group").write_text("video:x:44:\nrender:x:993:\n")
    groups = host.device_groups(tmp_path, fake_stat({"kfd": 110, "renderD128": 110, "renderD129": 0}))  # type: ignore[arg-type]
    assert groups == host.Groups((110,), "the group of /dev/kfd, /dev/dri/renderD128", True)
    assert host.device_groups(tmp_path, fake_stat({})) == host.Groups((993,), "the render group in /etc/group",  # type: ignore[arg-type]
                                                                       True)
    (tmp_path / "etc/group").write_text("render:x:notanumber:\n")
    assert host.device_groups(tmp_path, fake_stat({})) == host.Groups((), None, True)  # type: ignore[arg-type]
