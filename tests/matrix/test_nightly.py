"""builder.matrix.nightly: pytorch.org's nightly view (builder/data/nightly.yaml), kept apart from production.

The nightly data check: the view parses, names only targets gfx.yaml knows, says which facts are not verified, and no
production rule or cell reads it.
"""

from __future__ import annotations

from pathlib import Path

from builder.core import facts
from builder.matrix import nightly
from builder.matrix.expand import expand_matrix

ROOT = Path(__file__).resolve().parents[2]


def test_the_nightly_data_check_reports_the_view_and_finds_no_problem() -> None:
    assert nightly.problems() == []
    text = "\n".join(nightly.report())
    assert "rocm7.14: gfx908, gfx90a, gfx942, gfx950" in text
    assert "rocm10.0: targets not verified" in text  # pytorch/test-infra#8670 moved nightlies to 7.14 and 10.0
    assert "rocm7.2: no longer built" in text
    assert "not verified: gfx1250 joins the nightly wheel arch list" in text  # pytorch/pytorch#196610
    assert "gfx1250" not in (nightly.view().rocm["7.14"].gfx or ())  # a reported change is not applied


def test_an_unknown_target_or_a_missing_source_is_a_problem() -> None:
    data = nightly.view()
    line = data.rocm["7.14"].model_copy(update={"gfx": ("gfx9999",), "source": " "})
    broken = data.model_copy(update={"rocm": {"7.14": line}})
    assert nightly.problems(broken) == ["nightly rocm7.14: unknown gfx target gfx9999", "nightly rocm7.14: no source"]


def test_only_the_nightly_module_reads_the_nightly_view() -> None:
    readers = [p.relative_to(ROOT).as_posix() for p in (ROOT / "builder").rglob("*.py")
               if "nightly.yaml" in p.read_text(encoding="utf-8") or "matrix.nightly" in p.read_text(encoding="utf-8")
               or "import nightly" in p.read_text(encoding="utf-8")]
    assert readers == ["builder/matrix/nightly.py"]


def test_the_production_matrix_builds_no_nightly_wheel() -> None:
    """A ROCm line only the nightlies build (10.0 on pytorch.org) is no production index: no cell installs from
    whl/nightly, and every pytorch.org ROCm cell's index is a release index of its torch minor in compat.yaml."""
    cells = expand_matrix(ROOT / "matrix.yaml").cells
    assert all("/nightly/" not in c.index_url for c in cells)
    for cell in cells:
        if cell.channel == "pytorch" and cell.rocm is not None:
            assert cell.rocm in facts.compat().torch[".".join(cell.torch.split(".")[:2])].pytorch.rocm
    assert "10.0" not in {r for m in facts.compat().torch.values() for r in m.pytorch.rocm}
