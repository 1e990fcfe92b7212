"""builder.matrix.expand: matrix file -> CellSpecs (product, channels, index URLs, includes, excludes)."""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import pytest

from builder.matrix.expand import Expansion
from testkit.matrices import (
    BASE,
    CPU_TAG,
    PRODUCT,
    axes,
    expand_text,
    inc,
    load_cells,
    problems_of,
    write_matrix,
)


def rules_of(expansion: Expansion) -> list[tuple[str, str]]:
    """(tag, rule) of every dropped cell, in order."""
    return [(d.cell.tag, d.rule) for d in expansion.dropped]


# --- expansion -------------------------------------------------------------------------------------------

def test_product_multiplies_gfx_on_rocm_platforms_only(tmp_path: Path) -> None:
    expansion = expand_text(tmp_path, PRODUCT)
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


def test_channel_axis_multiplies_cells_and_picks_the_index(tmp_path: Path) -> None:
    expansion = expand_text(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [cpu, rocm7.2, rocm7.14]
          torch: ["2.12.0"]
          gfx: [all, gfx110X-all]
          channel: [pytorch, therock]
        """)
    assert [(c.platform, c.gfx, c.channel, c.index_url) for c in expansion.cells] == [
        ("cpu", None, "pytorch", "https://download.pytorch.org/whl/cpu"),
        ("rocm7.2", "all", "pytorch", "https://download.pytorch.org/whl/rocm7.2"),
        ("rocm7.14", "gfx110X-all", "therock", "https://repo.amd.com/rocm/whl-multi-arch/"),
    ]
    # each channel has its own ROCm line: pytorch.org's 7.2, TheRock's 7.14
    assert [(d.cell.platform, d.cell.gfx, d.cell.channel, d.rule) for d in expansion.dropped] == [
        ("cpu", None, "therock", "channel-wheels"),
        ("rocm7.2", "gfx110X-all", "pytorch", "gfx-in-wheels"),
        ("rocm7.2", "all", "therock", "channel-wheels"),
        ("rocm7.2", "all", "therock", "gfx-channel"),
        ("rocm7.2", "gfx110X-all", "therock", "channel-wheels"),
        ("rocm7.14", "all", "pytorch", "channel-wheels"),
        ("rocm7.14", "gfx110X-all", "pytorch", "channel-wheels"),
        ("rocm7.14", "gfx110X-all", "pytorch", "gfx-in-wheels"),
        ("rocm7.14", "all", "therock", "gfx-channel"),
    ]
    assert [c.expectations()["channel"] for c in expansion.cells] == ["pytorch", "pytorch", "therock"]


def test_channel_defaults_to_pytorch_and_include_takes_a_channel(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, BASE + textwrap.dedent("""\
        include:
          - {os: ubuntu-24.04, platform: rocm7.13, torch: "2.8.0", gfx: gfx94X-dcgpu, channel: therock}
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.13.0", gfx: all}
        """))
    assert [(c.channel, c.index_url) for c in cells] == [
        ("pytorch", "https://download.pytorch.org/whl/cpu"),
        ("therock", "https://repo.amd.com/rocm/whl-multi-arch/"),
        ("pytorch", "https://download.pytorch.org/whl/rocm7.2"),
    ]


def test_both_channels_for_one_family_get_distinct_tags(tmp_path: Path) -> None:
    # The channels' ROCm lines differ (pytorch.org's 7.2, TheRock's 7.14), so only an overridden cell shares every
    # axis with the other channel's: the _therock suffix still keeps their tags apart.
    cells = load_cells(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2]
          torch: ["2.12.0"]
          gfx: [gfx94X-dcgpu]
        include:
          - {os: ubuntu-24.04, platform: rocm7.14, torch: "2.12.0", gfx: gfx94X-dcgpu, channel: therock}
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.12.0", gfx: gfx94X-dcgpu, channel: therock,
             override: {reason: "a mirror serves TheRock wheels under pytorch.org's label"}}
        """)
    assert [(c.channel, c.tag) for c in cells] == [
        ("pytorch", "rocm7.2_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_runtime"),
        ("therock", "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_therock_runtime"),
        ("therock", "rocm7.2_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_therock_runtime"),
    ]


def test_defaults_of_a_minimal_matrix(tmp_path: Path) -> None:
    [cell] = load_cells(tmp_path, "# comment\n" + BASE)
    assert cell.model_dump() == {
        "image": "pytorch", "os": "debian-12", "platform": "cpu", "torch": "2.13.0", "torchvision": "0.28.0",
        "torchaudio": "2.11.0", "gfx": None, "flavor": "runtime", "channel": "pytorch", "user": "root",
        "index_url": "https://download.pytorch.org/whl/cpu", "tag": CPU_TAG, "explicit_tag": False,
        "expect_torch": None, "source_url": "https://github.com/rocm-image-factory/rocm-image-factory", "line": 2,
    }


def test_index_url_defaults_per_platform_and_index_urls_override(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, """\
        index_urls:
          rocm7.2: https://mirror.example.org:8443/whl/rocm7.2
          rocm7.14: https://mirror.example.org:8443/whl/rocm7.14
          cpu: http://10.0.0.1/simple
        matrix:
          os: [debian-12]
          platform: [cpu, rocm7.2, rocm7.1]
          torch: ["2.13.0"]
          gfx: [gfx1151]
        include:
          - {os: ubuntu-24.04, platform: rocm7.2, torch: "2.12.1", gfx: gfx1151}
          - {os: ubuntu-24.04, platform: rocm7.14, torch: "2.12.0", gfx: gfx110X-all, channel: therock}
        """)
    assert {c.tag: c.index_url for c in cells} == {
        "cpu_debian12_py3.11_torch2.13.0_runtime": "http://10.0.0.1/simple",
        "rocm7.2_debian12_py3.11_torch2.13.0_gfx1151_runtime": "https://mirror.example.org:8443/whl/rocm7.2",
        "rocm7.1_debian12_py3.11_torch2.13.0_gfx1151_runtime": "https://download.pytorch.org/whl/rocm7.1",
        "rocm7.2_ubuntu24.04_py3.12_torch2.12.1_gfx1151_runtime": "https://mirror.example.org:8443/whl/rocm7.2",
        # a platform's override is for the pytorch channel only: therock keeps TheRock's index
        "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx110X-all_therock_runtime":
            "https://repo.amd.com/rocm/whl-multi-arch/",
    }


def test_index_urls_therock_overrides_the_therock_index_only(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, """\
        index_urls:
          therock: https://mirror.example.org/therock/
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2]
          torch: ["2.13.0"]
          gfx: [all, gfx94X-dcgpu]
        include:
          - {os: ubuntu-24.04, platform: rocm7.14, torch: "2.12.0", gfx: gfx120X-all, channel: therock}
        """)
    assert [(c.gfx, c.channel, c.index_url) for c in cells] == [
        ("all", "pytorch", "https://download.pytorch.org/whl/rocm7.2"),
        ("gfx94X-dcgpu", "pytorch", "https://download.pytorch.org/whl/rocm7.2"),
        ("gfx120X-all", "therock", "https://mirror.example.org/therock/"),
    ]


def test_include_adds_complete_cells_after_the_product(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, BASE + textwrap.dedent("""\
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
    full = load_cells(tmp_path, EXCLUDABLE)
    assert len(full) == 12
    flow = ", ".join(f"{k}: {json.dumps(v)}" for k, v in exclude.items())
    expansion = expand_text(tmp_path, EXCLUDABLE + f"exclude:\n  - {{{flow}}}\n")
    wanted = {k: v if isinstance(v, list) else [v] for k, v in exclude.items()}
    gone = [c for c in full if all(getattr(c, k) in v for k, v in wanted.items())]
    assert [c.tag for c in expansion.cells] == [c.tag for c in full if c not in gone]
    assert len(gone) == removed
    # excluded cells are listed as dropped by the exclude that matched them, not by a compatibility rule
    assert [(d.cell, d.rule, d.reason) for d in expansion.dropped] == [
        (c, "exclude[0]", "excluded by the matrix (line 7)") for c in gone]


def test_exclude_torch_matches_the_release_however_it_is_spelled(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, """\
        matrix:
          os: [debian-12]
          platform: [cpu]
          torch: ["2.10", "2.12.1"]
        exclude:
          - {torch: ["2.10.0", "2.9"]}
        """)
    assert [c.torch for c in cells] == ["2.12.1"]


def test_a_cell_matched_by_two_excludes_is_dropped_once_by_the_first(tmp_path: Path) -> None:
    expansion = expand_text(tmp_path, EXCLUDABLE + textwrap.dedent("""\
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
    cells = load_cells(tmp_path, BASE + "exclude: [{os: debian-12}]\n"
                           "include: [{os: debian-12, platform: cpu, torch: '2.13.0'}]\n")
    assert [(c.tag, c.line) for c in cells] == [(CPU_TAG, 6)]


# --- expansion problems: all reported together, duplicates, empty results -------------------------------

def test_all_expansion_problems_are_reported_together(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, """\
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
        (3, "matrix.platform", "rocm platforms need at least one gfx family (matrix.gfx)"),
        (6, "exclude[0]", "matches no cell of the matrix"),
        (8, "include[0].gfx", "a rocm7.2 cell needs a gfx family"),
        (9, "include[1].gfx", "a cpu cell has no gfx family"),
    ]


def test_include_with_explicit_null_gfx_on_cpu(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.12.0', gfx: null"))
    assert cells[-1].gfx is None


def test_matrix_that_excludes_every_cell_is_an_error(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, BASE + "exclude:\n  - {platform: cpu}\n")
    [problem] = problems_of(file)
    assert problem.key == "matrix" and "no cells" in problem.message


def test_matrix_whose_cells_are_all_dropped_or_excluded_is_an_error(tmp_path: Path) -> None:
    # 2.9.1 has no pytorch.org wheels for ROCm 7.2 (dropped); the cpu cell is excluded.
    file = write_matrix(tmp_path, """\
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
        1, "matrix", "the matrix expands to no cells that can be built; 2 dropped by channel-wheels: torch 2.9 has "
                     "no wheels for ROCm 7.2 on the pytorch.org index; it has 6.3, 6.4 [decided on pytorch.org "
                     "rocm7.2, https://download.pytorch.org/whl/rocm7.2]; 1 dropped by exclude[0]: excluded by the "
                     "matrix (line 7)")


def test_duplicate_tags_are_reported_at_the_line_of_the_later_cell(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, BASE + textwrap.dedent(f"""\
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
