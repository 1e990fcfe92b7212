"""The compatibility rules and their data, held to shared/rocm-facts.md.

Cells are built the way a maintainer builds them: a small matrix file expanded by builder.matrix.expand, so every
case goes through the schema, the companion defaults, the index choice and compat.violations together.
Section numbers below are those of rocm-facts.md.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from builder.core import facts
from builder.core.facts import ALL_TARGETS
from builder.core.spec import CellSpec
from builder.matrix import compat
from builder.matrix.companions import default_companions
from builder.matrix.expand import expand_matrix
from testkit.matrices import BASE, CPU_TAG, PRODUCT, axes, expand_text, inc, problems_of, write_matrix
from tests.fakes.checkout import builder_cli

PYTORCH = "https://download.pytorch.org/whl/"
THEROCK = "https://repo.amd.com/rocm/whl-multi-arch/"
WHL_NEXT = "https://stable.repo.amd.com/rocm/whl-next/"
# rockrel release/therock-7.12's choice list (no gfx906, though TheRock's tag lists it)
FAMILIES_7_12 = ("gfx908-dcgpu, gfx90a-dcgpu, gfx94X-dcgpu, gfx950-dcgpu, gfx103X-dgpu, gfx110X-all, gfx1150, gfx1151, "
                 "gfx1152, gfx1153, gfx120X-all")
FAMILIES_7_10 = "gfx90X-dcgpu, gfx94X-dcgpu, gfx950-dcgpu, gfx110X-dgpu, gfx1150, gfx1151, gfx120X-all"
GFX906_SERVED = "pytorch.org rocm7.2 (torch 2.11-2.14), rocm7.1 (torch 2.10-2.13)"
NOTHING = ("nothing: no TheRock line publishes it to a stable index (dev and nightly only) and no pytorch.org ROCm "
           "wheel carries it")
PER_FAMILY = "https://repo.amd.com/rocm/whl/"
GFX_RE = re.compile(r"^gfx[0-9]{2,3}[0-9a-f]$")  # gfx900, gfx90a, gfx942, gfx1030, gfx1151
KNOWN = "2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9, 2.10, 2.11, 2.12, 2.13, 2.14, 2.15"
FIX_CHANNEL = "(hipErrorNoBinaryForGpu): use the therock channel for this family"
SOURCE_2_12 = facts.compat().therock["7.14"].torch_versions["2.12"].source


@dataclass(frozen=True)
class Case:
    """One cell of a matrix: torch is a version or a {version, torchvision, torchaudio} mapping."""

    os: str
    platform: str
    torch: str | dict[str, Any]
    gfx: str | None = None
    channel: str = "pytorch"


@dataclass
class Outcome:
    cells: list[CellSpec]
    dropped: list[tuple[str, str]]

    @property
    def rules(self) -> list[str]:
        return [rule for rule, _ in self.dropped]


def by_version(text: str) -> Version:
    return Version(text)


def expand(tmp_path: Path, case: Case) -> Outcome:
    """Expand a one-cell product, with a cpu include as anchor so that a dropped cell is no empty matrix."""
    gfx = f"  gfx: [{case.gfx}]\n" if case.gfx else ""
    file = tmp_path / "matrix.yaml"
    file.write_text(f"matrix:\n  os: [{case.os}]\n  platform: [{case.platform}]\n  torch: [{json.dumps(case.torch)}]\n"
                    f"{gfx}  channel: [{case.channel}]\n"
                    "include:\n  - {os: debian-12, platform: cpu, torch: '2.13.0', tag: anchor}\n", encoding="utf-8")
    expansion = expand_matrix(file)
    assert expansion.overridden == []
    assert all(d.cell.line == 1 for d in expansion.dropped)
    return Outcome([c for c in expansion.cells if c.tag != "anchor"],
                   [(d.rule, d.reason) for d in expansion.dropped])


# --- known-good combinations: kept, with the right companions and index ---------------------------------------

GOOD: list[tuple[str, Case, tuple[str | None, str | None, str]]] = [
    # TheRock's own release line (section 3): each release builds its own torch minors.
    # TheRock builds torch 2.9.1 with torchvision 0.24.0 and torchaudio 2.9.0 (build_portable_linux_pytorch_wheels.yml).
    # 7.13 shipped a per-family release beside the multi-arch one (rockrel release/therock-7.13: torch 2.9-2.11):
    # a family it served installs from its own index there, other torch minors from whl-multi-arch.
    ("therock-rocm7.13-torch2.9.1-mi300", Case("ubuntu-24.04", "rocm7.13", "2.9.1", "gfx94X-dcgpu", "therock"),
     ("0.24.0", "2.9.0", f"{PER_FAMILY}gfx94X-dcgpu/")),
    ("therock-rocm7.13-torch2.8.0-mi300", Case("ubuntu-24.04", "rocm7.13", "2.8.0", "gfx94X-dcgpu", "therock"),
     ("0.23.0", "2.8.0", THEROCK)),
    # AMD's own install line: whl/gfx1151/ "torch==2.11.0+rocm7.13.0" "torchvision==0.26.0+rocm7.13.0"
    ("therock-rocm7.13-torch2.11.0-strix-halo", Case("ubuntu-24.04", "rocm7.13", "2.11.0", "gfx1151", "therock"),
     ("0.26.0", "2.11.0", f"{PER_FAMILY}gfx1151/")),
    ("therock-rocm7.13-torch2.10.0-rdna2-py3.10", Case("ubuntu-22.04", "rocm7.13", "2.10.0", "gfx103X-all", "therock"),
     ("0.25.0", "2.10.0", f"{PER_FAMILY}gfx103X-all/")),
    ("therock-rocm7.12-torch2.9.1-strix-halo", Case("ubuntu-24.04", "rocm7.12", "2.9.1", "gfx1151", "therock"),
     ("0.24.0", "2.9.0", f"{PER_FAMILY}gfx1151/")),
    # 7.12 published gfx90a's and gfx908's wheels under the bare target's folder (fetch_package_targets.py at the tag).
    ("therock-rocm7.12-torch2.10.0-mi210", Case("ubuntu-24.04", "rocm7.12", "2.10.0", "gfx90a-dcgpu", "therock"),
     ("0.25.0", "2.10.0", f"{PER_FAMILY}gfx90a/")),
    ("therock-rocm7.12-torch2.10.0-mi100", Case("debian-13", "rocm7.12", "2.10.0", "gfx908-dcgpu", "therock"),
     ("0.25.0", "2.10.0", f"{PER_FAMILY}gfx908/")),
    ("therock-rocm7.12-torch2.10.0-gfx1153", Case("ubuntu-24.04", "rocm7.12", "2.10.0", "gfx1153", "therock"),
     ("0.25.0", "2.10.0", f"{PER_FAMILY}gfx1153/")),
    ("therock-rocm7.11-torch2.8.0-rdna3", Case("ubuntu-24.04", "rocm7.11", "2.8.0", "gfx110X-all", "therock"),
     ("0.23.0", "2.8.0", f"{PER_FAMILY}gfx110X-all/")),
    ("therock-rocm7.12-torch2.8.0-mi350", Case("ubuntu-24.04", "rocm7.12", "2.8.0", "gfx950-dcgpu", "therock"),
     ("0.23.0", "2.8.0", f"{PER_FAMILY}gfx950-dcgpu/")),
    # TheRock's release/2.7 build pins torchaudio at a pre-release, 2.7.1a0 (RELEASES.md @ therock-7.10)
    ("therock-rocm7.10-torch2.7.1-rdna4", Case("ubuntu-24.04", "rocm7.10", "2.7.1", "gfx120X-all", "therock"),
     ("0.22.1", "2.7.1a0", f"{PER_FAMILY}gfx120X-all/")),
    # 7.9-7.11 still had gfx90X-dcgpu (TheRock#2869 split it after therock-7.11): its per-family index.
    ("therock-rocm7.11-torch2.9.1-gfx90X", Case("ubuntu-24.04", "rocm7.11", "2.9.1", "gfx90X-dcgpu", "therock"),
     ("0.24.0", "2.9.0", f"{PER_FAMILY}gfx90X-dcgpu/")),
    # 10.0 is released, on whl-next; its torchaudio for 2.13 is the 4-part 2.11.0.2.
    ("therock-rocm10.0-torch2.13.0-mi300", Case("ubuntu-24.04", "rocm10.0", "2.13.0", "gfx94X-dcgpu", "therock"),
     ("0.28.0", "2.11.0.2", WHL_NEXT)),
    ("therock-rocm10.0-torch2.12.0-mi450", Case("ubuntu-24.04", "rocm10.0", "2.12.0", "gfx125X-dcgpu", "therock"),
     ("0.27.0", "2.11.0", WHL_NEXT)),
    ("therock-rocm7.14-torch2.11.0-mi450", Case("ubuntu-24.04", "rocm7.14", "2.11.0", "gfx125X-dcgpu", "therock"),
     ("0.26.0", "2.11.0", THEROCK)),
    ("pytorch-rocm7.14-torch2.14.0-all", Case("ubuntu-24.04", "rocm7.14", "2.14.0", ALL_TARGETS),
     ("0.29.0", "2.11.0", f"{PYTORCH}rocm7.14")),
    ("pytorch-rocm7.2-torch2.14.1-rdna3", Case("debian-13", "rocm7.2", "2.14.1", "gfx110X-all"),
     ("0.29.1", "2.11.0", f"{PYTORCH}rocm7.2")),
    # TheRock builds every family, including targets pytorch.org's wheels leave out (gfx1103, section 2).
    ("therock-rocm7.14-torch2.12.0-rdna3", Case("ubuntu-24.04", "rocm7.14", "2.12.0", "gfx110X-all", "therock"),
     ("0.27.0", "2.11.0", THEROCK)),
    ("therock-rocm7.14-torch2.11.0-strix-halo", Case("debian-13", "rocm7.14", "2.11.0", "gfx1151", "therock"),
     ("0.26.0", "2.11.0", THEROCK)),
    ("therock-rocm7.14-torch2.10.0-mi210", Case("debian-12", "rocm7.14", "2.10.0", "gfx90a-dcgpu", "therock"),
     ("0.25.0", "2.10.0", THEROCK)),
    ("pytorch-rocm7.2-torch2.13.0-all", Case("ubuntu-24.04", "rocm7.2", "2.13.0", ALL_TARGETS),
     ("0.28.0", "2.11.0", f"{PYTORCH}rocm7.2")),
    ("pytorch-rocm7.1-torch2.12.1-mi350", Case("debian-12", "rocm7.1", "2.12.1", "gfx950-dcgpu"),
     ("0.27.1", "2.11.0", f"{PYTORCH}rocm7.1")),
    ("pytorch-rocm7.0-torch2.10.0-strix-halo", Case("ubuntu-24.04", "rocm7.0", "2.10.0", "gfx1151"),
     ("0.25.0", "2.10.0", f"{PYTORCH}rocm7.0")),
    ("pytorch-rocm6.4-torch2.8.0-mi300", Case("ubuntu-22.04", "rocm6.4", "2.8.0", "gfx94X-dcgpu"),
     ("0.23.0", "2.8.0", f"{PYTORCH}rocm6.4")),
    ("pytorch-rocm6.4-torch2.8.0-all", Case("ubuntu-22.04", "rocm6.4", "2.8.0", ALL_TARGETS),
     ("0.23.0", "2.8.0", f"{PYTORCH}rocm6.4")),
    ("pytorch-rocm6.4-torch2.9.1-all", Case("ubuntu-24.04", "rocm6.4", "2.9.1", ALL_TARGETS),
     ("0.24.1", "2.9.1", f"{PYTORCH}rocm6.4")),
    ("pytorch-rocm6.3-torch2.7.1-debian12", Case("debian-12", "rocm6.3", "2.7.1", "gfx90X-dcgpu"),
     ("0.22.1", "2.7.1", f"{PYTORCH}rocm6.3")),
    ("pytorch-rocm6.2.4-torch2.6.0", Case("ubuntu-22.04", "rocm6.2.4", "2.6.0", "gfx90X-dcgpu"),
     ("0.21.0", "2.6.0", f"{PYTORCH}rocm6.2.4")),
    ("pytorch-rocm6.2.4-torch2.6.0-noble", Case("ubuntu-24.04", "rocm6.2.4", "2.6.0", "gfx94X-dcgpu"),
     ("0.21.0", "2.6.0", f"{PYTORCH}rocm6.2.4")),
    ("pytorch-rocm6.2-torch2.5.1-noble", Case("ubuntu-24.04", "rocm6.2", "2.5.1", "gfx94X-dcgpu"),
     ("0.20.1", "2.5.1", f"{PYTORCH}rocm6.2")),
    ("cpu-debian12-torch2.13.0", Case("debian-12", "cpu", "2.13.0"), ("0.28.0", "2.11.0", f"{PYTORCH}cpu")),
    ("cpu-rocky9-torch2.8.0", Case("rocky-9", "cpu", "2.8.0"), ("0.23.0", "2.8.0", f"{PYTORCH}cpu")),
    ("cpu-jammy-torch2.0.1", Case("ubuntu-22.04", "cpu", {"version": "2.0.1", "torchvision": "0.15.2",
                                                          "torchaudio": "2.0.2"}),
     ("0.15.2", "2.0.2", f"{PYTORCH}cpu")),
    # A local wheelhouse is not held to pytorch.org's target lists.
    ("local-rocm7.2-torch2.13.0-rdna3", Case("ubuntu-24.04", "rocm7.2", "2.13.0", "gfx110X-all", "local"),
     ("0.28.0", "2.11.0", f"{PYTORCH}rocm7.2")),
    # Companions given in full, or not installed, pass the companions rule.
    ("explicit-companions", Case("debian-12", "cpu", {"version": "2.13.0", "torchvision": "0.28.0",
                                                      "torchaudio": "2.11.0"}), ("0.28.0", "2.11.0", f"{PYTORCH}cpu")),
    ("no-companions", Case("debian-12", "cpu", {"version": "2.12.1", "torchvision": None, "torchaudio": None}),
     (None, None, f"{PYTORCH}cpu")),
]


@pytest.mark.parametrize(("case", "expected"), [pytest.param(c, e, id=i) for i, c, e in GOOD])
def test_known_good_combinations_are_kept(tmp_path: Path, case: Case,
                                          expected: tuple[str | None, str | None, str]) -> None:
    outcome = expand(tmp_path, case)
    assert outcome.dropped == []
    [cell] = outcome.cells
    assert (cell.os, cell.platform, cell.gfx, cell.channel) == (case.os, case.platform, case.gfx, case.channel)
    assert (cell.torchvision, cell.torchaudio, cell.index_url) == expected
    assert compat.violations(cell) == []


# --- known-bad combinations: dropped by the right rules, with the reasons a maintainer reads ----------------

BAD: list[tuple[str, Case, list[tuple[str, str]]]] = [
    # section 1: torch -> ROCm indexes
    ("torch2.13-on-rocm6.4", Case("ubuntu-22.04", "rocm6.4", "2.13.0", ALL_TARGETS),
     [("channel-wheels", "torch 2.13 has no wheels for ROCm 6.4 on the pytorch.org index; it has 7.1, 7.2")]),
    ("torch2.9-on-rocm7.2", Case("ubuntu-24.04", "rocm7.2", "2.9.1", "gfx94X-dcgpu"),
     [("channel-wheels", "torch 2.9 has no wheels for ROCm 7.2 on the pytorch.org index; it has 6.3, 6.4")]),
    ("torch2.5-on-rocm6.2.4", Case("ubuntu-22.04", "rocm6.2.4", "2.5.1", "gfx94X-dcgpu"),
     [("channel-wheels", "torch 2.5 has no wheels for ROCm 6.2.4 on the pytorch.org index; it has 6.1, 6.2")]),
    ("rocm-version-spelled-with-patch", Case("ubuntu-24.04", "rocm7.2.0", "2.13.0", ALL_TARGETS),
     [("channel-wheels", "torch 2.13 has no wheels for ROCm 7.2.0 on the pytorch.org index; it has 7.1, 7.2")]),
    ("therock-with-pytorch-org-rocm-label", Case("ubuntu-24.04", "rocm7.2", "2.13.0", "gfx94X-dcgpu", "therock"),
     [("channel-wheels", "TheRock has no ROCm 7.2 release: its own line is 7.9, 7.10, 7.11, 7.12, 7.13, 7.14, "
                         "10.0, 10.1 (pytorch.org's rocm7.1/rocm7.2 are another channel's)")]),
    ("therock-torch2.13-on-rocm7.14", Case("ubuntu-24.04", "rocm7.14", "2.13.0", "gfx94X-dcgpu", "therock"),
     # each line that does is named with its own index: 10.0 is on whl-next, not 7.14's whl-multi-arch
     [("channel-wheels", "TheRock 7.14 builds no torch 2.13; TheRock lines that do: 10.0 (whl-next)")]),
    ("therock-torch2.6-nowhere", Case("ubuntu-24.04", "rocm7.14", "2.6.0", "gfx94X-dcgpu", "therock"),
     [("channel-wheels", "TheRock 7.14 builds no torch 2.6; no TheRock line does")]),
    ("therock-torch2.14-on-rocm10.0", Case("ubuntu-24.04", "rocm10.0", "2.14.0", "gfx94X-dcgpu", "therock"),
     [("channel-wheels", "TheRock 10.0 builds no torch 2.14; no TheRock line does")]),
    ("therock-torch2.11-on-rocm7.12", Case("ubuntu-24.04", "rocm7.12", "2.11.0", "gfx1151", "therock"),
     [("channel-wheels", "TheRock 7.12 builds no torch 2.11; TheRock lines that do: 7.13 (whl-multi-arch), 7.14 "
                         "(whl-multi-arch), 10.0 (whl-next)")]),
    # 7.9-7.12: one index per family, for the families defined at the tag only.
    ("therock-7.12-has-no-gfx90c-index", Case("ubuntu-24.04", "rocm7.12", "2.10.0", "gfx90c-igpu", "therock"),
     [("therock-family-build", "TheRock 7.12's build does not define gfx90c-igpu (ROCm/TheRock "
                               "cmake/therock_amdgpu_targets.cmake @ therock-7.12 (3031e31e)): no gfx90c-igpu image of "
                               "that line"),
      ("therock-family-index", "TheRock 7.12 published per-family wheels (one index per family, no [device-*] "
                               f"extras) and none for gfx90c-igpu: its families are {FAMILIES_7_12}; gfx90c-igpu is "
                               f"served by {NOTHING}")]),
    # rockrel release/therock-7.12 @ f450c729: gfx906 is not in the choice list of its torch release workflow
    ("therock-7.12-has-no-gfx906-index", Case("ubuntu-24.04", "rocm7.12", "2.10.0", "gfx906-dgpu", "therock"),
     [("therock-family-index", "TheRock 7.12 published per-family wheels (one index per family, no [device-*] "
                               f"extras) and none for gfx906-dgpu: its families are {FAMILIES_7_12}; gfx906-dgpu is "
                               f"served by {GFX906_SERVED}")]),
    # ... and its Python matrix is 3.11-3.13: Ubuntu 22.04's Python 3.10 has no 7.12 wheels
    ("therock-7.12-has-no-python-3.10", Case("ubuntu-22.04", "rocm7.12", "2.10.0", "gfx908-dcgpu", "therock"),
     [("python-wheels", "torch 2.10 has no wheels on TheRock 7.12's index for Python 3.10 (ubuntu-22.04's Python); "
                        "it has 3.11, 3.12, 3.13")]),
    # rockrel release/therock-7.11 (3a290b6): no gfx1153 among the torch families; 7.12 was the first with it
    ("therock-7.11-has-no-gfx1153-index", Case("ubuntu-24.04", "rocm7.11", "2.9.1", "gfx1153", "therock"),
     [("therock-family-index", "TheRock 7.11 published per-family wheels (one index per family, no [device-*] "
                               "extras) and none for gfx1153: its families are gfx90X-dcgpu, gfx94X-dcgpu, "
                               "gfx950-dcgpu, gfx110X-all, gfx1150, gfx1151, gfx1152, gfx120X-all; gfx1153 is served "
                               "by TheRock 7.12, 7.13, 7.14, 10.0")]),
    # rockrel release/rocm7.9-torch2.9 (31661dc): torch 2.9 only
    ("therock-7.9-built-no-torch-2.7", Case("ubuntu-24.04", "rocm7.9", "2.7.1", "gfx1151", "therock"),
     [("channel-wheels", "TheRock 7.9 builds no torch 2.7; TheRock lines that do: 7.10 (whl/<family>/), 7.11 "
                         "(whl/<family>/)")]),
    # 7.13's per-family release: TheRock's release workflow @ therock-7.13 has no gfx1153 for release/2.9
    ("therock-7.13-torch2.9-without-gfx1153", Case("ubuntu-24.04", "rocm7.13", "2.9.1", "gfx1153", "therock"),
     [("therock-torch-targets", "TheRock 7.13 builds torch 2.9 without gfx1153 (its release build matrix "
                                "excludes it): no device package for gfx1153; use torch 2.10, 2.11 of that line")]),
    # 7.10-7.12 published gfx103X-dgpu (a subset) and 7.9/7.10 gfx110X-dgpu (no gfx1103), never gfx103X-all/gfx110X-all;
    # gfx101X-dgpu had expect_pytorch_failure (no torch wheels): fetch_package_targets.py at each tag.
    ("therock-7.12-has-no-gfx103X-all-index", Case("ubuntu-24.04", "rocm7.12", "2.10.0", "gfx103X-all", "therock"),
     [("therock-family-index", "TheRock 7.12 published per-family wheels (one index per family, no [device-*] "
                               f"extras) and none for gfx103X-all: its families are {FAMILIES_7_12}; gfx103X-all is "
                               "served by TheRock 7.13, 7.14, 10.0")]),
    ("therock-7.12-has-no-gfx101X-torch", Case("ubuntu-24.04", "rocm7.12", "2.10.0", "gfx101X-dgpu", "therock"),
     [("therock-family-build", "TheRock 7.12's family matrix expects its torch build of gfx101X-dgpu to fail "
                               "(expect_pytorch_failure, amdgpu_family_matrix.py @ therock-7.12): no gfx101X-dgpu "
                               "image of that line"),
      ("therock-family-index", "TheRock 7.12 published per-family wheels (one index per family, no [device-*] "
                               f"extras) and none for gfx101X-dgpu: its families are {FAMILIES_7_12}; gfx101X-dgpu is "
                               "served by TheRock 7.13, 7.14, 10.0")]),
    ("therock-7.10-gfx110X-dgpu-lacks-gfx1103", Case("ubuntu-24.04", "rocm7.10", "2.9.1", "gfx110X-all", "therock"),
     [("therock-family-index", "TheRock 7.10 published per-family wheels (one index per family, no [device-*] "
                               f"extras) and none for gfx110X-all: its families are {FAMILIES_7_10}; gfx110X-all is "
                               "served by TheRock 7.11, 7.12, 7.13, 7.14, 10.0; pytorch.org rocm7.2 (torch 2.14), "
                               "rocm7.14 (torch 2.14)")]),
    ("therock-7.9-had-no-gfx90X-torch", Case("ubuntu-24.04", "rocm7.9", "2.9.0", "gfx90X-dcgpu", "therock"),
     [("therock-family-index", "TheRock 7.9 published per-family wheels (one index per family, no [device-*] "
                               "extras) and none for gfx90X-dcgpu: its families are gfx94X-dcgpu, gfx950-dcgpu, "
                               "gfx110X-dgpu, gfx1151, gfx120X-all; gfx90X-dcgpu is served by TheRock 7.10, 7.11; "
                               f"{GFX906_SERVED}")]),
    # therock-7.12's release_portable_linux_pytorch_wheels.yml: no gfx1153 for release/2.8 and release/2.9
    ("therock-7.12-torch2.9-without-gfx1153", Case("ubuntu-24.04", "rocm7.12", "2.9.1", "gfx1153", "therock"),
     [("therock-torch-targets", "TheRock 7.12 builds torch 2.9 without gfx1153 (its release build matrix "
                                "excludes it): no device package for gfx1153; use torch 2.10 of that line")]),
    # TheRock builds ROCm's release/2.12 as 2.12.0 (TheRock#6223), never pytorch.org's 2.12.1
    ("therock-7.14-builds-2.12.0-not-2.12.1", Case("ubuntu-24.04", "rocm7.14", "2.12.1", "gfx94X-dcgpu", "therock"),
     [("therock-torch-version", "TheRock 7.14 built torch 2.12 as torch 2.12.0, torchvision 0.27.0, torchaudio 2.11.0 "
                                f"(+rocm7.14.0; {SOURCE_2_12}), not torch 2.12.1: use those versions for the therock "
                                "channel")]),
    ("therock-10.0-builds-2.12.0-not-2.12.1", Case("ubuntu-24.04", "rocm10.0", "2.12.1", "gfx1151", "therock"),
     [("therock-torch-version", "TheRock 10.0 built torch 2.12 as torch 2.12.0, torchvision 0.27.0, torchaudio 2.11.0 "
                                f"(+rocm10.0.0; {SOURCE_2_12}), not torch 2.12.1: use those versions for the therock "
                                "channel")]),
    # a patch nobody published: pytorch.org released 2.13.0 only (compat.yaml torch_releases)
    ("torch-2.13.1-unpublished", Case("debian-12", "cpu", "2.13.1"),
     [("torch-release", "torch 2.13.1 is not a cited release (compat.yaml torch_releases: torch 2.13 releases are "
                        "2.13.0 listed, each with its source)")]),
    ("therock-7.10-had-no-gfx908-family", Case("ubuntu-24.04", "rocm7.10", "2.8.0", "gfx908-dcgpu", "therock"),
     [("therock-family-build", "TheRock 7.10's build does not define gfx908-dcgpu (ROCm/TheRock "
                               "cmake/therock_amdgpu_targets.cmake @ therock-7.10 (599890ba)): no gfx908-dcgpu image "
                               "of that line"),
      ("therock-family-index", "TheRock 7.10 published per-family wheels (one index per family, no [device-*] "
                               f"extras) and none for gfx908-dcgpu: its families are {FAMILIES_7_10}; gfx908-dcgpu is "
                               "served by TheRock 7.12, 7.13, 7.14, 10.0; pytorch.org rocm7.2 (torch 2.11-2.14), "
                               "rocm7.14 (torch 2.14)")]),
    # a line that builds a torch release without some targets (configure_pytorch_release_matrix.py)
    ("therock-7.14-torch2.12-without-gfx1250", Case("ubuntu-24.04", "rocm7.14", "2.12.0", "gfx125X-dcgpu", "therock"),
     [("therock-torch-targets", "TheRock 7.14 builds torch 2.12 without gfx1250 (its release build matrix "
                                "excludes it): no device package for gfx125X-dcgpu; use torch 2.11 of that line")]),
    ("therock-10.0-torch2.13-without-gfx90c", Case("ubuntu-24.04", "rocm10.0", "2.13.0", "gfx90c-igpu", "therock"),
     # no 10.0 release serves gfx90c on the stable index (dev/nightly only): not "another torch release"
     [("therock-stable-targets", "TheRock publishes the device packages of gfx90c to its dev and nightly indexes "
                                 f"only, not {WHL_NEXT}: no release of TheRock 10.0 serves gfx90c-igpu; it is served "
                                 f"by {NOTHING}")]),
    ("therock-10.0-torch2.12-gfx90c-is-dev-only", Case("ubuntu-24.04", "rocm10.0", "2.12.0", "gfx90c-igpu", "therock"),
     [("therock-stable-targets", "TheRock publishes the device packages of gfx90c to its dev and nightly indexes "
                                 f"only, not {WHL_NEXT}: no release of TheRock 10.0 serves gfx90c-igpu; it is served "
                                 f"by {NOTHING}")]),
    ("therock-10.0-gfx900-is-dev-only", Case("ubuntu-24.04", "rocm10.0", "2.13.0", "gfx900-dgpu", "therock"),
     [("therock-stable-targets", "TheRock publishes the device packages of gfx900 to its dev and nightly indexes "
                                 f"only, not {WHL_NEXT}: no release of TheRock 10.0 serves gfx900-dgpu; it is served "
                                 f"by {GFX906_SERVED}")]),
    ("therock-10.0-gfx906-is-dev-only", Case("ubuntu-24.04", "rocm10.0", "2.12.0", "gfx906-dgpu", "therock"),
     [("therock-stable-targets", "TheRock publishes the device packages of gfx906 to its dev and nightly indexes "
                                 f"only, not {WHL_NEXT}: no release of TheRock 10.0 serves gfx906-dgpu; it is served "
                                 f"by {GFX906_SERVED}")]),
    # pytorch.org: torch 2.14 left rocm7.1 for rocm7.14; its rocm7.14 wheels lack gfx900/gfx906
    ("torch2.14-on-rocm7.1", Case("ubuntu-24.04", "rocm7.1", "2.14.0", ALL_TARGETS),
     [("channel-wheels", "torch 2.14 has no wheels for ROCm 7.1 on the pytorch.org index; it has 7.2, 7.14")]),
    ("gfx906-on-rocm7.14-pytorch-wheels", Case("ubuntu-24.04", "rocm7.14", "2.14.1", "gfx906-dgpu"),
     [("gfx-in-wheels", "gfx906 of gfx906-dgpu is not compiled into torch 2.14's pytorch.org wheels "
                       f"(hipErrorNoBinaryForGpu): gfx906-dgpu is served by {GFX906_SERVED}")]),
    ("gfx90c-on-pytorch-wheels", Case("ubuntu-24.04", "rocm7.2", "2.13.0", "gfx90c-igpu"),
     [("gfx-in-wheels", "gfx90c of gfx90c-igpu is not compiled into torch 2.13's pytorch.org wheels "
                       f"(hipErrorNoBinaryForGpu): gfx90c-igpu is served by {NOTHING}")]),
    ("torch2.15-has-no-verified-rocm-index", Case("ubuntu-24.04", "rocm7.2", "2.15.0", ALL_TARGETS),
     [("channel-wheels", "torch 2.15 has no wheels for ROCm 7.2 on the pytorch.org index; it has none")]),
    ("therock-gfx906-is-dev-only", Case("ubuntu-24.04", "rocm7.14", "2.12.0", "gfx90X-dcgpu", "therock"),
     [("therock-family-build", "TheRock 7.14's build does not define gfx90X-dcgpu (ROCm/TheRock "
                               "cmake/therock_amdgpu_targets.cmake @ therock-7.14 (418cd5f6)); its families for those "
                               "targets are gfx908-dcgpu, gfx90a-dcgpu, gfx906-dgpu: no gfx90X-dcgpu image of that "
                               "line"),
      ("therock-stable-targets", "TheRock publishes the device packages of gfx906 to its dev and nightly indexes "
                                 f"only, not {THEROCK}: choose gfx908-dcgpu or gfx90a-dcgpu (TheRock#2869 split "
                                 "gfx90X-dcgpu; both install from it)")]),
    ("therock-cpu", Case("debian-12", "cpu", "2.13.0", None, "therock"),
     [("channel-wheels", "TheRock's index has ROCm wheels only: build cpu cells from the pytorch channel")]),
    # section 1: Python; images use the OS's Python (section 4)
    ("torch2.0-on-noble", Case("ubuntu-24.04", "cpu", "2.0.1"),
     [("python-wheels", "torch 2.0 has no wheels for Python 3.12 (ubuntu-24.04's Python); it has 3.8, 3.9, 3.10, "
                        "3.11")]),
    ("torch2.13-on-rocky9", Case("rocky-9", "cpu", "2.13.0"),
     [("python-wheels", "torch 2.13 has no wheels for Python 3.9 (rocky-9's Python); it has 3.10, 3.11, 3.12, "
                        "3.13, 3.14")]),
    ("torch2.5-on-trixie", Case("debian-13", "cpu", "2.5.1"),
     [("python-wheels", "torch 2.5 has no wheels for Python 3.13 (debian-13's Python); it has 3.9, 3.10, 3.11, "
                        "3.12")]),
    # section 2: OS releases in ROCm's official matrix
    ("rocm6.1-on-noble", Case("ubuntu-24.04", "rocm6.1", "2.5.1", "gfx94X-dcgpu"),
     [("os-support", "ROCm 6.1 does not support ubuntu-24.04 (ROCm supports it from 6.2)")]),
    ("rocm6.3-on-rocky9", Case("rocky-9", "rocm6.3", "2.8.0", "gfx94X-dcgpu"),
     [("os-support", "ROCm 6.3 does not support rocky-9 (ROCm supports it from 7.0)")]),
    ("rocm6.2-on-debian12", Case("debian-12", "rocm6.2", "2.5.1", "gfx94X-dcgpu"),
     [("os-support", "ROCm 6.2 does not support debian-12 (ROCm supports it from 6.3)")]),
    ("rocm7.0-on-trixie", Case("debian-13", "rocm7.0", "2.10.0", "gfx94X-dcgpu"),
     [("os-support", "ROCm 7.0 does not support debian-13 (ROCm supports it from 7.1)")]),
    # section 2: first ROCm with the family (local wheels, so only this rule speaks)
    ("mi350-on-rocm6.4", Case("ubuntu-22.04", "rocm6.4", "2.8.0", "gfx950-dcgpu", "local"),
     [("gfx-rocm", "gfx950-dcgpu (MI350X, MI355X) needs ROCm 7.0 or newer")]),
    ("rdna4-on-rocm6.3", Case("debian-12", "rocm6.3", "2.7.1", "gfx120X-all"),
     [("gfx-rocm", "gfx120X-all (RX 9060, RX 9070, RX 9070 XT, AI PRO R9700) needs ROCm 6.4.1 or newer")]),
    # gfx.yaml: RDNA4 from 6.4.1 (its system requirements); the 6.4 line (pytorch.org's rocm6.4) has 6.4.1, 6.4.0 not
    ("rdna4-on-rocm6.4.0", Case("ubuntu-24.04", "rocm6.4.0", "2.8.0", "gfx120X-all", "local"),
     [("gfx-rocm", "gfx120X-all (RX 9060, RX 9070, RX 9070 XT, AI PRO R9700) needs ROCm 6.4.1 or newer")]),
    ("mi100-on-rocm5.4.2", Case("ubuntu-22.04", "rocm5.4.2", "2.0.1", "gfx90X-dcgpu"),
     [("gfx-rocm", "gfx90X-dcgpu (MI50, Radeon VII, MI100, MI210, MI250) needs ROCm 6.0 or newer")]),
    # section 1: gfx targets compiled into pytorch.org's wheels
    ("rdna3-on-pytorch-wheels", Case("ubuntu-24.04", "rocm7.2", "2.13.0", "gfx110X-all"),
     [("gfx-in-wheels", f"gfx1103 of gfx110X-all is not compiled into torch 2.13's pytorch.org wheels {FIX_CHANNEL}")]),
    ("rdna1-on-pytorch-wheels", Case("ubuntu-24.04", "rocm7.2", "2.13.0", "gfx101X-dgpu"),
     [("gfx-in-wheels", "gfx1010, gfx1011, gfx1012 of gfx101X-dgpu are not compiled into torch 2.13's pytorch.org "
                        f"wheels {FIX_CHANNEL}")]),
    ("strix-halo-on-torch2.9-wheels", Case("ubuntu-24.04", "rocm6.4", "2.9.1", "gfx1151"),
     [("gfx-in-wheels", f"gfx1151 of gfx1151 is not compiled into torch 2.9's pytorch.org wheels {FIX_CHANNEL}")]),
    ("mi350-on-torch2.9-wheels", Case("ubuntu-24.04", "rocm6.4", "2.9.1", "gfx950-dcgpu"),
     [("gfx-in-wheels", f"gfx950 of gfx950-dcgpu is not compiled into torch 2.9's pytorch.org wheels {FIX_CHANNEL}"),
      ("gfx-rocm", "gfx950-dcgpu (MI350X, MI355X) needs ROCm 7.0 or newer")]),
    ("mi350-on-rocm6.4-pytorch", Case("ubuntu-22.04", "rocm6.4", "2.8.0", "gfx950-dcgpu"),
     [("gfx-in-wheels", f"gfx950 of gfx950-dcgpu is not compiled into torch 2.8's pytorch.org wheels {FIX_CHANNEL}"),
      ("gfx-rocm", "gfx950-dcgpu (MI350X, MI355X) needs ROCm 7.0 or newer")]),
    # section 3: TheRock's device-all wheels
    ("therock-all-targets", Case("ubuntu-24.04", "rocm7.14", "2.12.0", ALL_TARGETS, "therock"),
     [("gfx-channel", "TheRock's all-targets wheels (device-all) make an 18.6 GB layer (ROCm-docker#166): use the "
                      "pytorch channel for an all-targets image")]),
    # no data at all
    ("unknown-torch-1.13", Case("debian-12", "cpu", "1.13.1"),
     [("known-torch", f"no compatibility data for torch 1.13 (known: {KNOWN})")]),
    ("unknown-torch-2.16", Case("ubuntu-24.04", "rocm7.2", "2.16.0", "gfx94X-dcgpu", "therock"),
     [("known-torch", f"no compatibility data for torch 2.16 (known: {KNOWN})")]),
    # section 1: companions
    ("torchvision-of-another-torch", Case("debian-12", "cpu", {"version": "2.13.0", "torchvision": "0.24.1"}),
     [("companions", "torchvision 0.24.1 does not pair with torch 2.13 (it pairs with 0.28.x)")]),
    ("torchaudio-moved-with-torch", Case("debian-12", "cpu", {"version": "2.12.1", "torchaudio": "2.12.0"}),
     [("companions", "torchaudio 2.12.0 does not pair with torch 2.12 (it pairs with 2.11.x)")]),
    # every broken rule is listed, in the order of compat.RULES
    ("everything-wrong", Case("debian-13", "rocm7.0", {"version": "2.0.1", "torchvision": "0.16.0"}, "gfx110X-all"),
     [("python-wheels", "torch 2.0 has no wheels for Python 3.13 (debian-13's Python); it has 3.8, 3.9, 3.10, 3.11"),
      ("channel-wheels", "torch 2.0 has no wheels for ROCm 7.0 on the pytorch.org index; it has 5.4.2"),
      ("os-support", "ROCm 7.0 does not support debian-13 (ROCm supports it from 7.1)"),
      ("gfx-in-wheels", "gfx1100, gfx1101, gfx1102, gfx1103 of gfx110X-all are not compiled into torch 2.0's "
                        f"pytorch.org wheels {FIX_CHANNEL}"),
      ("companions", "torchvision 0.16.0 does not pair with torch 2.0 (it pairs with 0.15.x)")]),
]


@pytest.mark.parametrize(("case", "expected"), [pytest.param(c, e, id=i) for i, c, e in BAD])
def test_known_bad_combinations_are_dropped_with_rule_and_reason(tmp_path: Path, case: Case,
                                                                 expected: list[tuple[str, str]]) -> None:
    outcome = expand(tmp_path, case)
    assert outcome.cells == []
    assert outcome.dropped == expected


def test_every_rule_is_exercised_by_a_bad_case() -> None:
    """therock-released has no line to speak of today (10.0 is released): test_a_prerelease_line_is_dropped."""
    names = [name for name, _ in compat.RULES]
    assert len(set(names)) == len(names)
    assert {rule for _, _, broken in BAD for rule, _ in broken} | {"therock-released"} == set(names)


def test_a_prerelease_line_is_dropped_from_its_stable_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line branched but not tagged (as 10.0 was until its release) has no wheels on its stable index."""
    data = facts.compat()
    lines = {**data.therock, "10.0": data.therock["10.0"].model_copy(update={"prerelease": True})}
    monkeypatch.setattr(facts, "compat", lambda: data.model_copy(update={"therock": lines}))
    outcome = expand(tmp_path, Case("ubuntu-24.04", "rocm10.0", "2.13.0", "gfx94X-dcgpu", "therock"))
    assert outcome.dropped == [("therock-released", "TheRock 10.0 is not released yet (no stable wheels on "
                                f"{WHL_NEXT}): use 7.14; what would admit it: its release tag, and its wheels "
                                f"(+rocm10.0.0) on {WHL_NEXT}; until then index_urls.therock can name an index that "
                                "serves its candidates")]


# --- where the rules and rocm-facts.md disagreed (fixed), and one that still does (expected failure) ---------

def test_therock_has_no_python_3_9_wheels(tmp_path: Path) -> None:
    outcome = expand(tmp_path, Case("rocky-9", "rocm7.13", "2.8.0", "gfx94X-dcgpu", "therock"))
    assert outcome.cells == []
    assert "python-wheels" in outcome.rules


def test_torch_2_3_wheels_for_rocm_5_7_lack_gfx942(tmp_path: Path) -> None:
    outcome = expand(tmp_path, Case("ubuntu-22.04", "rocm5.7", "2.3.1", "gfx94X-dcgpu"))
    assert "gfx-in-wheels" in outcome.rules


def test_all_targets_of_torch_2_3_on_rocm_5_7_exclude_gfx942(tmp_path: Path) -> None:
    outcome = expand(tmp_path, Case("ubuntu-22.04", "rocm5.7", "2.3.1", ALL_TARGETS))
    [cell] = outcome.cells
    assert "gfx942" not in cell.gfx_targets


@pytest.mark.parametrize("rocm", ["6.4", "6.4.1", "6.4.3"])
def test_rdna4_is_supported_by_the_6_4_line_from_6_4_1(tmp_path: Path, rocm: str) -> None:
    outcome = expand(tmp_path, Case("ubuntu-24.04", f"rocm{rocm}", "2.8.0", "gfx120X-all", "local"))
    assert outcome.dropped == [] and len(outcome.cells) == 1


# --- companion defaults ---------------------------------------------------------------------------------------


MINORS: list[str] = sorted(facts.compat().torch, key=by_version)


@pytest.mark.parametrize("minor", MINORS)
def test_default_companions_pass_the_companions_rule(tmp_path: Path, minor: str) -> None:
    """Whatever a torch entry defaults to must never be dropped by the rule that checks companions."""
    vision, audio = default_companions(f"{minor}.1")
    data = facts.compat().torch[minor]
    patch = 1 + data.companion_patch_offset
    assert (vision, audio) == (f"{data.torchvision}.{patch}",
                               f"{data.torchaudio}.{patch if data.torchaudio == minor else 0}")
    outcome = expand(tmp_path, Case("ubuntu-22.04", "cpu", f"{minor}.1"))
    assert "companions" not in outcome.rules
    assert [(c.torchvision, c.torchaudio) for c in outcome.cells] in ([(vision, audio)], [])


# --- the data files, against rocm-facts.md ------------------------------------------------------------------

# Section 1: torch -> (torchvision, torchaudio, ROCm indexes with wheels, Python first-last).
# 2.0's "5.3 (unsure)" index is left out of the data on purpose.
FACTS_TORCH: dict[str, tuple[str, str, tuple[str, ...], str, str]] = {
    "2.0": ("0.15", "2.0", ("5.4.2",), "3.8", "3.11"),
    "2.1": ("0.16", "2.1", ("5.5", "5.6"), "3.8", "3.11"),
    "2.2": ("0.17", "2.2", ("5.6", "5.7"), "3.8", "3.12"),
    "2.3": ("0.18", "2.3", ("5.7", "6.0"), "3.8", "3.12"),
    "2.4": ("0.19", "2.4", ("6.0", "6.1"), "3.8", "3.12"),
    "2.5": ("0.20", "2.5", ("6.1", "6.2"), "3.9", "3.12"),
    "2.6": ("0.21", "2.6", ("6.1", "6.2.4"), "3.9", "3.13"),
    "2.7": ("0.22", "2.7", ("6.2.4", "6.3"), "3.9", "3.13"),
    "2.8": ("0.23", "2.8", ("6.3", "6.4"), "3.9", "3.13"),
    "2.9": ("0.24", "2.9", ("6.3", "6.4"), "3.10", "3.14"),
    "2.10": ("0.25", "2.10", ("7.0", "7.1"), "3.10", "3.14"),
    "2.11": ("0.26", "2.11", ("7.1", "7.2"), "3.10", "3.14"),
    "2.12": ("0.27", "2.11", ("7.1", "7.2"), "3.10", "3.14"),
    "2.13": ("0.28", "2.11", ("7.1", "7.2"), "3.10", "3.14"),
    # test-infra release/2.14 @ c840391a: rocm7.2 and rocm7.14, no 7.1 (rocm-facts.md section 3 agrees).
    "2.14": ("0.29", "2.11", ("7.2", "7.14"), "3.10", "3.14"),
    # not verified at a pytorch source: no ROCm index listed (compat.yaml says why).
    "2.15": ("0.30", "2.12", (), "3.10", "3.14"),
}

# Section 1: PYTORCH_ROCM_ARCH, cumulative; 2.11-2.13 are assumed unchanged since 2.10.
_BASE = {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"}
_2_1 = _BASE | {"gfx1100"}
_2_3 = _2_1 | {"gfx942"}
_2_6 = _2_3 | {"gfx1101"}
_2_7 = _2_6 | {"gfx1102", "gfx1200", "gfx1201"}
_2_10 = _2_7 | {"gfx950", "gfx1150", "gfx1151"}
_MAIN = _2_10 | {"gfx1103"}  # pytorch/pytorch#179653, read on main @ 027375bf (2.14's list)
FACTS_WHEEL_GFX = {"2.0": _BASE, "2.1": _2_1, "2.2": _2_1, "2.3": _2_3, "2.4": _2_3, "2.5": _2_3, "2.6": _2_6,
                   "2.7": _2_7, "2.8": _2_7, "2.9": _2_7, "2.10": _2_10, "2.11": _2_10, "2.12": _2_10, "2.13": _2_10,
                   "2.14": _MAIN, "2.15": _MAIN}

# Section 2: family -> targets, first ROCm in the official matrix (for a mixed family: its first target's).
FACTS_GFX: dict[str, tuple[tuple[str, ...], str | None]] = {
    "gfx94X-dcgpu": (("gfx942",), "6.0"),
    "gfx950-dcgpu": (("gfx950",), "7.0"),
    "gfx90X-dcgpu": (("gfx906", "gfx908", "gfx90a"), "6.0"),
    "gfx908-dcgpu": (("gfx908",), "6.0"),  # section 2: TheRock#2869 split gfx90X-dcgpu
    "gfx90a-dcgpu": (("gfx90a",), "6.0"),
    "gfx101X-dgpu": (("gfx1010", "gfx1011", "gfx1012"), None),
    "gfx103X-all": (tuple(f"gfx103{i}" for i in range(7)), "6.0"),
    "gfx110X-all": (("gfx1100", "gfx1101", "gfx1102", "gfx1103"), "6.0"),
    "gfx103X-dgpu": (("gfx1030", "gfx1031", "gfx1032", "gfx1034"), "6.0"),  # the discrete halves (TheRock's CMake)
    "gfx110X-dgpu": (("gfx1100", "gfx1101", "gfx1102"), "6.0"),
    "gfx1151": (("gfx1151",), None),
    "gfx1150": (("gfx1150",), None),
    "gfx1152": (("gfx1152",), None),
    "gfx1153": (("gfx1153",), None),
    "gfx120X-all": (("gfx1200", "gfx1201"), "6.4.1"),  # facts: 6.4.1-6.4.3
    "gfx906-dgpu": (("gfx906",), None),  # section 2: TheRock's current families
    "gfx900-dgpu": (("gfx900",), None),
    "gfx90c-igpu": (("gfx90c",), None),
    "gfx125X-dcgpu": (("gfx1250",), None),
}

# Sections 2 and 4: OS -> (Python it ships, first ROCm that lists it). Debian 13: "7.0.2/7.1", 7.1 kept.
FACTS_OS = {"ubuntu-24.04": ("3.12", "6.2"), "ubuntu-22.04": ("3.10", None), "debian-12": ("3.11", "6.3"),
            "debian-13": ("3.13", "7.1"), "rocky-9": ("3.9", "7.0")}


def _python_range(first: str, last: str) -> tuple[str, ...]:
    lo, hi = (int(v.split(".")[1]) for v in (first, last))
    return tuple(f"3.{n}" for n in range(lo, hi + 1))


def test_every_torch_minor_has_pythons_and_rocm_indexes() -> None:
    data = facts.compat().torch
    assert data, "compat.yaml lists no torch"
    for minor, entry in data.items():
        assert re.fullmatch(r"[0-9]+\.[0-9]+", minor), minor
        assert entry.python and entry.pytorch.gfx, minor
        assert entry.pytorch.rocm or minor == "2.15", minor  # 2.15: no ROCm index verified yet
        assert all(re.fullmatch(r"3\.[0-9]+", p) for p in entry.python), minor
        assert list(entry.python) == sorted(entry.python, key=by_version), minor
        assert all(re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", r) for r in entry.pytorch.rocm), minor
        assert len(set(entry.pytorch.gfx)) == len(entry.pytorch.gfx), minor


@pytest.mark.parametrize("minor", list(FACTS_TORCH))
def test_torch_data_matches_the_facts(minor: str) -> None:
    vision, audio, rocm, first, last = FACTS_TORCH[minor]
    entry = facts.compat().torch[minor]
    assert (entry.torchvision, entry.torchaudio) == (vision, audio)
    assert entry.pytorch.rocm == rocm
    assert entry.python == _python_range(first, last)
    assert set(entry.pytorch.gfx) == FACTS_WHEEL_GFX[minor]


def test_every_torch_minor_of_the_data_is_in_the_facts() -> None:
    assert set(facts.compat().torch) == set(FACTS_TORCH)


def test_therock_is_its_own_release_line() -> None:
    """Section 3: TheRock's releases (version.json at tags therock-7.9.0 .. therock-7.14; 10.0 released on whl-next),
    the torch minors each builds, and the HIP it ships (HIP stays 7.x: ROCm 10.0 has HIP 7.15)."""
    releases = facts.compat().therock
    assert {line: (r.version, r.torch) for line, r in releases.items()} == {
        "7.9": ("7.9.0", ("2.9",)), "7.10": ("7.10.0", ("2.7", "2.8", "2.9")),
        "7.11": ("7.11.0", ("2.7", "2.8", "2.9")), "7.12": ("7.12.0", ("2.8", "2.9", "2.10")),
        "7.13": ("7.13.0", ("2.8", "2.9", "2.10", "2.11")), "7.14": ("7.14.0", ("2.10", "2.11", "2.12")),
        "10.0": ("10.0.0", ("2.11", "2.12", "2.13")), "10.1": ("10.1.0", ("2.11", "2.12", "2.13"))}
    # 10.1: a best-known-configuration branch and nightlies only, no release branch (therock_builds.yaml)
    assert [line for line, r in releases.items() if r.prerelease] == ["10.1"]
    assert releases["10.0"].hip == ("7.15", "10.0") and releases["7.14"].hip == ("7.14",)
    assert {line: r.index for line, r in releases.items()} == {
        "7.9": "per-family", "7.10": "per-family", "7.11": "per-family", "7.12": "per-family",
        "7.13": "multi-arch", "7.14": "multi-arch", "10.0": "whl-next", "10.1": "whl-next"}
    assert not {"7.1", "7.2"} & set(releases), "pytorch.org's ROCm labels are not TheRock releases"
    assert set(facts.compat().therock_dev_only_targets) == {"gfx900", "gfx906", "gfx90c"}


def test_wheel_indexes() -> None:
    assert facts.compat().indexes == {"pytorch": PYTORCH + "{platform}", "therock-whl-next": WHL_NEXT,
                                        "therock-multi-arch": THEROCK, "therock-per-family": PER_FAMILY + "{family}/"}


def test_every_wheel_target_is_a_gfx_target_of_a_family() -> None:
    """Every target the wheels carry is spelled like gfx.yaml's, and is in one of its families."""
    family_targets = {t for f in facts.gfx_families().values() for t in f.targets}
    wheel_targets = {t for e in facts.compat().torch.values() for t in e.pytorch.gfx}
    assert all(GFX_RE.fullmatch(t) for t in wheel_targets), sorted(wheel_targets)
    assert wheel_targets - family_targets == set()


def test_every_family_names_its_targets() -> None:
    families = facts.gfx_families()
    assert ALL_TARGETS not in families
    for name, family in families.items():
        assert family.targets and family.gpus, name
        assert all(GFX_RE.fullmatch(t) for t in family.targets), name
        stem = name.split("-")[0]
        if stem.endswith("X"):
            assert all(t.startswith(stem[:-1]) for t in family.targets), name
        else:
            assert family.targets == (stem,), name
        assert family.official_since is None or re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", family.official_since)


@pytest.mark.parametrize("name", list(FACTS_GFX))
def test_gfx_data_matches_the_facts(name: str) -> None:
    targets, since = FACTS_GFX[name]
    family = facts.gfx_families()[name]
    assert (family.targets, family.official_since) == (targets, since)


def test_every_family_of_the_data_is_in_the_facts() -> None:
    assert set(facts.gfx_families()) == set(FACTS_GFX)


@pytest.mark.parametrize("name", list(FACTS_OS))
def test_os_data_matches_the_facts(name: str) -> None:
    python, since = FACTS_OS[name]
    release = facts.os_releases()[name]
    assert release.python == python
    if since is not None:
        assert release.rocm_since == since


# --- compatibility rules in the matrix: product cells, includes, overrides ----------------------------------

def test_product_cells_that_break_a_rule_are_dropped_with_the_reason(tmp_path: Path) -> None:
    # pytorch.org has torch 2.9 wheels for ROCm 6.3/6.4 only, and none of them carries gfx950.
    expansion = expand_text(tmp_path, PRODUCT.replace('"2.12.1"', '"2.9.1"'))
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


def test_include_that_breaks_a_rule_is_an_error_naming_the_reason(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, BASE + textwrap.dedent("""\
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
    file = write_matrix(tmp_path, BASE + textwrap.dedent("""\
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
    expansion = expand_text(tmp_path, BASE + textwrap.dedent("""\
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
    expansion = expand_text(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.12.0', "
                                     "override: {reason: 'no rule is broken here'}"))
    assert len(expansion.cells) == 2 and expansion.overridden == [] and expansion.dropped == []


def test_a_matrix_whose_every_cell_is_dropped_still_says_why(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2, rocm7.1]\n  torch: ['2.13.0']\n"
                      "  gfx: [gfx94X-dcgpu, gfx1151]\n  channel: [therock]\n  flavor: [runtime, devel]\n")
    run = builder_cli("matrix", "--matrix", str(matrix), "--explain")
    assert run.returncode == 2 and "expands to no cells that can be built" in run.stderr
    assert "4 dropped by channel-wheels: TheRock has no ROCm 7.2 release" in run.stderr
    assert "4 dropped by channel-wheels: TheRock has no ROCm 7.1 release" in run.stderr


def test_explain_prints_each_reason_once_with_its_count_and_a_per_rule_summary() -> None:
    run = builder_cli("matrix", "--matrix", "matrix.yaml", "--explain")
    assert run.returncode == 0, run.stderr
    dropped = run.stdout.split("cells of the product dropped")[1]
    reasons = [line for line in dropped.splitlines() if line.startswith("  ") and not line.startswith("      ")]
    # The product keeps old lines (TheRock 7.12/7.13) only so that --explain says why they are dropped, and the
    # families added for slim images have excludes of their own: a few more distinct reasons, still a screen.
    assert len(reasons) == len(set(reasons)) and len(reasons) < 60, reasons
    lines = run.stdout.split("ROCm lines of the product, kept or dropped:")[1].split("cells of the product")[0]
    assert "therock rocm10.0: kept: 144 cells, torch 2.13.0, 2.12.0; not torch 2.14.1: channel-wheels" in lines
    # every family TheRock 10.0's build defines and its stable index serves has a slim image: one rule for all,
    # families without a test runner in TheRock's CI (gfx125X-dcgpu, gfx1152, gfx101X-dgpu) included
    assert "Families TheRock 10.0's whl-next index serves without a per-family image here: none" in run.stdout
    assert "therock rocm7.14: kept: 14 cells, torch 2.12.0;" in lines
    # 10.1 has no release branch: out of production, with what would admit it
    assert "therock rocm10.1: dropped\n      therock-released: TheRock 10.1 is not released yet" in lines
    assert "what would admit it: a therock-10.1 tag of ROCm/TheRock (release/therock-10.1 was cut" in lines
    assert "therock rocm7.12: dropped\n      channel-wheels: TheRock 7.12 builds no torch 2.12; TheRock lines that " \
           "do: 7.14 (whl-multi-arch), 10.0 (whl-next) [decided on TheRock 7.12, per-family index " \
           "https://repo.amd.com/rocm/whl/<family>/]" in lines
    assert "240 cells: rocm7.1_" in dropped
    assert dropped.strip().splitlines()[-1].startswith("cells dropped per rule (a cell may break several): ")
