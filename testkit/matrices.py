"""Matrix texts that many tests start from, written once.

The one-cell CPU matrix (debian-12, cpu, torch 2.13.0, runtime) is the smallest valid matrix: tests append axes,
excludes, includes or an error to it. Its four lines are always lines 1-4, so an error a test appends is on
line 5 on.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from builder.core.errors import InputError, Problem
from builder.core.spec import CellSpec
from builder.matrix.expand import Expansion, expand_matrix, load_matrix

BARE_TORCH = "{version: '2.13.0', torchvision: null, torchaudio: null}"  # torch alone: one wheel in a wheelhouse


def cpu_matrix(*torch: str, image: str | None = None) -> str:
    """A CPU matrix on debian-12 up to its torch axis (items as YAML flow text, '2.13.0' when none is given),
    with an image line first when image is given; more axes, excludes and includes may follow."""
    head = f"image: {image}\n" if image else ""
    items = ", ".join(torch) if torch else "'2.13.0'"
    return f"{head}matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: [{items}]\n"


ONE_CPU = cpu_matrix()  # the one-cell CPU matrix


# --- matrix files: shared by the tests of yamlsrc, schema, matrix, spec, tags and compat -------------------

# Lines 1-4; error cases append from line 5 on.
BASE = ONE_CPU  # the name the matrix tests use
CPU_TAG = "cpu_debian12_py3.11_torch2.13.0_runtime"


def write_matrix(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "matrix.yaml"
    file.write_text(textwrap.dedent(text), encoding="utf-8")
    return file


def load_cells(tmp_path: Path, text: str) -> list[CellSpec]:
    return load_matrix(write_matrix(tmp_path, text))


def expand_text(tmp_path: Path, text: str) -> Expansion:
    return expand_matrix(write_matrix(tmp_path, text))


def problems_of(file: Path) -> list[Problem]:
    with pytest.raises(InputError) as info:
        load_matrix(file)
    assert str(info.value) == "\n".join(str(p) for p in info.value.problems)
    return info.value.problems


def inc(body: str) -> str:
    """BASE plus one include entry on line 6."""
    return BASE + "include:\n  - {" + body + "}\n"

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


def axes(cell: CellSpec) -> tuple[str, str, str, str | None, str]:
    return cell.os, cell.platform, cell.torch, cell.gfx, cell.flavor


# three TheRock families of one combination (TheRock 7.14, torch 2.12), runtime and devel: six images
FAMILIES = ("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.14]\n  torch: ['2.12.0']\n  channel: [therock]\n"
            "  gfx: [gfx94X-dcgpu, gfx1151, gfx110X-all]\n  flavor: [runtime, devel]\n")
