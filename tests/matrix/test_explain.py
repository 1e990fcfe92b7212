"""Per-line rules in general: every TheRock line installs from the index that serves it, with or without
[device-*] extras as that index needs; the HIP each line's wheels report; the SDK a pytorch.org devel image gets;
and `matrix --explain`'s per-line verdicts. Cases run over every line and family of the data, not examples only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core import facts
from builder.core.spec import CellSpec
from builder.matrix import compat
from builder.matrix.expand import expand_matrix
from builder.matrix.explain import family_gap_lines, family_gaps, line_verdicts
from builder.render import installs
from builder.smoke.torch_smoke import install
from tests.fakes.checkout import builder_cli
from tests.fakes.smoke import ROCM_CELL, fake_torch, outcome, smoke

LINES = [line for line, r in facts.compat().therock.items() if not r.prerelease]
FAMILIES = list(facts.gfx_families())


def therock_cell(tmp_path: Path, line: str, torch: str, gfx: str, flavor: str = "runtime") -> list[CellSpec]:
    file = tmp_path / "m.yaml"
    file.write_text(f"matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm{line}]\n  torch: ['{torch}']\n"
                    f"  gfx: [{gfx}]\n  channel: [therock]\n  flavor: [{flavor}]\n"
                    "include:\n  - {os: debian-12, platform: cpu, torch: '2.13.0', tag: anchor}\n", encoding="utf-8")
    expansion = expand_matrix(file)
    cells = {c.tag: c for c in [*expansion.cells, *(d.cell for d in expansion.dropped)] if c.tag != "anchor"}
    return list(cells.values())


def pytorch_cells(tmp_path: Path, os_name: str, rocm: str, torch: str, flavor: str) -> list[CellSpec]:
    """Kept and dropped cells of one pytorch.org line (an anchor keeps a fully dropped product legal)."""
    file = tmp_path / "p.yaml"
    file.write_text(f"matrix:\n  os: [{os_name}]\n  platform: [rocm{rocm}]\n  torch: ['{torch}']\n  gfx: [all]\n"
                    f"  flavor: [{flavor}]\n"
                    "include:\n  - {os: debian-12, platform: cpu, torch: '2.13.0', tag: anchor}\n", encoding="utf-8")
    expansion = expand_matrix(file)
    cells = {c.tag: c for c in [*expansion.cells, *(d.cell for d in expansion.dropped)] if c.tag != "anchor"}
    return list(cells.values())


@pytest.mark.parametrize("line", LINES)
def test_every_therock_line_names_the_index_that_serves_it(tmp_path: Path, line: str) -> None:
    """whl-next from 10.0, whl-multi-arch for 7.13/7.14 (device extras per target), the family's own index for
    7.9-7.12 (no extras: the family's wheel carries its kernels); the pins carry the line's full local version."""
    line_release = facts.compat().therock[line]
    torch = f"{line_release.torch[-1]}.0"
    for gfx in line_release.families or FAMILIES:
        [cell] = therock_cell(tmp_path, line, torch, gfx)
        extras = installs.device_extras(cell)
        release = line_release.view(gfx, line_release.torch[-1])  # 7.13: its per-family release where that serves
        assert cell.therock_release == release
        if release.index == "per-family":
            assert cell.index_url == f"https://repo.amd.com/rocm/whl/{release.index_dirs.get(gfx, gfx)}/"
            assert extras == ""
        else:
            want = {"multi-arch": "https://repo.amd.com/rocm/whl-multi-arch/",
                    "whl-next": "https://stable.repo.amd.com/rocm/whl-next/"}[release.index]
            assert cell.index_url == want
            assert extras == "[" + ",".join(f"device-{t}" for t in cell.gfx_targets) + "]"
        assert all(r.endswith(f"+rocm{release.version}") for r in installs.small_requirements(cell)[:-1])
        assert not release.prerelease


def test_10_0_is_on_whl_next_not_on_the_legacy_multi_arch_index(tmp_path: Path) -> None:
    [cell] = therock_cell(tmp_path, "10.0", "2.13.0", "gfx1151")
    assert cell.index_url == "https://stable.repo.amd.com/rocm/whl-next/"
    assert installs.device_requirements(cell) == ["torch[device-gfx1151]==2.13.0+rocm10.0.0",
                                                  "torchvision[device-gfx1151]==0.28.0+rocm10.0.0"]
    assert "torchaudio==2.11.0.2+rocm10.0.0" in installs.small_requirements(cell)


def test_a_companion_the_matrix_leaves_out_wins_over_the_lines_own_version(tmp_path: Path) -> None:
    """null (not installed) is the matrix's to say; another version than the line built is dropped (test_releases)."""
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm10.0]\n"
                    "  torch: [{version: '2.13.0', torchaudio: null}]\n  gfx: [gfx94X-dcgpu]\n"
                    "  channel: [therock]\n", encoding="utf-8")
    [cell] = expand_matrix(file).cells
    assert (cell.torchvision, cell.torchaudio) == ("0.28.0", None)


@pytest.mark.parametrize("line", LINES)
def test_excluded_targets_drop_exactly_the_families_that_carry_them(tmp_path: Path, line: str) -> None:
    """... except targets the line's stable multi-arch index never serves (10.0: gfx90c, dev and nightly only):
    no other torch release of the line would help there, and therock-stable-targets says so instead."""
    release = facts.compat().therock[line]
    dev_only = set(facts.compat().therock_dev_only_targets) if release.index != "per-family" else set()
    extra = release.per_family.exclude_targets if release.per_family else {}
    for minor, excluded in [*release.exclude_targets.items(), *extra.items()]:
        for gfx, fam in facts.gfx_families().items():
            [cell] = therock_cell(tmp_path, line, f"{minor}.0", gfx)
            if cell.therock_release is None or minor not in cell.therock_release.exclude_targets:
                continue  # 7.13: a family its per-family release did not serve is on whl-multi-arch
            dropped = compat.therock_torch_targets(cell) is not None
            never = dev_only if cell.therock_release.index != "per-family" else set()
            assert dropped == bool(set(fam.targets) & set(excluded) - never), (line, minor, gfx)


@pytest.mark.parametrize("line", LINES)
def test_smoke_accepts_each_hip_the_line_may_report_and_nothing_else(tmp_path: Path, line: str) -> None:
    release = facts.compat().therock[line]
    gfx = (release.families or ("gfx94X-dcgpu",))[0]
    [cell] = therock_cell(tmp_path, line, f"{release.torch[-1]}.0", gfx)
    expect = {**ROCM_CELL, **cell.expectations()}
    assert expect["hip_accept"] == list(release.hip) and expect["hip"] == release.hip[0]
    for hip in release.hip:
        assert outcome(install.hip_version, smoke(expect, fake_torch(hip=f"{hip}.12345-abc"))).status == "pass"
    major, minor = release.hip[0].split(".")
    other = f"{major}.{int(minor) + 1}.1"
    assert outcome(install.hip_version, smoke(expect, fake_torch(hip=other))).status == "fail"


def test_pytorch_org_lines_accept_their_own_rocm_version_only(tmp_path: Path) -> None:
    for minor, entry in facts.compat().torch.items():
        for rocm in entry.pytorch.rocm:
            for cell in pytorch_cells(tmp_path, "ubuntu-24.04", rocm, f"{minor}.0", "runtime"):
                assert cell.hip_accept == (".".join(rocm.split(".")[:2]),)


@pytest.mark.parametrize("os_name", ["ubuntu-24.04", "ubuntu-22.04"])
def test_a_pytorch_org_devel_sdk_is_the_patch_release_its_wheels_were_built_on(tmp_path: Path, os_name: str) -> None:
    """rocm7.2 -> AMD's apt repository 7.2.1, rocm7.1 -> 7.1.1 (pytorch's manywheel build.sh); an index built on
    TheRock's wheels (rocm7.14) has no apt release: no SDK is promised there."""
    for minor, entry in facts.compat().torch.items():
        for rocm in entry.pytorch.rocm:
            [cell] = pytorch_cells(tmp_path, os_name, rocm, f"{minor}.0", "devel")
            if compat.violations(cell):
                continue  # a line this OS cannot run (ROCm 5.x on noble): no image to give an SDK
            want = entry.pytorch.sdk.get(rocm, rocm)
            steps = " ".join(installs.os_sdk_steps(cell))
            if want is None:
                assert not cell.has_rocm_sdk and steps == "", (minor, rocm)
            else:
                assert cell.has_rocm_sdk and f"https://repo.radeon.com/rocm/apt/{want} " in steps, (minor, rocm)
                if rocm in ("7.1", "7.2") and entry.pytorch.sdk:
                    assert want == f"{rocm}.1"


def test_line_verdicts_say_why_each_line_is_kept_or_dropped(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2, rocm7.1, rocm7.12, rocm10.0]\n"
                    "  torch: ['2.14.1', '2.13.0']\n  gfx: [all, gfx94X-dcgpu]\n  channel: [pytorch, therock]\n"
                    "exclude:\n  - {channel: pytorch, gfx: gfx94X-dcgpu}\n", encoding="utf-8")
    verdicts = {(v.channel, v.platform): v for v in line_verdicts(expand_matrix(file))}
    assert verdicts[("pytorch", "rocm7.2")].verdict == "kept: 2 cells, torch 2.14.1, 2.13.0"
    assert verdicts[("pytorch", "rocm7.1")].verdict == (
        "kept: 1 cells, torch 2.13.0; not torch 2.14.1: channel-wheels: torch 2.14 has no wheels for ROCm 7.1 on the "
        "pytorch.org index; it has 7.2, 7.14 [decided on pytorch.org rocm7.1, https://download.pytorch.org/whl/rocm7.1]")
    assert verdicts[("therock", "rocm10.0")].verdict == (
        "kept: 1 cells, torch 2.13.0; not torch 2.14.1: channel-wheels: TheRock 10.0 builds no torch 2.14; no TheRock "
        "line does [decided on TheRock 10.0, whl-next index https://stable.repo.amd.com/rocm/whl-next/]")
    old = verdicts[("therock", "rocm7.12")]
    assert old.cells == 0 and old.verdict.startswith("dropped: channel-wheels: TheRock 7.12 builds no torch 2.13; "
                                                     "TheRock lines that do: 10.0 (whl-next) [decided on TheRock 7.12, "
                                                     "per-family index https://repo.amd.com/rocm/whl/<family>/]")
    assert all(not r.startswith("exclude[") for r in verdicts[("pytorch", "rocm7.12")].why)


def test_therock_builds_no_python_its_torch_release_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """therock-7.13's release workflow builds Python 3.10-3.14 but excludes 3.14 for torch 2.8 (torch 2.8 has no 3.14):
    a line's Pythons are those of the line and of the torch release together."""
    oses = facts.os_releases()
    fake = {**oses, "ubuntu-24.04": oses["ubuntu-24.04"].model_copy(update={"python": "3.14"})}
    monkeypatch.setattr(facts, "os_releases", lambda: fake)
    [old] = therock_cell(tmp_path, "7.13", "2.8.0", "gfx94X-dcgpu")
    assert compat.python_wheels(old) == ("torch 2.8 has no wheels on TheRock 7.13's index for Python 3.14 "
                                         "(ubuntu-24.04's Python); it has 3.10, 3.11, 3.12, 3.13")
    [new] = therock_cell(tmp_path, "7.13", "2.9.1", "gfx94X-dcgpu")
    assert compat.python_wheels(new) is None


@pytest.mark.parametrize(("line", "torch", "pins"), [
    # TheRock builds ROCm's release/2.12 as 2.12.0 on 7.14 and 10.0 (TheRock#6223), with torchvision 0.27.0
    ("7.14", "2.12.0", ("torch==2.12.0+rocm7.14.0", "torchvision==0.27.0+rocm7.14.0", "torchaudio==2.11.0+rocm7.14.0")),
    ("10.0", "2.12.0", ("torch==2.12.0+rocm10.0.0", "torchvision==0.27.0+rocm10.0.0", "torchaudio==2.11.0+rocm10.0.0")),
    ("10.0", "2.13.0", ("torch==2.13.0+rocm10.0.0", "torchvision==0.28.0+rocm10.0.0",
                        "torchaudio==2.11.0.2+rocm10.0.0")),
    # torch 2.9.1 with torchvision 0.24.0 and torchaudio 2.9.0 (therock-7.12 build_portable_linux_pytorch_wheels.yml)
    ("7.12", "2.9.1", ("torch==2.9.1+rocm7.12.0", "torchvision==0.24.0+rocm7.12.0", "torchaudio==2.9.0+rocm7.12.0")),
])
def test_therock_pins_the_versions_its_line_publishes(tmp_path: Path, line: str, torch: str,
                                                      pins: tuple[str, str, str]) -> None:
    [cell] = therock_cell(tmp_path, line, torch, "gfx1151")
    assert compat.violations(cell) == []
    assert (f"torch=={cell.torch_wheel}", f"torchvision=={cell.torchvision}{cell.local_version}",
            f"torchaudio=={cell.torchaudio}{cell.local_version}") == pins


def test_explain_names_the_real_cause_for_the_lines_amds_workflows_shipped(tmp_path: Path) -> None:
    """The cases of rockrel's release branches, as `builder matrix --explain` prints them: a family no release of a
    line serves says so and names the lines that do; no hint names an unrelated family."""
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04, ubuntu-22.04]\n  platform: [rocm10.0, rocm7.12, rocm7.11]\n"
                    "  torch: ['2.13.0', '2.10.0', '2.9.1']\n  gfx: [gfx90c-igpu, gfx900-dgpu, gfx906-dgpu, gfx1153]\n"
                    "  channel: [therock]\n"
                    "include:\n  - {os: debian-12, platform: cpu, torch: '2.13.0', tag: anchor}\n", encoding="utf-8")
    run = builder_cli("matrix", "--matrix", str(file), "--explain")
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())  # rich wraps long reasons
    nothing = ("nothing: no TheRock line publishes it to a stable index (dev and nightly only) and no pytorch.org "
               "ROCm wheel carries it")
    assert ("not https://stable.repo.amd.com/rocm/whl-next/: no release of TheRock 10.0 serves gfx90c-igpu; it is "
            f"served by {nothing}") in text
    assert "no release of TheRock 10.0 serves gfx900-dgpu; it is served by pytorch.org rocm7.2" in text
    assert "another torch release" not in text and "gfx90X-dcgpu was split" not in text
    assert "TheRock 7.12 published per-family wheels (one index per family, no [device-*] extras) and none for " \
           "gfx906-dgpu: its families are gfx908-dcgpu" in text
    assert "torch 2.10 has no wheels on TheRock 7.12's index for Python 3.10 (ubuntu-22.04's Python)" in text
    assert "and none for gfx1153: its families are gfx90X-dcgpu, gfx94X-dcgpu, gfx950-dcgpu, gfx110X-all, gfx1150, " \
           "gfx1151, gfx1152, gfx120X-all; gfx1153 is served by TheRock 7.12, 7.13, 7.14, 10.0" in text
    assert "TheRock 7.12 builds torch 2.9 without gfx1153 (its release build matrix excludes it): no device package " \
           "for gfx1153; use torch 2.10 of that line" in text
    kept = {line.split()[1] for line in run.stdout.splitlines() if line.startswith("│") and "gfx1153_" in line}
    assert kept == {"rocm10.0_ubuntu24.04_py3.12_torch2.13.0_gfx1153_therock_runtime",
                    "rocm10.0_ubuntu22.04_py3.10_torch2.13.0_gfx1153_therock_runtime",
                    "rocm7.12_ubuntu24.04_py3.12_torch2.10.0_gfx1153_therock_runtime"}


def test_a_matrix_with_the_current_line_hears_of_every_family_it_has_no_slim_image_of(tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm10.0, rocm7.2]\n  torch: ['2.13.0']\n"
                    "  gfx: [all, gfx94X-dcgpu]\n  channel: [therock, pytorch]\n", encoding="utf-8")
    line, gaps = family_gaps(expand_matrix(file))
    stable = {f for f, fam in facts.gfx_families().items()
              if not set(fam.targets) & set(facts.compat().therock_dev_only_targets)}
    assert line == "10.0" and set(gaps) == stable - {"gfx94X-dcgpu"}
    # one rule for every family: gfx125X-dcgpu (no test runner in TheRock's CI) is told the same as gfx103X-all
    assert gaps["gfx103X-all"] == gaps["gfx125X-dcgpu"] == gaps["gfx1152"] == (
        "not in this matrix: add it to matrix.gfx for the therock channel")
    assert not {"gfx900-dgpu", "gfx906-dgpu", "gfx90c-igpu", "gfx90X-dcgpu"} & set(gaps)  # dev and nightly only
    pytorch_only = tmp_path / "p.yaml"
    pytorch_only.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2]\n  torch: ['2.13.0']\n  gfx: [all]\n",
                            encoding="utf-8")
    assert family_gap_lines(expand_matrix(pytorch_only)) == []
