"""builder.audit.origin: which of this checkout's matrices holds a published image's cell."""

from __future__ import annotations

from pathlib import Path

from builder.audit import origin
from tests.fakes.checkout import ROOT

EXAMPLE_RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"  # a cell of examples/local.yaml only


def test_a_matrix_without_the_images_cell_points_at_the_checkouts_matrix_that_has_it() -> None:
    said = origin.not_in_matrix("r/ns/pytorch:t", EXAMPLE_RUNTIME, ROOT / "matrix.yaml", True, ROOT)
    assert said == (f"r/ns/pytorch:t is the image of cell {EXAMPLE_RUNTIME!r}, and {ROOT / 'matrix.yaml'} (the "
                    f"default) has no such cell; it is a cell of {ROOT / 'examples' / 'local.yaml'}: pass --matrix "
                    f"{ROOT / 'examples' / 'local.yaml'}")



def test_a_cell_no_matrix_here_has_asks_for_the_one_it_was_published_from(tmp_path: Path) -> None:
    said = origin.not_in_matrix("r/ns/pytorch:t", "cpu_nowhere", ROOT / "matrix.yaml", False, tmp_path)
    assert said.endswith(f"and {ROOT / 'matrix.yaml'} has no such cell: pass --matrix with the matrix it was "
                         "published from")
