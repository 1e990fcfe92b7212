"""builder.core.spec: CellSpec's gfx targets, content cell and the expectations an image is validated against."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core import drivers, facts
from builder.core.facts import ALL_TARGETS
from builder.core.spec import CellSpec
from builder.matrix.expand import load_matrix
from testkit.matrices import expand_text, inc, load_cells
from tests.fakes.checkout import ROOT

# --- gfx targets of an all-targets cell --------------------------------------------------------------------

def test_all_targets_cell_carries_every_target_of_its_wheels(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2, rocm6.4]
          torch: ["2.13.0", "2.9.1"]
          gfx: [all]
        """)
    assert [(c.platform, c.torch, c.tag) for c in cells] == [
        ("rocm7.2", "2.13.0", "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime"),
        ("rocm6.4", "2.9.1", "rocm6.4_ubuntu24.04_py3.12_torch2.9.1_all_runtime"),
    ]
    new, old = cells
    assert new.gfx == old.gfx == ALL_TARGETS
    assert new.gfx_targets == facts.compat().torch["2.13"].pytorch.gfx
    assert old.gfx_targets == facts.compat().torch["2.9"].pytorch.gfx
    assert {"gfx950", "gfx1151"} <= set(new.gfx_targets) and "gfx950" not in old.gfx_targets
    assert new.expectations()["gfx_family"] == "all"
    assert new.expectations()["gfx_targets"] == list(new.gfx_targets)


# --- content cells: pytorch.org wheels carry every target, so one image serves every family -----------------

# pytorch.org's ROCm line 7.2 and TheRock's 7.14 (which builds torch 2.12, not 2.13).
CONTENT = """\
matrix:
  os: [ubuntu-24.04]
  platform: [cpu, rocm7.2, rocm7.14]
  torch: ["2.12.0"]
  gfx: [all, gfx94X-dcgpu, gfx1151]
  channel: [pytorch, therock, local]
"""


def test_content_cell_of_a_pytorch_family_cell_is_the_all_targets_cell(tmp_path: Path) -> None:
    expansion = expand_text(tmp_path, CONTENT)
    by_key = {(c.platform, c.gfx, c.channel): c for c in expansion.cells}
    every = by_key["rocm7.2", "all", "pytorch"]
    assert every.tag == "rocm7.2_ubuntu24.04_py3.12_torch2.12.0_all_runtime"
    for family in ("gfx94X-dcgpu", "gfx1151"):
        cell = by_key["rocm7.2", family, "pytorch"]
        content = cell.content_cell()
        assert (content.gfx, content.tag, content.line) == (ALL_TARGETS, every.tag, None)
        assert content.model_dump(exclude={"line"}) == every.model_dump(exclude={"line"})
        assert content.gfx_targets == every.gfx_targets and set(cell.gfx_targets) <= set(content.gfx_targets)
        assert cell.tag != content.tag  # the family's tag becomes one more tag of the all-targets image


def test_content_cell_is_the_cell_itself_off_the_pytorch_channel_and_for_all_or_cpu(tmp_path: Path) -> None:
    expansion = expand_text(tmp_path, CONTENT)
    own = [c for c in expansion.cells if c.channel != "pytorch" or c.gfx in (None, ALL_TARGETS)]
    assert {(c.platform, c.gfx, c.channel) for c in own} == {
        ("cpu", None, "pytorch"), ("cpu", None, "local"),
        ("rocm7.2", "all", "pytorch"), ("rocm7.2", "all", "local"),
        ("rocm7.14", "gfx94X-dcgpu", "therock"), ("rocm7.14", "gfx1151", "therock"),
        ("rocm7.2", "gfx94X-dcgpu", "local"), ("rocm7.2", "gfx1151", "local"),
        ("rocm7.14", "all", "local"), ("rocm7.14", "gfx94X-dcgpu", "local"), ("rocm7.14", "gfx1151", "local"),
    }
    for cell in own:
        assert cell.content_cell() is cell
    therock = next(c for c in own if c.channel == "therock")
    assert therock.content_cell().tag == "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_therock_runtime"
    # therock: no cpu, no all-targets image, and none on pytorch.org's 7.2; pytorch.org: none on TheRock's 7.14
    assert [(d.cell.platform, d.cell.gfx, d.cell.channel, d.rule) for d in expansion.dropped] == [
        ("cpu", None, "therock", "channel-wheels"),
        ("rocm7.2", "all", "therock", "channel-wheels"), ("rocm7.2", "all", "therock", "gfx-channel"),
        ("rocm7.2", "gfx94X-dcgpu", "therock", "channel-wheels"), ("rocm7.2", "gfx1151", "therock", "channel-wheels"),
        ("rocm7.14", "all", "pytorch", "channel-wheels"), ("rocm7.14", "gfx94X-dcgpu", "pytorch", "channel-wheels"),
        ("rocm7.14", "gfx1151", "pytorch", "channel-wheels"), ("rocm7.14", "all", "therock", "gfx-channel")]


def test_content_cell_keeps_an_explicit_tag(tmp_path: Path) -> None:
    _, cell = load_cells(tmp_path, inc("os: ubuntu-24.04, platform: rocm7.2, torch: '2.13.0', gfx: gfx94X-dcgpu, "
                                 "tag: mi300"))
    content = cell.content_cell()
    assert (content.gfx, content.tag, content.explicit_tag) == (ALL_TARGETS, "mi300", True)


# --- CellSpec.expectations -------------------------------------------------------------------------------

def spec(**overrides: object) -> CellSpec:
    fields: dict[str, object] = {"image": "pytorch", "os": "debian-12", "platform": "cpu", "torch": "2.13.0",
                                 "flavor": "runtime", "index_url": "https://x/", "tag": "t",
                                 "source_url": "https://x/"}
    return CellSpec.model_validate(fields | overrides)


@pytest.mark.parametrize(("platform", "gfx", "rocm", "hip"), [
    ("cpu", None, None, None),
    ("rocm7.2", "gfx94X-dcgpu", "7.2", "7.2"),
    ("rocm6.2.4", "gfx90X-dcgpu", "6.2.4", "6.2"),
    ("rocm10.12.3", "gfx1151", "10.12.3", "10.12"),
])
def test_expectations_hip_and_gfx(platform: str, gfx: str | None, rocm: str | None, hip: str | None) -> None:
    cell = spec(platform=platform, gfx=gfx)
    expected_targets = list(facts.gfx_families()[gfx].targets) if gfx else []
    assert cell.rocm == rocm
    got = cell.expectations()
    assert (got["hip"], got["gfx_family"], got["gfx_targets"]) == (hip, gfx, expected_targets)


def test_expectations_full_record_and_torch_override() -> None:
    cell = spec(os="ubuntu-22.04", platform="rocm6.2.4", gfx="gfx90X-dcgpu", torch="2.5.1",
                torchvision="0.20.1", flavor="devel", user="ml", expect_torch="2.4.0")
    assert cell.expectations() == {
        "tag": "t", "platform": "rocm6.2.4", "channel": "pytorch", "os": "ubuntu-22.04", "flavor": "devel",
        "python": "3.10",
        "user": "ml", "torch": "2.4.0", "torchvision": "0.20.1", "torchaudio": None, "hip": "6.2",
        "hip_accept": ["6.2"],
        # a devel image on Ubuntu: the ROCm SDK of its release from AMD's apt repository
        "gfx_family": "gfx90X-dcgpu", "gfx_targets": ["gfx906", "gfx908", "gfx90a"], "rocm_sdk": True,
        "torch_wheel": "2.5.1+rocm6.2.4",  # the wheel installed: pytorch.org's index name as its local version
        # AMD's driver releases for ROCm 6.2 (builder/data/drivers.yaml): tests/core/test_drivers.py
        "amdgpu_driver": drivers.driver_range("6.2.4"),
    }
    assert cell.expectations()["amdgpu_driver"]["range"] == "6.0.x-30.10.x"
    assert spec(platform="cpu", gfx=None).expectations()["amdgpu_driver"] is None
    assert spec().expectations()["torch"] == "2.13.0"


def test_expectations_of_a_therock_and_an_all_targets_cell() -> None:
    therock = spec(os="ubuntu-24.04", platform="rocm7.14", gfx="gfx110X-all", channel="therock", torch="2.12.0")
    got = therock.expectations()
    assert (got["channel"], got["hip"], got["gfx_family"], got["gfx_targets"]) == (
        "therock", "7.14", "gfx110X-all", ["gfx1100", "gfx1101", "gfx1102", "gfx1103"])
    assert got["torch_wheel"] == "2.12.0+rocm7.14.0" and got["torch"] == "2.12.0"
    # ROCm 10.0 ships HIP 7.15: the smoke test holds torch.version.hip to the release's own HIP
    ten = spec(os="ubuntu-24.04", platform="rocm10.0", gfx="gfx110X-all", channel="therock", torch="2.12.0")
    assert (ten.expectations()["hip"], ten.torch_wheel) == ("7.15", "2.12.0+rocm10.0.0")
    every = spec(os="ubuntu-24.04", platform="rocm7.2", gfx=ALL_TARGETS).expectations()
    assert (every["channel"], every["gfx_family"]) == ("pytorch", "all")
    assert every["gfx_targets"] == list(facts.compat().torch["2.13"].pytorch.gfx)
    assert spec(gfx=ALL_TARGETS, torch="1.13.1").gfx_targets == ()  # no data: no promise


def test_expect_torch_flows_from_include(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.12.0', expect: {torch: '2.11.0'}"))
    assert [c.expectations()["torch"] for c in cells] == ["2.13.0", "2.11.0"]


# --- the production matrix: one tag is one wheel ----------------------------------------------------------

def test_no_two_production_images_install_one_torch_wheel_under_different_rocm_labels() -> None:
    """An index serves several local versions of one torch side by side (TheRock's: +rocm7.14.0 and +rocm10.0.0),
    so an image pins the one its ROCm label names: the same wheel from the same index for the same Python never
    stands behind two labels, and a TheRock cell's wheel carries its release's full version."""
    cells = load_matrix(ROOT / "matrix.yaml")
    labels: dict[tuple[str, str, str], set[str | None]] = {}
    for cell in cells:
        labels.setdefault((cell.index_url, cell.python, cell.torch_wheel), set()).add(cell.rocm)
    assert {key: rocm for key, rocm in labels.items() if len(rocm) != 1} == {}
    therock = [c for c in cells if c.channel == "therock"]
    assert therock  # the production matrix builds TheRock's per-family images
    releases = facts.compat().therock
    for cell in therock:
        assert cell.rocm in releases, cell.tag
        assert cell.torch_wheel.endswith("+rocm" + releases[cell.rocm].version), cell.tag
        assert cell.torch_wheel.startswith(cell.torch + "+"), cell.tag
    for cell in cells:  # pytorch.org's wheels carry the index's own name (rocm7.2); cpu wheels are pinned as given
        if cell.channel == "pytorch":
            assert cell.torch_wheel == (f"{cell.torch}+rocm{cell.rocm}" if cell.rocm else cell.torch), cell.tag
