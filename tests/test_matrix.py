"""Stage 1 pure logic: matrix file -> CellSpecs, and the InputErrors that name file, line and key."""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import pytest

from builder import catalog, schema
from builder.errors import InputError, Problem
from builder.matrix import Expansion, expand_matrix, load_matrix
from builder.spec import ALL_TARGETS, CellSpec, readable_tag
from builder.yamlsrc import LocatedYaml, dotted, load_located

# Lines 1-4; error cases append from line 5 on.
BASE = """\
matrix:
  os: [debian-12]
  platform: [cpu]
  torch: ["2.13.0"]
"""
KNOWN_OS = "known: debian-12, debian-13, rocky-9, ubuntu-22.04, ubuntu-24.04"
KNOWN_GFX = ("known: all, gfx101X-dgpu, gfx103X-all, gfx110X-all, gfx1150, gfx1151, gfx1152, gfx1153, "
             "gfx120X-all, gfx90X-dcgpu, gfx94X-dcgpu, gfx950-dcgpu")
CPU_TAG = "cpu_debian12_py3.11_torch2.13.0_runtime"


def write(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "matrix.yaml"
    file.write_text(textwrap.dedent(text), encoding="utf-8")
    return file


def load(tmp_path: Path, text: str) -> list[CellSpec]:
    return load_matrix(write(tmp_path, text))


def expand(tmp_path: Path, text: str) -> Expansion:
    return expand_matrix(write(tmp_path, text))


def problems_of(file: Path) -> list[Problem]:
    with pytest.raises(InputError) as info:
        load_matrix(file)
    assert str(info.value) == "\n".join(str(p) for p in info.value.problems)
    return info.value.problems


def axes(cell: CellSpec) -> tuple[str, str, str, str | None, str]:
    return cell.os, cell.platform, cell.torch, cell.gfx, cell.flavor


def rules_of(expansion: Expansion) -> list[tuple[str, str]]:
    """(tag, rule) of every dropped cell, in order."""
    return [(d.cell.tag, d.rule) for d in expansion.dropped]


# --- expansion -------------------------------------------------------------------------------------------

# Every cell of this product can work: torch 2.13 and 2.12 have pytorch.org wheels for ROCm 7.2 carrying gfx942
# and gfx950, for Python 3.11 (debian-12) and 3.12 (ubuntu-24.04).
PRODUCT = """\
matrix:
  os: [debian-12, ubuntu-24.04]
  platform: [cpu, rocm7.2]
  torch: ["2.13.0", "2.12.1"]
  gfx: [gfx94X-dcgpu, gfx950-dcgpu]
  flavor: [runtime, devel]
"""


def test_product_multiplies_gfx_on_rocm_platforms_only(tmp_path: Path) -> None:
    expansion = expand(tmp_path, PRODUCT)
    cells = expansion.cells
    product = itertools.product(["debian-12", "ubuntu-24.04"], ["cpu", "rocm7.2"], ["2.13.0", "2.12.1"],
                                ["runtime", "devel"])
    expected = [(os_name, platform, torch, gfx, flavor) for os_name, platform, torch, flavor in product
                for gfx in ([None] if platform == "cpu" else ["gfx94X-dcgpu", "gfx950-dcgpu"])]
    assert [axes(c) for c in cells] == expected
    assert len(cells) == 8 + 16
    assert expansion.dropped == [] and expansion.overridden == []
    assert all(c.channel == "pytorch" for c in cells)
    assert all(c.gfx is None and c.gfx_targets == () for c in cells if c.platform == "cpu")
    assert len({c.tag for c in cells}) == len(cells)
    assert "rocm7.2_ubuntu24.04_py3.12_torch2.12.1_gfx94X-dcgpu_devel" in {c.tag for c in cells}
    assert "cpu_debian12_py3.11_torch2.13.0_runtime" in {c.tag for c in cells}


def test_product_cells_that_break_a_rule_are_dropped_with_the_reason(tmp_path: Path) -> None:
    # pytorch.org has torch 2.9 wheels for ROCm 6.3/6.4 only, and none of them carries gfx950.
    expansion = expand(tmp_path, PRODUCT.replace('"2.12.1"', '"2.9.1"'))
    kept = [axes(c) for c in expansion.cells]
    assert len(kept) == 8 + 8
    assert not any(t == "2.9.1" and p == "rocm7.2" for _, p, t, _, _ in kept)
    assert ("debian-12", "cpu", "2.9.1", None, "runtime") in kept
    dropped_cells = {d.cell.tag: d.cell for d in expansion.dropped}
    assert len(dropped_cells) == 8
    assert all((c.platform, c.torch) == ("rocm7.2", "2.9.1") for c in dropped_cells.values())
    wheels = "torch 2.9 has no wheels for ROCm 7.2 on the pytorch.org index; it has 6.3, 6.4"
    gfx950 = ("gfx950 of gfx950-dcgpu is not compiled into torch 2.9's pytorch.org wheels "
              "(hipErrorNoBinaryForGpu): use the therock channel for this family")
    for tag, cell in dropped_cells.items():
        reasons = [(d.rule, d.reason) for d in expansion.dropped if d.cell.tag == tag]
        expected = [("channel-wheels", wheels)] + ([("gfx-in-wheels", gfx950)] if cell.gfx == "gfx950-dcgpu" else [])
        assert reasons == expected, tag
        assert cell.line == 1  # product cells point at the matrix key
    assert "rocm7.2_ubuntu24.04_py3.12_torch2.9.1_gfx94X-dcgpu_devel" in dropped_cells


def test_channel_axis_multiplies_cells_and_picks_the_index(tmp_path: Path) -> None:
    expansion = expand(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [cpu, rocm7.2]
          torch: ["2.13.0"]
          gfx: [all, gfx110X-all]
          channel: [pytorch, therock]
        """)
    assert [(c.platform, c.gfx, c.channel, c.index_url) for c in expansion.cells] == [
        ("cpu", None, "pytorch", "https://download.pytorch.org/whl/cpu"),
        ("rocm7.2", "all", "pytorch", "https://download.pytorch.org/whl/rocm7.2"),
        ("rocm7.2", "gfx110X-all", "therock", "https://repo.amd.com/rocm/whl-multi-arch/"),
    ]
    assert [(d.cell.platform, d.cell.gfx, d.cell.channel, d.rule) for d in expansion.dropped] == [
        ("cpu", None, "therock", "channel-wheels"),
        ("rocm7.2", "gfx110X-all", "pytorch", "gfx-in-wheels"),
        ("rocm7.2", "all", "therock", "gfx-channel"),
    ]
    assert [c.expectations()["channel"] for c in expansion.cells] == ["pytorch", "pytorch", "therock"]


def test_channel_defaults_to_pytorch_and_include_takes_a_channel(tmp_path: Path) -> None:
    cells = load(tmp_path, BASE + textwrap.dedent("""\
        include:
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.9.1", gfx: gfx94X-dcgpu, channel: therock}
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.13.0", gfx: all}
        """))
    assert [(c.channel, c.index_url) for c in cells] == [
        ("pytorch", "https://download.pytorch.org/whl/cpu"),
        ("therock", "https://repo.amd.com/rocm/whl-multi-arch/"),
        ("pytorch", "https://download.pytorch.org/whl/rocm7.2"),
    ]


def test_both_channels_for_one_family_get_distinct_tags(tmp_path: Path) -> None:
    cells = load(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2]
          torch: ["2.13.0"]
          gfx: [gfx94X-dcgpu]
          channel: [pytorch, therock]
        """)
    assert [(c.channel, c.tag) for c in cells] == [
        ("pytorch", "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_runtime"),
        ("therock", "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_therock_runtime"),
    ]


def test_all_targets_cell_carries_every_target_of_its_wheels(tmp_path: Path) -> None:
    cells = load(tmp_path, """\
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
    assert new.gfx_targets == catalog.compat().torch["2.13"].pytorch.gfx
    assert old.gfx_targets == catalog.compat().torch["2.9"].pytorch.gfx
    assert {"gfx950", "gfx1151"} <= set(new.gfx_targets) and "gfx950" not in old.gfx_targets
    assert new.expectations()["gfx_family"] == "all"
    assert new.expectations()["gfx_targets"] == list(new.gfx_targets)


def test_defaults_of_a_minimal_matrix(tmp_path: Path) -> None:
    [cell] = load(tmp_path, "# comment\n" + BASE)
    assert cell.model_dump() == {
        "image": "pytorch", "os": "debian-12", "platform": "cpu", "torch": "2.13.0", "torchvision": "0.28.0",
        "torchaudio": "2.11.0", "gfx": None, "flavor": "runtime", "channel": "pytorch", "user": "root",
        "index_url": "https://download.pytorch.org/whl/cpu", "tag": CPU_TAG, "explicit_tag": False,
        "expect_torch": None, "source_url": "https://github.com/rocm-image-factory/rocm-image-factory", "line": 2,
    }


@pytest.mark.parametrize(("platform", "os_name", "python", "torch", "gfx", "flavor", "channel", "tag"), [
    ("cpu", "debian-12", "3.11", "2.13.0", None, "runtime", "pytorch", "cpu_debian12_py3.11_torch2.13.0_runtime"),
    ("cpu", "debian-13", "3.13", "2.10", None, "devel", "pytorch", "cpu_debian13_py3.13_torch2.10_devel"),
    # AMD's rocm7.2_ubuntu24.04_py3.12_pytorch_release_2.9.1: torch 2.9.1 on ROCm 7.2 comes from AMD's index.
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.9.1", "gfx94X-dcgpu", "devel", "therock",
     "rocm7.2_ubuntu24.04_py3.12_torch2.9.1_gfx94X-dcgpu_therock_devel"),
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.13.0", "gfx94X-dcgpu", "runtime", "pytorch",
     "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_runtime"),
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.13.0", "gfx94X-dcgpu", "runtime", "local",
     "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_local_runtime"),
    ("rocm6.2.4", "ubuntu-22.04", "3.10", "2.6.0", "gfx90X-dcgpu", "runtime", "pytorch",
     "rocm6.2.4_ubuntu22.04_py3.10_torch2.6.0_gfx90X-dcgpu_runtime"),
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.13.0", "all", "runtime", "pytorch",
     "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime"),
])
def test_tags_are_readable(tmp_path: Path, platform: str, os_name: str, python: str, torch: str,
                           gfx: str | None, flavor: str, channel: str, tag: str) -> None:
    assert readable_tag(platform, os_name, python, torch, gfx, flavor, channel) == tag
    gfx_axis = f"[{gfx}]" if gfx else "[]"
    expansion = expand(tmp_path, f"""\
        matrix:
          os: [{os_name}]
          platform: [{platform}]
          torch: ["{torch}"]
          gfx: {gfx_axis}
          flavor: [{flavor}]
          channel: [{channel}]
        """)
    [cell] = expansion.cells
    assert expansion.dropped == []
    assert cell.tag == tag and cell.python == python and cell.channel == channel


def test_index_url_defaults_per_platform_and_index_urls_override(tmp_path: Path) -> None:
    cells = load(tmp_path, """\
        index_urls:
          rocm7.2: https://mirror.example.org:8443/whl/rocm7.2
          cpu: http://10.0.0.1/simple
        matrix:
          os: [debian-12]
          platform: [cpu, rocm7.2, rocm7.1]
          torch: ["2.13.0"]
          gfx: [gfx1151]
        include:
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.12.1", gfx: gfx1151}
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.12.1", gfx: gfx110X-all, channel: therock}
        """)
    assert {c.tag: c.index_url for c in cells} == {
        "cpu_debian12_py3.11_torch2.13.0_runtime": "http://10.0.0.1/simple",
        "rocm7.2_debian12_py3.11_torch2.13.0_gfx1151_runtime": "https://mirror.example.org:8443/whl/rocm7.2",
        "rocm7.1_debian12_py3.11_torch2.13.0_gfx1151_runtime": "https://download.pytorch.org/whl/rocm7.1",
        "rocm7.2_ubuntu24.04_py3.12_torch2.12.1_gfx1151_runtime": "https://mirror.example.org:8443/whl/rocm7.2",
        # a platform's override is for the pytorch channel only: therock keeps TheRock's index
        "rocm7.2_ubuntu24.04_py3.12_torch2.12.1_gfx110X-all_therock_runtime":
            "https://repo.amd.com/rocm/whl-multi-arch/",
    }


def test_index_urls_therock_overrides_the_therock_index_only(tmp_path: Path) -> None:
    cells = load(tmp_path, """\
        index_urls:
          therock: https://mirror.example.org/therock/
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2]
          torch: ["2.13.0"]
          gfx: [all, gfx94X-dcgpu]
        include:
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.13.0", gfx: gfx120X-all, channel: therock}
        """)
    assert [(c.gfx, c.channel, c.index_url) for c in cells] == [
        ("all", "pytorch", "https://download.pytorch.org/whl/rocm7.2"),
        ("gfx94X-dcgpu", "pytorch", "https://download.pytorch.org/whl/rocm7.2"),
        ("gfx120X-all", "therock", "https://mirror.example.org/therock/"),
    ]


def test_torch_companions_explicit_default_or_null(tmp_path: Path) -> None:
    """Omitted companions get the paired release (compat.yaml); an explicit null means not installed."""
    cells = load(tmp_path, """\
        matrix:
          os: [debian-12]
          platform: [cpu]
          torch:
            - version: "2.9.1"
              torchvision: "0.24.0"
              torchaudio: "2.9.0"
            - {version: "2.8.0", torchvision: "0.23.0"}
            - "2.13.0"
            - {version: "2.12.1"}
            - {version: "2.11.0", torchaudio: null}
            - {version: "2.10.0", torchvision: null, torchaudio: null}
            - {version: "2.7.1", torchvision: ~}
        """)
    assert [(c.torch, c.torchvision, c.torchaudio) for c in cells] == [
        ("2.9.1", "0.24.0", "2.9.0"),  # explicit versions are kept, even an older patch of the pair
        ("2.8.0", "0.23.0", "2.8.0"),
        ("2.13.0", "0.28.0", "2.11.0"),  # torchaudio stays at 2.11 from torch 2.12 on
        ("2.12.1", "0.27.1", "2.11.0"),
        ("2.11.0", "0.26.0", None),
        ("2.10.0", None, None),
        ("2.7.1", None, "2.7.1"),
    ]
    expectations = [(e["torchvision"], e["torchaudio"]) for e in (c.expectations() for c in cells)]
    assert expectations == [(c.torchvision, c.torchaudio) for c in cells]


def test_unquoted_versions_stay_strings(tmp_path: Path) -> None:
    cells = load(tmp_path, """\
        matrix:
          os: [debian-12]
          platform: [cpu]
          torch: [2.10, 2.9]
        include:
          - {os: debian-12, platform: cpu, torch: {version: 2.5, torchvision: 0.20}}
        exclude:
          - {torch: 2.9}
        """)
    # The companions rule would reject a torchvision read as the float 0.2 (it pairs 2.5 with 0.20).
    assert [(c.torch, c.torchvision, c.torchaudio) for c in cells] == [
        ("2.10", "0.25.0", "2.10.0"), ("2.5", "0.20", "2.5.0")]
    assert cells[0].tag == "cpu_debian12_py3.11_torch2.10_runtime"


def test_include_adds_complete_cells_after_the_product(tmp_path: Path) -> None:
    cells = load(tmp_path, BASE + textwrap.dedent("""\
        user: ml
        include:
          - os: ubuntu-24.04
            platform: rocm6.2.4
            torch: {version: "2.6.0", torchvision: "0.21.0", torchaudio: "2.6.0"}
            gfx: gfx90X-dcgpu
            flavor: devel
            user: builder_1
            tag: wrong-torch
            expect: {torch: "2.4.0"}
          - {os: debian-13, platform: cpu, torch: "2.12.0"}
        """))
    product, custom, plain = cells
    assert axes(product) == ("debian-12", "cpu", "2.13.0", None, "runtime") and product.user == "ml"
    assert axes(custom) == ("ubuntu-24.04", "rocm6.2.4", "2.6.0", "gfx90X-dcgpu", "devel")
    assert (custom.tag, custom.explicit_tag, custom.user, custom.expect_torch) == (
        "wrong-torch", True, "builder_1", "2.4.0")
    assert custom.line == 7 and custom.channel == "pytorch"
    assert (custom.torchvision, custom.torchaudio) == ("0.21.0", "2.6.0")
    assert custom.index_url == "https://download.pytorch.org/whl/rocm6.2.4"
    assert (plain.tag, plain.explicit_tag, plain.user, plain.flavor, plain.line) == (
        "cpu_debian13_py3.13_torch2.12.0_runtime", False, "ml", "runtime", 15)


# 12 cells, all of which can work (so only the excludes remove any).
EXCLUDABLE = """\
matrix:
  os: [debian-12, ubuntu-24.04]
  platform: [cpu, rocm7.2]
  torch: ["2.13.0", "2.12.1"]
  gfx: [gfx94X-dcgpu, gfx950-dcgpu]
"""


@pytest.mark.parametrize(("exclude", "removed"), [
    ({"platform": "cpu"}, 4),
    ({"os": "debian-12", "platform": "rocm7.2"}, 4),
    ({"gfx": "gfx950-dcgpu"}, 4),
    ({"torch": "2.12.1", "os": "ubuntu-24.04", "gfx": "gfx94X-dcgpu"}, 1),
    ({"flavor": "runtime", "os": "debian-12"}, 6),
    ({"os": "ubuntu-24.04", "platform": "cpu", "torch": "2.13.0", "flavor": "runtime"}, 1),
    ({"channel": "pytorch", "platform": "cpu"}, 4),
    # a list matches any of its values
    ({"gfx": ["gfx950-dcgpu", "gfx94X-dcgpu"]}, 8),
    ({"torch": ["2.12.1", "2.13.0"], "os": "debian-12"}, 6),
    ({"os": ["debian-12"], "platform": ["cpu", "rocm7.2"], "torch": "2.13.0"}, 3),
    ({"platform": ["rocm7.2"], "gfx": ["gfx950-dcgpu"], "channel": ["therock", "pytorch"]}, 4),
])
def test_exclude_removes_every_cell_matching_its_keys(tmp_path: Path, exclude: dict[str, str | list[str]],
                                                      removed: int) -> None:
    full = load(tmp_path, EXCLUDABLE)
    assert len(full) == 12
    flow = ", ".join(f"{k}: {json.dumps(v)}" for k, v in exclude.items())
    expansion = expand(tmp_path, EXCLUDABLE + f"exclude:\n  - {{{flow}}}\n")
    wanted = {k: v if isinstance(v, list) else [v] for k, v in exclude.items()}
    gone = [c for c in full if all(getattr(c, k) in v for k, v in wanted.items())]
    assert [c.tag for c in expansion.cells] == [c.tag for c in full if c not in gone]
    assert len(gone) == removed
    # excluded cells are listed as dropped by the exclude that matched them, not by a compatibility rule
    assert [(d.cell, d.rule, d.reason) for d in expansion.dropped] == [
        (c, "exclude[0]", "excluded by the matrix (line 7)") for c in gone]


def test_exclude_torch_matches_the_release_however_it_is_spelled(tmp_path: Path) -> None:
    cells = load(tmp_path, """\
        matrix:
          os: [debian-12]
          platform: [cpu]
          torch: ["2.10", "2.12.1"]
        exclude:
          - {torch: ["2.10.0", "2.9"]}
        """)
    assert [c.torch for c in cells] == ["2.12.1"]


def test_a_cell_matched_by_two_excludes_is_dropped_once_by_the_first(tmp_path: Path) -> None:
    expansion = expand(tmp_path, EXCLUDABLE + textwrap.dedent("""\
        exclude:
          - {platform: cpu, os: [ubuntu-24.04]}
          - {platform: [cpu], torch: "2.13.0"}
        """))
    assert [(d.cell.os, d.cell.torch, d.rule) for d in expansion.dropped] == [
        ("debian-12", "2.13.0", "exclude[1]"),
        ("ubuntu-24.04", "2.13.0", "exclude[0]"),
        ("ubuntu-24.04", "2.12.1", "exclude[0]"),
    ]
    assert len(expansion.cells) == 12 - 3


def test_excluded_cell_can_come_back_through_include(tmp_path: Path) -> None:
    cells = load(tmp_path, BASE + "exclude: [{os: debian-12}]\n"
                           "include: [{os: debian-12, platform: cpu, torch: '2.13.0'}]\n")
    assert [(c.tag, c.line) for c in cells] == [(CPU_TAG, 6)]


# --- errors: file, line, dotted key and message ----------------------------------------------------------

def inc(body: str) -> str:
    """BASE plus one include entry on line 6."""
    return BASE + "include:\n  - {" + body + "}\n"


ERRORS: list[tuple[str, str, list[tuple[int | None, str, str]]]] = [
    ("top-level-unknown-key", BASE + "bogus: 1\n", [(5, "bogus", "unknown key")]),
    ("matrix-unknown-key", BASE + "  flavour: [runtime]\n", [(5, "matrix.flavour", "unknown key")]),
    ("include-unknown-key", BASE + "include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.1'\n"
     "    flavour: devel\n", [(9, "include[0].flavour", "unknown key")]),
    ("torch-mapping-unknown-key", inc("os: debian-12, platform: cpu, torch: {version: '2.1', vision: '0.1'}"),
     [(6, "include[0].torch.vision", "unknown key")]),
    ("exclude-unknown-key", BASE + "exclude:\n  - {os: debian-12, user: root}\n",
     [(6, "exclude[0].user", "unknown key")]),
    ("os-not-a-list", "matrix:\n  os: debian-12\n  platform: [cpu]\n  torch: ['2.13.0']\n",
     [(2, "matrix.os", "Input should be a valid list")]),
    ("matrix-not-a-mapping", "matrix: [debian-12]\n", [(1, "matrix", "valid dictionary")]),
    ("include-not-a-list", BASE + "include: {os: debian-12}\n", [(5, "include", "valid list")]),
    ("torch-item-a-list", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch:\n    - [2.1]\n",
     [(5, "matrix.torch[0]", "valid dictionary")]),
    ("empty-axis", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: []\n",
     [(4, "matrix.torch", "at least 1 item")]),
    ("missing-axis", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n",
     [(1, "matrix.torch", "Field required")]),
    ("missing-matrix", "# nothing but\nimage: pytorch\n", [(2, "matrix", "Field required")]),
    ("empty-file", "", [(None, "matrix", "Field required")]),
    ("version-x", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: ['2.x']\n",
     [(4, "matrix.torch[0].version", "'2.x' is not allowed here")]),
    ("version-injection", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch:\n"
     "    - version: 2.13.0; rm -rf /\n      torchvision: 0.28.0 && id\n",
     [(5, "matrix.torch[0].version", "'2.13.0; rm -rf /' is not allowed here"),
      (6, "matrix.torch[0].torchvision", "'0.28.0 && id' is not allowed here")]),
    ("expect-version", BASE + "include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.1'\n"
     "    expect: {torch: latest}\n", [(9, "include[0].expect.torch", "'latest' is not allowed here")]),
    ("exclude-version", BASE + "exclude: [{torch: '2.13.0`id`'}]\n",
     [(5, "exclude[0].torch", "'2.13.0`id`' is not allowed here")]),
    ("exclude-version-in-list", BASE + "exclude:\n  - torch:\n      - '2.13.0'\n      - '2.13.0`id`'\n",
     [(8, "exclude[0].torch[1]", "'2.13.0`id`' is not allowed here")]),
    ("exclude-channel", BASE + "exclude: [{channel: [pytorch, rocm]}]\n",
     [(5, "exclude[0].channel[1]", "Input should be 'pytorch', 'therock' or 'local'")]),
    ("channel-literal", BASE + "  channel: [pytorch, nightly]\n",
     [(5, "matrix.channel[1]", "Input should be 'pytorch', 'therock' or 'local'")]),
    ("include-channel-literal", inc("os: debian-12, platform: cpu, torch: '2.13.0', channel: amd"),
     [(6, "include[0].channel", "Input should be 'pytorch', 'therock' or 'local'")]),
    ("duplicate-channel", BASE + "  channel: [therock, pytorch, therock]\n",
     [(5, "matrix.channel[2]", "duplicate value 'therock'")]),
    ("index-urls-unknown-channel", BASE + "index_urls:\n  pytorch: https://x/y\n",
     [(6, "index_urls.pytorch", "'pytorch' is not allowed here")]),
    ("override-without-reason", inc("os: debian-12, platform: cpu, torch: '1.13', override: {}"),
     [(6, "include[0].override.reason", "Field required")]),
    ("override-reason-too-short", inc("os: debian-12, platform: cpu, torch: '1.13', override: {reason: why}"),
     [(6, "include[0].override.reason", "at least 10 characters")]),
    ("override-unknown-key", inc("os: debian-12, platform: cpu, torch: '1.13', override: {rule: known-torch}"),
     [(6, "include[0].override.reason", "Field required"), (6, "include[0].override.rule", "unknown key")]),
    ("user-injection", BASE + "user: root;id\n", [(5, "user", "'root;id' is not allowed here")]),
    ("include-user-injection", inc("os: debian-12, platform: cpu, torch: '2.1', user: '$(id)'"),
     [(6, "include[0].user", "'$(id)' is not allowed here")]),
    ("image-uppercase", BASE + "image: PyTorch\n", [(5, "image", "'PyTorch' is not allowed here")]),
    ("url-subshell", BASE + "index_urls:\n  cpu: https://x/$(id)\n",
     [(6, "index_urls.cpu", "'https://x/$(id)' is not allowed here")]),
    ("url-space", BASE + "index_urls:\n  cpu: 'https://x/a b'\n",
     [(6, "index_urls.cpu", "'https://x/a b' is not allowed here")]),
    ("url-quote", BASE + "index_urls:\n  cpu: https://x/a\"b\n",
     [(6, "index_urls.cpu", "'https://x/a\"b' is not allowed here")]),
    ("url-single-quote", BASE + "index_urls:\n  rocm7.2: \"https://x/it's\"\n",
     [(6, "index_urls.rocm7.2", "\"https://x/it's\" is not allowed here")]),
    ("source-url-scheme", BASE + "source_url: file:///etc/passwd\n",
     [(5, "source_url", "'file:///etc/passwd' is not allowed here")]),
    ("tag-injection", inc("os: debian-12, platform: cpu, torch: '2.1', tag: 'a;b'"),
     [(6, "include[0].tag", "'a;b' is not allowed here")]),
    ("tag-space", inc("os: debian-12, platform: cpu, torch: '2.1', tag: 'a b'"),
     [(6, "include[0].tag", "'a b' is not allowed here")]),
    ("tag-leading-dash", inc("os: debian-12, platform: cpu, torch: '2.1', tag: -x"),
     [(6, "include[0].tag", "'-x' is not allowed here")]),
    ("platform-pattern", "matrix:\n  os: [debian-12]\n  platform: [cpu, rocm7]\n  torch: ['2.1']\n",
     [(3, "matrix.platform[1]", "'rocm7' is not allowed here")]),
    ("flavor-literal", BASE + "  flavor: [runtime, debug]\n",
     [(5, "matrix.flavor[1]", "Input should be 'runtime' or 'devel'")]),
    ("unknown-os", "matrix:\n  os: [debian-11]\n  platform: [cpu]\n  torch: ['2.1']\n",
     [(2, "matrix.os[0]", f"unknown os 'debian-11'; {KNOWN_OS}")]),
    ("unknown-os-include", inc("os: ubuntu-20.04, platform: cpu, torch: '2.1'"),
     [(6, "include[0].os", f"unknown os 'ubuntu-20.04'; {KNOWN_OS}")]),
    ("unknown-gfx", BASE + "  gfx:\n    - gfx1151\n    - gfx942\n",
     [(7, "matrix.gfx[1]", f"unknown gfx family 'gfx942'; {KNOWN_GFX}")]),
    ("unknown-gfx-exclude", BASE + "exclude: [{gfx: MI300X}]\n",
     [(5, "exclude[0].gfx", f"unknown gfx family 'MI300X'; {KNOWN_GFX}")]),
    ("unknown-gfx-exclude-list", BASE + "exclude: [{gfx: [all, MI300X]}]\n",
     [(5, "exclude[0].gfx[1]", f"unknown gfx family 'MI300X'; {KNOWN_GFX}")]),
    ("duplicate-os", "matrix:\n  os: [debian-12, debian-12]\n  platform: [cpu]\n  torch: ['2.1']\n",
     [(2, "matrix.os[1]", "duplicate value 'debian-12'")]),
    ("duplicate-torch-across-forms", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch:\n"
     "    - '2.13.0'\n    - version: '2.13.0'\n      torchvision: '0.28.0'\n",
     [(6, "matrix.torch[1]", "duplicate value '2.13.0'")]),
    ("duplicate-gfx", BASE + "  gfx: [gfx1151, gfx1150, gfx1151]\n",
     [(5, "matrix.gfx[2]", "duplicate value 'gfx1151'")]),
    ("duplicate-yaml-key", "image: a\n" + BASE + "image: b\n",
     [(6, "image", "duplicate key (first at line 1)")]),
    ("duplicate-yaml-key-nested", BASE + "  os: [ubuntu-24.04]\n",
     [(5, "matrix.os", "duplicate key (first at line 2)")]),
    ("duplicate-yaml-key-in-include", inc("os: debian-12, platform: cpu, torch: '2.1', os: debian-13"),
     [(6, "include[0].os", "duplicate key (first at line 6)")]),
    ("include-tag-equals-product-tag", BASE + f"include:\n  - {{os: debian-13, platform: cpu, torch: '2.12.0', "
     f"tag: {CPU_TAG}}}\n",
     [(6, "include[0]", "duplicate cell (same tag as the cell from line 1)")]),
    ("include-equals-product-cell", BASE + "include:\n  - os: debian-12\n    platform: cpu\n"
     "    torch: {version: '2.13.0', torchvision: '0.28.0'}\n",
     [(6, "include[0]", "duplicate cell (same tag as the cell from line 1)")]),
    ("two-includes-one-tag", BASE + "include:\n  - {os: debian-12, platform: cpu, torch: '2.1', tag: t}\n"
     "  - {os: debian-13, platform: cpu, torch: '2.12.0', tag: t}\n",
     [(7, "include[1]", "duplicate cell (same tag as the cell from line 6)")]),
    ("exclude-matches-nothing", BASE + "exclude:\n  - os: ubuntu-24.04\n",
     [(6, "exclude[0]", "matches no cell of the matrix")]),
    ("exclude-gfx-on-cpu-only", BASE + "exclude:\n  - {platform: cpu, gfx: gfx1151}\n",
     [(6, "exclude[0]", "matches no cell of the matrix")]),
    ("rocm-without-gfx-axis", "matrix:\n  os: [debian-12]\n  platform: [cpu, rocm7.2]\n  torch: ['2.1']\n",
     [(3, "matrix.platform", "rocm platforms need at least one family in matrix.gfx")]),
    ("include-cpu-with-gfx", BASE + "include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.1'\n"
     "    gfx: gfx1151\n", [(9, "include[0].gfx", "a cpu cell has no gfx family")]),
    ("include-rocm-without-gfx", BASE + "include:\n  - os: debian-12\n    platform: rocm7.1\n"
     "    torch: '2.1'\n",
     [(6, "include[0].gfx", "a rocm7.1 cell needs a gfx family")]),
    ("top-level-list", "- matrix: {}\n", [(1, "(top level)", "the matrix file must be a mapping")]),
    ("top-level-scalar", "\n\njust text\n", [(3, "(top level)", "the matrix file must be a mapping")]),
    ("syntax-unclosed-flow", "matrix:\n  os: [debian-12\n  platform: [cpu]\n",
     [(3, "(syntax)", "expected ',' or ']'")]),
    ("syntax-tab", BASE + "\tflavor: [devel]\n", [(5, "(syntax)", "'\\t' that cannot start any token")]),
    ("syntax-two-documents", BASE + "---\nimage: x\n", [(5, "(syntax)", "but found another document")]),
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(t, e, id=i) for i, t, e in ERRORS])
def test_input_errors_name_file_line_and_key(tmp_path: Path, text: str,
                                             expected: list[tuple[int | None, str, str]]) -> None:
    file = tmp_path / "matrix.yaml"
    file.write_text(text, encoding="utf-8")
    problems = problems_of(file)
    assert len(problems) == len(expected), "\n".join(map(str, problems))
    for problem, (line, key, message) in zip(problems, expected, strict=True):
        where = f"{file}:{line}" if line is not None else str(file)
        assert (problem.file, problem.line, problem.key) == (file, line, key)
        assert str(problem).startswith(f"{where}: {key}: ") and message in problem.message, str(problem)


def test_index_urls_key_must_be_a_platform(tmp_path: Path) -> None:
    [problem] = problems_of(write(tmp_path, BASE + "index_urls:\n  'cpu; id': https://x/\n"))
    assert problem.line == 6 and problem.key.startswith("index_urls.cpu; id")
    assert "'cpu; id' is not allowed here" in problem.message


@pytest.mark.parametrize("name", ["absent.yaml", ""], ids=["missing", "directory"])
def test_unreadable_file(tmp_path: Path, name: str) -> None:
    file = tmp_path / name
    [problem] = problems_of(file)
    assert (problem.file, problem.line, problem.key) == (file, None, "(file)")
    assert str(problem).startswith(f"{file}: (file): cannot read: ")


def test_all_schema_problems_are_reported_together(tmp_path: Path) -> None:
    file = write(tmp_path, """\
        user: root;id
        matrix:
          os: [debian-11]
          platform: [cpu]
          torch: ["2.x"]
          flavour: [devel]
        include:
          - {os: debian-12, platform: cpu, torch: "2.1", tag: "a b"}
        """)
    assert sorted((p.line, p.key) for p in problems_of(file)) == [
        (1, "user"), (3, "matrix.os[0]"), (5, "matrix.torch[0].version"), (6, "matrix.flavour"),
        (8, "include[0].tag")]


def test_all_expansion_problems_are_reported_together(tmp_path: Path) -> None:
    file = write(tmp_path, """\
        matrix:
          os: [debian-12, debian-12]
          platform: [cpu, rocm7.2]
          torch: ["2.13.0"]
        exclude:
          - {os: ubuntu-24.04}
        include:
          - {os: debian-12, platform: rocm7.2, torch: "2.1"}
          - {os: debian-12, platform: cpu, torch: "2.1", gfx: gfx1151}
        """)
    assert sorted((p.line, p.key, p.message) for p in problems_of(file)) == [
        (2, "matrix.os[1]", "duplicate value 'debian-12'"),
        (3, "matrix.platform", "rocm platforms need at least one family in matrix.gfx"),
        (6, "exclude[0]", "matches no cell of the matrix"),
        (8, "include[0].gfx", "a rocm7.2 cell needs a gfx family"),
        (9, "include[1].gfx", "a cpu cell has no gfx family"),
    ]


def test_all_duplicate_yaml_keys_are_reported_together(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + "matrix: {}\nimage: a\nimage: b\n")
    assert [str(p) for p in problems_of(file)] == [
        f"{file}:5: matrix: duplicate key (first at line 1)",
        f"{file}:7: image: duplicate key (first at line 6)",
    ]


# --- regressions: nulls, encodings, pattern messages, normalised duplicates, empty results -------------

def test_plain_nulls_load_as_none(tmp_path: Path) -> None:
    located = load_located(write(tmp_path, "a: null\nb: ~\nc:\nd: 'null'\ne: \"\"\n"))
    assert located.data == {"a": None, "b": None, "c": None, "d": "null", "e": ""}


def test_include_with_explicit_null_gfx_on_cpu(tmp_path: Path) -> None:
    cells = load(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.12.0', gfx: null"))
    assert cells[-1].gfx is None


def test_non_utf8_file_is_an_input_error(tmp_path: Path) -> None:
    file = tmp_path / "matrix.yaml"
    file.write_bytes(BASE.encode() + "image: caf\xe9\n".encode("latin-1"))
    [problem] = problems_of(file)
    assert problem.key == "(file)"


def test_pattern_message_quotes_the_real_pattern(tmp_path: Path) -> None:
    [problem] = problems_of(write(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.1', tag: 'a;b'")))
    assert schema.TAG_RE in problem.message


def test_same_torch_release_spelled_twice_is_a_duplicate(tmp_path: Path) -> None:
    file = write(tmp_path, "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: [2.10, 2.10.0]\n")
    [problem] = problems_of(file)
    assert (problem.line, problem.key) == (4, "matrix.torch[1]") and "duplicate value '2.10.0'" in problem.message


def test_bad_index_urls_key_names_the_key_without_pydantic_markers(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + "index_urls:\n  rocm-bad: https://x/y\n")
    [problem] = problems_of(file)
    assert problem.key == "index_urls.rocm-bad"


def test_matrix_that_excludes_every_cell_is_an_error(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + "exclude:\n  - {platform: cpu}\n")
    [problem] = problems_of(file)
    assert problem.key == "matrix" and "no cells" in problem.message


def test_matrix_whose_cells_are_all_dropped_or_excluded_is_an_error(tmp_path: Path) -> None:
    # 2.9.1 has no pytorch.org wheels for ROCm 7.2 (dropped); the cpu cell is excluded.
    file = write(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [cpu, rocm7.2]
          torch: ["2.9.1"]
          gfx: [gfx94X-dcgpu, all]
        exclude:
          - {platform: cpu}
        """)
    [problem] = problems_of(file)
    assert (problem.line, problem.key, problem.message) == (
        1, "matrix", "the matrix expands to no cells that can be built")


def test_duplicate_tags_are_reported_at_the_line_of_the_later_cell(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + textwrap.dedent(f"""\
        include:
          - {{os: debian-13, platform: cpu, torch: "2.12.0", tag: {CPU_TAG}}}
          - {{os: debian-12, platform: cpu, torch: "2.12.0", tag: mine}}
          - {{os: ubuntu-24.04, platform: cpu, torch: "2.12.0", tag: mine}}
        """))
    problems = problems_of(file)
    assert [(p.line, p.message) for p in problems] == [
        (6, "duplicate cell (same tag as the cell from line 1)"),
        (8, "duplicate cell (same tag as the cell from line 7)"),
    ]
    # (the key is checked, as an expected failure, in the ERRORS table)


# --- compatibility rules in the matrix: includes, overrides ------------------------------------------------

def test_include_that_breaks_a_rule_is_an_error_naming_the_reason(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + textwrap.dedent("""\
        include:
          - {os: debian-12, platform: cpu, torch: "2.12.0"}
          - os: ubuntu-24.04
            platform: rocm7.2
            torch: "2.9.1"
            gfx: gfx950-dcgpu
        """))
    problems = problems_of(file)
    how = "add override: {reason: ...} to build it anyway"
    assert [(p.file, p.line, p.key, p.message) for p in problems] == [
        (file, 7, "include[1]", "torch 2.9 has no wheels for ROCm 7.2 on the pytorch.org index; it has 6.3, 6.4 "
                                f"(rule channel-wheels; {how})"),
        (file, 7, "include[1]", "gfx950 of gfx950-dcgpu is not compiled into torch 2.9's pytorch.org wheels "
                                f"(hipErrorNoBinaryForGpu): use the therock channel for this family "
                                f"(rule gfx-in-wheels; {how})"),
    ]


def test_include_problems_come_with_the_other_problems_of_the_file(tmp_path: Path) -> None:
    file = write(tmp_path, BASE + textwrap.dedent("""\
        include:
          - {os: debian-13, platform: cpu, torch: "2.1"}
          - {os: debian-12, platform: cpu, torch: "2.13.0", tag: cpu_debian12_py3.11_torch2.13.0_runtime}
        """))
    problems = problems_of(file)
    assert [(p.line, p.message.split(" (rule")[0]) for p in problems] == [
        (6, "torch 2.1 has no wheels for Python 3.13 (debian-13's Python); it has 3.8, 3.9, 3.10, 3.11"),
        (7, "duplicate cell (same tag as the cell from line 1)"),
    ]
    assert problems[0].key == "include[0]"


def test_include_with_override_is_built_and_listed_as_overridden(tmp_path: Path) -> None:
    expansion = expand(tmp_path, BASE + textwrap.dedent("""\
        index_urls:
          rocm7.2: https://mirror.example.org/whl/rocm7.2
        include:
          - os: ubuntu-24.04
            platform: rocm7.2
            torch: "2.9.1"
            gfx: gfx94X-dcgpu
            override: {reason: "our mirror carries a 2.9.1 build for ROCm 7.2"}
        """))
    cpu, cell = expansion.cells
    assert cpu.tag == CPU_TAG
    assert (cell.tag, cell.line, cell.index_url, cell.torchvision, cell.torchaudio) == (
        "rocm7.2_ubuntu24.04_py3.12_torch2.9.1_gfx94X-dcgpu_runtime", 8, "https://mirror.example.org/whl/rocm7.2",
        "0.24.1", "2.9.1")
    assert expansion.dropped == []
    assert [(d.cell, d.rule, d.reason) for d in expansion.overridden] == [
        (cell, "channel-wheels", "torch 2.9 has no wheels for ROCm 7.2 on the pytorch.org index; it has 6.3, 6.4")]


def test_override_on_a_valid_include_changes_nothing(tmp_path: Path) -> None:
    expansion = expand(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.12.0', "
                                     "override: {reason: 'no rule is broken here'}"))
    assert len(expansion.cells) == 2 and expansion.overridden == [] and expansion.dropped == []


def test_override_reason_too_short_is_a_schema_error(tmp_path: Path) -> None:
    file = write(tmp_path, inc("os: ubuntu-24.04, platform: rocm7.2, torch: '2.9.1', gfx: all, "
                               "override: {reason: 'trust me'}"))
    [problem] = problems_of(file)
    assert (problem.line, problem.key) == (6, "include[0].override.reason")
    assert "at least 10 characters" in problem.message


def test_override_does_not_apply_to_product_cells(tmp_path: Path) -> None:
    file = write(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2]
          torch: ["2.9.1"]
          gfx: [all]
          override: {reason: "build everything regardless"}
        """)
    [problem] = problems_of(file)
    assert (problem.line, problem.key, problem.message) == (6, "matrix.override", "unknown key")


# --- content cells: pytorch.org wheels carry every target, so one image serves every family -----------------

CONTENT = """\
matrix:
  os: [ubuntu-24.04]
  platform: [cpu, rocm7.2]
  torch: ["2.13.0"]
  gfx: [all, gfx94X-dcgpu, gfx1151]
  channel: [pytorch, therock, local]
"""


def test_content_cell_of_a_pytorch_family_cell_is_the_all_targets_cell(tmp_path: Path) -> None:
    expansion = expand(tmp_path, CONTENT)
    by_key = {(c.platform, c.gfx, c.channel): c for c in expansion.cells}
    every = by_key["rocm7.2", "all", "pytorch"]
    assert every.tag == "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime"
    for family in ("gfx94X-dcgpu", "gfx1151"):
        cell = by_key["rocm7.2", family, "pytorch"]
        content = cell.content_cell()
        assert (content.gfx, content.tag, content.line) == (ALL_TARGETS, every.tag, None)
        assert content.model_dump(exclude={"line"}) == every.model_dump(exclude={"line"})
        assert content.gfx_targets == every.gfx_targets and set(cell.gfx_targets) <= set(content.gfx_targets)
        assert cell.tag != content.tag  # the family's tag becomes one more tag of the all-targets image


def test_content_cell_is_the_cell_itself_off_the_pytorch_channel_and_for_all_or_cpu(tmp_path: Path) -> None:
    expansion = expand(tmp_path, CONTENT)
    own = [c for c in expansion.cells if c.channel != "pytorch" or c.gfx in (None, ALL_TARGETS)]
    assert {(c.platform, c.gfx, c.channel) for c in own} == {
        ("cpu", None, "pytorch"), ("cpu", None, "local"),
        ("rocm7.2", "all", "pytorch"), ("rocm7.2", "all", "local"),
        ("rocm7.2", "gfx94X-dcgpu", "therock"), ("rocm7.2", "gfx1151", "therock"),
        ("rocm7.2", "gfx94X-dcgpu", "local"), ("rocm7.2", "gfx1151", "local"),
    }
    for cell in own:
        assert cell.content_cell() is cell
    therock = next(c for c in own if c.channel == "therock")
    assert therock.content_cell().tag == "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_therock_runtime"
    assert [(d.cell.platform, d.cell.gfx, d.cell.channel, d.rule) for d in expansion.dropped] == [
        ("cpu", None, "therock", "channel-wheels"), ("rocm7.2", "all", "therock", "gfx-channel")]


def test_content_cell_keeps_an_explicit_tag(tmp_path: Path) -> None:
    _, cell = load(tmp_path, inc("os: ubuntu-24.04, platform: rocm7.2, torch: '2.13.0', gfx: gfx94X-dcgpu, "
                                 "tag: mi300"))
    content = cell.content_cell()
    assert (content.gfx, content.tag, content.explicit_tag) == (ALL_TARGETS, "mi300", True)


# --- LocatedYaml -----------------------------------------------------------------------------------------

LINES = {(): 1, ("matrix",): 2, ("matrix", "os"): 3, ("matrix", "os", 0): 4}


@pytest.mark.parametrize(("path", "line"), [
    (("matrix", "os", 0), 4),
    (("matrix", "os", 1), 3),
    (("matrix", "os", 1, "deeper"), 3),
    (("matrix", "torch", 0, "version"), 2),
    (("include", 0), 1),
    ((), 1),
])
def test_line_of_falls_back_to_deepest_recorded_prefix(path: tuple[str | int, ...], line: int) -> None:
    located = LocatedYaml(Path("m.yaml"), {}, dict(LINES))
    assert located.line_of(path) == line
    assert located.problem(path, "msg") == Problem(Path("m.yaml"), line, dotted(path), "msg")


def test_line_of_without_any_recorded_line() -> None:
    assert LocatedYaml(Path("m.yaml"), {}).line_of(("matrix", "os")) is None


def test_load_located_records_keys_and_items(tmp_path: Path) -> None:
    text = "# c\n" + BASE + "include:\n  - os: x\n    torch:\n      - '2.1'\n"
    located = load_located(write(tmp_path, text))
    assert located.data["matrix"]["torch"] == ["2.13.0"]
    assert {p: located.lines[p] for p in [(), ("matrix",), ("matrix", "platform"), ("include", 0),
                                         ("include", 0, "torch"), ("include", 0, "torch", 0)]} == {
        (): 2, ("matrix",): 2, ("matrix", "platform"): 4, ("include", 0): 7, ("include", 0, "torch"): 8,
        ("include", 0, "torch", 0): 9}


@pytest.mark.parametrize(("path", "text"), [
    ((), "(top level)"),
    (("matrix",), "matrix"),
    (("matrix", "torch", 1, "version"), "matrix.torch[1].version"),
    (("include", 0, "expect", "torch"), "include[0].expect.torch"),
])
def test_dotted(path: tuple[str | int, ...], text: str) -> None:
    assert dotted(path) == text


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
    expected_targets = list(catalog.gfx_families()[gfx].targets) if gfx else []
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
        "gfx_family": "gfx90X-dcgpu", "gfx_targets": ["gfx906", "gfx908", "gfx90a"],
    }
    assert spec().expectations()["torch"] == "2.13.0"


def test_expectations_of_a_therock_and_an_all_targets_cell() -> None:
    therock = spec(os="ubuntu-24.04", platform="rocm7.2", gfx="gfx110X-all", channel="therock", torch="2.9.1")
    got = therock.expectations()
    assert (got["channel"], got["hip"], got["gfx_family"], got["gfx_targets"]) == (
        "therock", "7.2", "gfx110X-all", ["gfx1100", "gfx1101", "gfx1102", "gfx1103"])
    every = spec(os="ubuntu-24.04", platform="rocm7.2", gfx=ALL_TARGETS).expectations()
    assert (every["channel"], every["gfx_family"]) == ("pytorch", "all")
    assert every["gfx_targets"] == list(catalog.compat().torch["2.13"].pytorch.gfx)
    assert spec(gfx=ALL_TARGETS, torch="1.13.1").gfx_targets == ()  # no data: no promise


def test_expect_torch_flows_from_include(tmp_path: Path) -> None:
    cells = load(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.12.0', expect: {torch: '2.11.0'}"))
    assert [c.expectations()["torch"] for c in cells] == ["2.13.0", "2.11.0"]
