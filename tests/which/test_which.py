"""builder which: recorded hosts (tests/data/sysfs/) -> GPUs, targets, families, names -> image and docker run line."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from builder import which
from builder.core.errors import InputError
from builder.matrix.expand import load_matrix
from testkit.matrices import write_matrix
from tests.fakes.checkout import ROOT, builder_cli
from tests.fakes.hosts import HOSTS, LOCAL, MATRIX, RUN, SECCOMP

ALL_ONLY = """\
matrix:
  os: [ubuntu-24.04]
  platform: [rocm7.2]
  torch: ["2.13.0"]
  gfx: [all]
"""


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    return write_matrix(tmp_path, MATRIX)


def ask(matrix: Path, host: str | Path | None = None, **options: Any) -> dict[str, Any]:
    root = host if isinstance(host, Path) else HOSTS / host if host else HOSTS / "no-amd-gpu"
    return which.recommend(matrix, root, **options)


def gpus_of(answer: dict[str, Any]) -> list[tuple[str | None, str | None, str, bool]]:
    return [(g["target"], g["family"], g["name"], g["igpu"]) for g in answer["gpus"]]




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
    assert "--env HIP_VISIBLE_DEVICES=1 --env HSA_OVERRIDE_GFX_VERSION=9.0.0" in override["apptainer_exec"]
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
    assert answer["cpu_image"]["apptainer_exec"] == (  # no GPU: no --rocm
        "apptainer exec pytorch_cpu_ubuntu24.04_py3.12_torch2.13.0_runtime.sif python")


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


def test_the_apptainer_lines_pull_a_sif_and_run_it_with_rocm_as_the_user(matrix: Path) -> None:
    """HPC sites: `apptainer pull` once from the registry, then `apptainer exec --rocm` (no --group-add: the user's
    own groups open the devices); a local image converts from the engine instead of a registry."""
    tag = "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_runtime"
    rec = ask(matrix, "rx7900xtx", registry="ghcr.io/acme")["recommended"]
    assert rec["apptainer_pull"] == f"apptainer pull pytorch_{tag}.sif docker://ghcr.io/acme/pytorch:{tag}"
    assert rec["apptainer_exec"] == f"apptainer exec --rocm pytorch_{tag}.sif python"
    local = ask(matrix, "rx7900xtx")["recommended"]
    assert local["apptainer_pull"] == f"apptainer build pytorch_{tag}.sif docker-daemon://{LOCAL}{tag}"
    text = builder_cli("which", "-m", str(matrix), "--root", str(HOSTS / "rx7900xtx"), "--registry", "ghcr.io/acme")
    assert f"\n  apptainer pull pytorch_{tag}.sif docker://ghcr.io/acme/pytorch:{tag}\n" in text.stdout
    assert f"\n  apptainer exec --rocm pytorch_{tag}.sif python\n" in text.stdout


def test_which_names_the_gfx103X_dgpu_image_for_an_rx_6800_on_7_13(tmp_path: Path) -> None:
    """Two families carry gfx1030 on the same line and torch: the one with fewer targets is the smaller image."""
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.13]\n  torch: ['2.11.0']\n"
                    "  gfx: [gfx90X-dcgpu, gfx103X-all, gfx103X-dgpu, gfx1151]\n  channel: [therock]\n",
                    encoding="utf-8")
    run = builder_cli("which", "-m", str(file), "--gfx", "gfx1030", "--rocm", "7.13")
    assert run.returncode == 0, run.stderr
    assert "Use rocm7.13_ubuntu24.04_py3.12_torch2.11.0_gfx103X-dgpu_therock_runtime" in run.stdout
