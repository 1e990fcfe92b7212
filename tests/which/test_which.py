"""builder which: recorded hosts (tests/data/sysfs/) -> GPUs, targets, families, names -> image and docker run line."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from builder import which
from builder.core import facts
from builder.core.errors import InputError
from builder.matrix.expand import load_matrix
from tests.fakes.checkout import DATA, ROOT, builder_cli
from tests.fakes.matrices import write_matrix

HOSTS = DATA / "sysfs"

# Per-family TheRock images for three families (TheRock 7.14, which builds torch 2.12 of these two) plus
# pytorch.org's all-targets image (its two ROCm lines, 7.2 and 7.1), two torch releases, two OSes, both flavors;
# cpu for the newest torch. The compatibility rules drop therock on 7.2/7.1 and pytorch.org on 7.14.
MATRIX = """\
image: pytorch
matrix:
  os: [ubuntu-24.04, ubuntu-22.04]
  platform: [rocm7.2, rocm7.1, rocm7.14, cpu]
  torch: ["2.13.0", "2.12.0"]
  gfx: [all, gfx94X-dcgpu, gfx110X-all, gfx1151]
  channel: [pytorch, therock]
  flavor: [runtime, devel]
exclude:
  - {channel: pytorch, gfx: [gfx94X-dcgpu, gfx110X-all, gfx1151]}
  - {platform: cpu, channel: therock}
  - {platform: cpu, torch: "2.12.0"}
"""
ALL_ONLY = """\
matrix:
  os: [ubuntu-24.04]
  platform: [rocm7.2]
  torch: ["2.13.0"]
  gfx: [all]
"""
RUN = "docker run -it --device=/dev/kfd --device=/dev/dri --group-add video"
SECCOMP = "--security-opt seccomp=unconfined"
LOCAL = "rocm-image-factory/pytorch:"


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    return write_matrix(tmp_path, MATRIX)


def ask(matrix: Path, host: str | Path | None = None, **options: Any) -> dict[str, Any]:
    root = host if isinstance(host, Path) else HOSTS / host if host else HOSTS / "no-amd-gpu"
    return which.recommend(matrix, root, **options)


def gpus_of(answer: dict[str, Any]) -> list[tuple[str | None, str | None, str, bool]]:
    return [(g["target"], g["family"], g["name"], g["igpu"]) for g in answer["gpus"]]


# --- the encoding and the PCI table ----------------------------------------------------------------------

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


# --- the recorded hosts ----------------------------------------------------------------------------------

def test_rx7900xtx_gets_the_gfx110X_image_and_the_exact_docker_run_line(matrix: Path) -> None:
    answer = ask(matrix, "rx7900xtx")
    assert answer["source"] == "kfd" and answer["exit_code"] == 0
    assert gpus_of(answer) == [("gfx1100", "gfx110X-all", "AMD Radeon RX 7900 XTX", False)]
    gpu = answer["gpus"][0]
    assert (gpu["index"], gpu["kfd_node"], gpu["pci"], gpu["device_id"], gpu["revision"], gpu["render_node"]) == (
        0, 1, "0000:03:00.0", "0x744c", "0xc8", "/dev/dri/renderD128")
    rec = answer["recommended"]
    assert rec["image"]["tag"] == "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_runtime"
    assert rec["docker_run"] == (
        "docker run -it --device=/dev/kfd --device=/dev/dri --group-add video --group-add 110 "
        "--security-opt seccomp=unconfined "
        "rocm-image-factory/pytorch:rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_runtime")
    assert answer["render_gids"] == [110] and "etc/group" in answer["gid_source"]
    assert [a["tag"] for a in rec["alternatives"]] == [
        "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_devel",
        "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime", "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_devel"]
    assert rec["choices"] == {"rocm": ["7.14", "7.2", "7.1"], "torch": ["2.13.0", "2.12.0"],
                              "os": ["ubuntu-24.04", "ubuntu-22.04"], "flavor": ["runtime", "devel"]}


def test_mi300x_lists_eight_gpus_in_node_order_and_uses_the_gfx94X_image(matrix: Path) -> None:
    answer = ask(matrix, "mi300x")
    assert gpus_of(answer) == [("gfx942", "gfx94X-dcgpu", "AMD Instinct MI300X", False)] * 8
    assert [g["index"] for g in answer["gpus"]] == list(range(8))
    assert [g["kfd_node"] for g in answer["gpus"]] == list(range(2, 10))  # nodes 0 and 1 are the two CPUs
    assert [g["pci"] for g in answer["gpus"]][::7] == ["0000:05:00.0", "0000:e5:00.0"]
    rec = answer["recommended"]
    assert rec["image"]["gfx"] == "gfx94X-dcgpu" and rec["gpus"] == list(range(8))
    assert rec["docker_run"] == f"{RUN} --group-add 109 {SECCOMP} {LOCAL}{rec['image']['tag']}"
    assert "HIP_VISIBLE_DEVICES" not in rec["docker_run"]  # every GPU is one the image runs
    assert answer["other_gpus"] == [{"pci": "0000:c2:00.0", "vendor": "ASPEED (a server's BMC)",
                                     "vendor_id": "0x1a03", "device_id": "0x2000"}]


def test_strix_halo_is_an_igpu_of_its_own_family(matrix: Path) -> None:
    answer = ask(matrix, "strix-halo")
    assert gpus_of(answer) == [("gfx1151", "gfx1151", "AMD Radeon 8060S Graphics", True)]
    rec = answer["recommended"]
    assert rec["image"]["tag"] == "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx1151_therock_runtime"
    assert rec["docker_run"] == f"{RUN} --group-add 992 {SECCOMP} {LOCAL}{rec['image']['tag']}"


def test_apu_plus_dgpu_lists_both_recommends_the_dgpu_and_hides_the_igpu(matrix: Path) -> None:
    answer = ask(matrix, "apu-rx6800")
    assert gpus_of(answer) == [("gfx1030", "gfx103X-all", "AMD Radeon RX 6800", False),
                               ("gfx90c", "gfx90c-igpu", "AMD Radeon Vega Graphics (Cezanne)", True)]
    assert [g["supported"] for g in answer["gpus"]] == [True, False]
    rec = answer["recommended"]
    assert rec["target"] == "gfx1030" and rec["gpus"] == [0]
    assert rec["image"]["tag"] == "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime"  # no gfx103X image here
    assert rec["docker_run"] == f"{RUN} --group-add 106 {SECCOMP} -e HIP_VISIBLE_DEVICES=0 {LOCAL}{rec['image']['tag']}"
    assert any("HIP_VISIBLE_DEVICES=0" in n and "HIP 1" in n for n in answer["notes"])
    [igpu] = answer["unmatched"]
    assert (igpu["target"], igpu["why"], igpu["gpus"]) == ("gfx90c", "unsupported", [1])
    override = igpu["override"]
    assert (override["value"], override["poses_as"]) == ("9.0.0", "gfx900")
    assert "fault" in override["risk"] and "hang" in override["risk"]
    assert "-e HIP_VISIBLE_DEVICES=1 -e HSA_OVERRIDE_GFX_VERSION=9.0.0" in override["docker_run"]
    assert answer["exit_code"] == 0  # the RX 6800 has an image


# The production matrix: a slim per-family image for RDNA2 (its discrete half, gfx103X-dgpu: fewest targets) and Strix
# Point (TheRock 10.0 publishes device packages for both to its stable index), not the all-targets image nor an
# HSA_OVERRIDE_GFX_VERSION line.
@pytest.mark.parametrize(("host", "target", "family", "gid"), [
    ("rx6800xt", "gfx1030", "gfx103X-dgpu", "105"),
    ("strix-point", "gfx1150", "gfx1150", "991"),
    ("apu-rx6800", "gfx1030", "gfx103X-dgpu", "106"),
])
def test_production_matrix_gives_rdna2_and_strix_point_their_family_image(host: str, target: str, family: str,
                                                                          gid: str) -> None:
    answer = ask(ROOT / "matrix.yaml", host)
    rec = answer["recommended"]
    assert (rec["target"], answer["exit_code"]) == (target, 0)
    assert rec["image"]["tag"] == f"rocm10.0_ubuntu24.04_py3.12_torch2.13.0_{family}_therock_runtime"
    assert f"--group-add {gid} " in rec["docker_run"] and "HSA_OVERRIDE_GFX_VERSION" not in rec["docker_run"]


def test_no_amd_gpu_exits_1_names_the_other_gpus_and_offers_the_cpu_image(matrix: Path) -> None:
    answer = ask(matrix, "no-amd-gpu")
    assert answer["source"] == "none" and answer["gpus"] == [] and answer["exit_code"] == 1
    assert answer["recommended"] is None and answer["notes"][0].startswith("no AMD GPU found")
    assert [(o["vendor"], o["device_id"]) for o in answer["other_gpus"]] == [("Intel", "0x4680"), ("NVIDIA", "0x2684")]
    assert answer["cpu_image"]["docker_run"] == f"docker run -it {LOCAL}cpu_ubuntu24.04_py3.12_torch2.13.0_runtime"


@pytest.mark.parametrize("host", ["mi300x", "rx7900xtx", "strix-halo", "apu-rx6800", "rx6800xt", "strix-point"])
def test_every_docker_run_line_is_well_formed(matrix: Path, host: str) -> None:
    answer = ask(matrix, host, registry="ghcr.io/acme")
    words = shlex.split(answer["recommended"]["docker_run"])
    assert words[:3] == ["docker", "run", "-it"]
    assert "--device=/dev/kfd" in words and "--device=/dev/dri" in words
    groups = [words[i + 1] for i, w in enumerate(words) if w == "--group-add"]
    assert groups[0] == "video" and all(g.isdigit() for g in groups[1:]) and len(groups) == 2
    envs = [words[i + 1] for i, w in enumerate(words) if w == "-e"]
    assert all(re.fullmatch(r"[A-Z_]+=[0-9,]+", e) for e in envs)
    repository, _, tag = words[-1].rpartition(":")
    assert repository == "ghcr.io/acme/pytorch" and tag in {c.tag for c in load_matrix(matrix)}


# --- detection corners -----------------------------------------------------------------------------------

def copy_host(tmp_path: Path, host: str) -> Path:
    root = tmp_path / host
    shutil.copytree(HOSTS / host, root)
    return root


def test_without_kfd_the_gpus_come_from_pci_ids(matrix: Path, tmp_path: Path) -> None:
    root = copy_host(tmp_path, "rx7900xtx")
    shutil.rmtree(root / "sys/class/kfd")
    answer = ask(matrix, root)
    assert answer["source"] == "pci" and answer["exit_code"] == 0
    assert gpus_of(answer) == [("gfx1100", "gfx110X-all", "AMD Radeon RX 7900 XTX", False)]
    assert answer["gpus"][0]["index"] is None and answer["gpus"][0]["pci"] == "0000:03:00.0"
    assert any("amdgpu driver is not loaded" in n for n in answer["notes"])


def test_a_pci_device_the_table_does_not_know_says_how_to_learn_its_target(matrix: Path, tmp_path: Path) -> None:
    root = copy_host(tmp_path, "rx7900xtx")
    shutil.rmtree(root / "sys/class/kfd")
    (root / "sys/bus/pci/devices/0000:03:00.0/device").write_text("0x7422\n")  # Navi 24 [Radeon PRO W6400]
    answer = ask(matrix, root)
    assert gpus_of(answer) == [(None, None, "AMD GPU 0x7422", False)] and answer["exit_code"] == 1
    [miss] = answer["unmatched"]
    assert miss["why"] == "unknown-device" and "--gfx" in miss["message"]


def test_the_kernels_target_wins_over_the_table(matrix: Path, tmp_path: Path) -> None:
    root = copy_host(tmp_path, "rx7900xtx")
    props = root / "sys/class/kfd/kfd/topology/nodes/1/properties"
    props.write_text(props.read_text().replace("device_id 29772", "device_id 4372"))  # 0x1114: gfx1152 in the table
    (root / "sys/bus/pci/devices/0000:03:00.0/device").write_text("0x1114\n")
    answer = ask(matrix, root)
    assert answer["gpus"][0]["target"] == "gfx1100"
    assert any("the kernel's target is used" in n for n in answer["notes"])


def test_the_group_of_the_device_nodes_wins_over_etc_group(matrix: Path) -> None:
    real = os.stat

    def fake(path: Path) -> os.stat_result:
        st = real(path)
        if path.name == "kfd" or path.name.startswith("renderD"):
            return os.stat_result((stat.S_IFCHR | 0o660, *st[1:5], 992, *st[6:]))
        return st

    answer = ask(matrix, "rx7900xtx", stat_fn=fake)
    assert answer["render_gids"] == [992] and answer["gid_source"].startswith("the group of /dev/kfd")
    assert "--group-add video --group-add 992 " in answer["recommended"]["docker_run"]


def test_without_any_gid_the_line_asks_getent(matrix: Path, tmp_path: Path) -> None:
    root = copy_host(tmp_path, "strix-halo")
    (root / "etc/group").write_text("root:x:0:\nvideo:x:44:\n")
    answer = ask(matrix, root)
    assert answer["render_gids"] == []
    assert '--group-add "$(getent group render | cut -d: -f3)"' in answer["recommended"]["docker_run"]


# --- --gfx, filters, unsupported targets -----------------------------------------------------------------

def test_gfx_option_skips_detection(matrix: Path) -> None:
    answer = ask(matrix, "no-amd-gpu", gfx=["gfx942"])
    assert answer["source"] == "--gfx" and answer["recommended"]["image"]["gfx"] == "gfx94X-dcgpu"
    assert answer["render_gids"] == [993]  # the devices' group still comes from the host


def test_phoenix_igpus_are_served_by_the_gfx110X_family_image(matrix: Path) -> None:
    answer = ask(matrix, gfx=["gfx1103"])
    assert answer["recommended"]["image"]["gfx"] == "gfx110X-all" and answer["gpus"][0]["igpu"]


@pytest.mark.parametrize(("target", "value", "poses"), [("gfx1032", "10.3.0", "gfx1030"),
                                                        ("gfx1031", "10.3.0", "gfx1030"),
                                                        ("gfx1103", "11.0.0", "gfx1100"),
                                                        ("gfx90c", "9.0.0", "gfx900")])
def test_unsupported_gpu_says_so_and_what_the_override_would_do(tmp_path: Path, target: str, value: str,
                                                                poses: str) -> None:
    answer = ask(write_matrix(tmp_path, ALL_ONLY), gfx=[target])
    assert answer["recommended"] is None and answer["exit_code"] == 1
    [miss] = answer["unmatched"]
    assert miss["why"] == "unsupported" and f"carries kernels for {target}" in miss["message"]
    assert (miss["override"]["value"], miss["override"]["poses_as"]) == (value, poses)
    assert f"-e HSA_OVERRIDE_GFX_VERSION={value} {LOCAL}rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime" in (
        miss["override"]["docker_run"])


def test_a_target_without_override_gets_none(tmp_path: Path) -> None:
    [miss] = ask(write_matrix(tmp_path, ALL_ONLY), gfx=["gfx1152"])["unmatched"]
    assert miss["why"] == "unsupported" and miss["override"] is None and miss["family"] == "gfx1152"


@pytest.mark.parametrize(("options", "tag"), [
    ({"rocm": "7.14"}, "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_runtime"),
    ({"rocm": "rocm7.14", "os_name": "ubuntu-22.04"},
     "rocm7.14_ubuntu22.04_py3.10_torch2.12.0_gfx110X-all_therock_runtime"),
    ({"flavor": "devel"}, "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_devel"),
    # 7.1 is a line of its own, not a prefix of 7.14: its best image for the GPU is pytorch.org's all-targets one
    ({"rocm": "7.1"}, "rocm7.1_ubuntu24.04_py3.12_torch2.13.0_all_runtime"),
])
def test_filters_pick_the_line_os_and_flavor(matrix: Path, options: dict[str, str], tag: str) -> None:
    assert ask(matrix, "rx7900xtx", **options)["recommended"]["image"]["tag"] == tag


def test_a_filter_that_leaves_nothing_says_what_there_is(matrix: Path) -> None:
    answer = ask(matrix, "rx7900xtx", rocm="6.4")
    assert answer["exit_code"] == 1
    [miss] = answer["unmatched"]
    assert miss["why"] == "filtered" and "--rocm 6.4" in miss["message"]
    assert miss["choices"]["rocm"] == ["7.14", "7.2", "7.1"]


@pytest.mark.parametrize(("options", "key", "text"), [
    ({"gfx": ["gfx94X-dcgpu"]}, "--gfx", "'gfx94X-dcgpu' is a family, not a target: give the GPU's target (gfx942)"),
    ({"gfx": ["MI300X"]}, "--gfx", "'MI300X' is a GPU, not a target: use --gfx gfx942"),
    ({"gfx": ["RX 7900 XTX"]}, "--gfx", "use --gfx gfx1100"),
    ({"gfx": ["gfx-1100"]}, "--gfx", "is not a gfx target"),
    ({"rocm": "seven"}, "--rocm", "not a ROCm version"),
    ({"os_name": "ubuntu-20.04"}, "--os", "unknown os 'ubuntu-20.04'"),
    ({"flavor": "debug"}, "--flavor", "not runtime or devel"),
    ({"registry": "https://ghcr.io/acme"}, "--registry", "has a scheme"),
])
def test_bad_options_are_input_errors(matrix: Path, options: dict[str, Any], key: str, text: str) -> None:
    with pytest.raises(InputError) as info:
        ask(matrix, "rx7900xtx", **options)
    [problem] = info.value.problems
    assert problem.key == key and text in problem.message


# --- the command -----------------------------------------------------------------------------------------

def test_cli_text_for_mi300x(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--root", str(HOSTS / "mi300x"), "--registry", "ghcr.io/acme")
    assert result.returncode == 0, result.stderr
    assert re.search(r"HIP 0-7 +8 x AMD Instinct MI300X  gfx942  family gfx94X-dcgpu  dGPU", result.stdout)
    assert (f"{RUN} --group-add 109 {SECCOMP} ghcr.io/acme/pytorch:"
            "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_therock_runtime\n") in result.stdout


def test_cli_json_structure(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--sysfs", str(HOSTS / "apu-rx6800"), "--json",
                         "--registry", "ghcr.io/acme")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"matrix", "source", "gpus", "other_gpus", "recommended", "unmatched", "cpu_image",
                         "render_gids", "gid_source", "notes", "exit_code"}
    assert set(data["gpus"][0]) == {"index", "kfd_node", "pci", "device_id", "revision", "name", "target", "family",
                                    "igpu", "render_node", "supported"}
    assert set(data["recommended"]) == {"target", "family", "gpus", "for", "image", "docker_run", "alternatives",
                                        "choices"}
    assert set(data["recommended"]["image"]) == {"tag", "ref", "gfx", "gfx_targets", "rocm", "torch", "python", "os",
                                                 "flavor", "channel"}
    assert set(data["unmatched"][0]) == {"target", "family", "gpus", "for", "why", "message", "override"}
    assert set(data["unmatched"][0]["override"]) == {"value", "poses_as", "risk", "image", "docker_run"}
    assert data["recommended"]["image"]["ref"].startswith("ghcr.io/acme/pytorch:") and data["exit_code"] == 0


def test_cli_without_an_amd_gpu_exits_1_with_a_message_not_a_traceback(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--root", str(HOSTS / "no-amd-gpu"))
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert result.stdout.startswith("no AMD GPU found") and "NVIDIA 0x2684" in result.stdout


def test_cli_bad_gfx_is_exit_2(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--gfx", "gfx94X-dcgpu")
    assert result.returncode == 2 and "is a family, not a target" in result.stderr


# --- an unknown gfx family in a matrix names the family that holds it ------------------------------------

@pytest.mark.parametrize(("value", "message"), [
    ("gfx942", "unknown gfx family 'gfx942'; gfx942 is a target of family gfx94X-dcgpu: use gfx: [gfx94X-dcgpu]"),
    ("gfx1100", "unknown gfx family 'gfx1100'; gfx1100 is a target of families gfx110X-all, gfx110X-dgpu: use gfx: "
                "[gfx110X-all] (or gfx110X-dgpu)"),
    ("MI300X", "unknown gfx family 'MI300X'; MI300X is a GPU of family gfx94X-dcgpu: use gfx: [gfx94X-dcgpu]"),
    ("GFX94X-DCGPU", "unknown gfx family 'GFX94X-DCGPU'; family names are case-sensitive: use gfx: [gfx94X-dcgpu]"),
    # TheRock's gfx900-dgpu family (therock_amdgpu_targets.cmake @ 584db938) is in gfx.yaml now.
    ("gfx900", "unknown gfx family 'gfx900'; gfx900 is a target of family gfx900-dgpu: use gfx: [gfx900-dgpu]"),
    ("gfx9999", "unknown gfx family 'gfx9999'; known: all, gfx101X-dgpu"),
])
def test_builder_matrix_names_the_family_of_a_target(tmp_path: Path, value: str, message: str) -> None:
    file = write_matrix(tmp_path, f"matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2]\n  torch: ['2.13.0']\n"
                                  f"  gfx: [all, {value}]\n")
    result = builder_cli("matrix", "-m", str(file))
    assert result.returncode == 2
    assert f"matrix.yaml:5: matrix.gfx[1]: {message}" in result.stderr


def test_which_names_the_gfx103X_dgpu_image_for_an_rx_6800_on_7_13(tmp_path: Path) -> None:
    """Two families carry gfx1030 on the same line and torch: the one with fewer targets is the smaller image."""
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.13]\n  torch: ['2.11.0']\n"
                    "  gfx: [gfx90X-dcgpu, gfx103X-all, gfx103X-dgpu, gfx1151]\n  channel: [therock]\n",
                    encoding="utf-8")
    run = builder_cli("which", "-m", str(file), "--gfx", "gfx1030", "--rocm", "7.13")
    assert run.returncode == 0, run.stderr
    assert "Use rocm7.13_ubuntu24.04_py3.12_torch2.11.0_gfx103X-dgpu_therock_runtime" in run.stdout
