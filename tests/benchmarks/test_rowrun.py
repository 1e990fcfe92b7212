"""bench_row's engine side: how many shared stages `builder stages` built, read from its lines."""

from __future__ import annotations

import pytest

from benchmarks.support import rowrun

# The lines builder/cli/stages.py's run_stages prints (rich, no terminal: the markup gone).
BUILT = "built base-3f2a (base of 15 combinations, from debian-12-rocm7.2) -> 127.0.0.1:5000/bench:base-3f2a"
FAILED = "failed torch-9c1d (torch of 15 combinations, from debian-12-rocm7.2) -> 127.0.0.1:5000/bench:torch-9c1d"


@pytest.mark.parametrize(("output", "counts"), [
    (f"{BUILT}\n{BUILT.replace('base-3f2a', 'torch-1b2c')}\n", (2, 0)),
    (f"{BUILT}\n{FAILED}\n  the build failed: no space left on device\n", (1, 1)),
    ("no stage is shared by two of the 1 combinations: nothing to build\n", (0, 0)),
    ("", (0, 0)),
    ("rebuilt nothing\nthe failed stage\n", (0, 0)),
])
def test_the_stages_built_and_failed_are_counted_from_their_lines(output: str, counts: tuple[int, int]) -> None:
    assert rowrun.stages_built(output) == counts


def test_the_stages_sibling_is_another_rocm_line_with_its_own_index_and_the_rows_index_kept() -> None:
    url = "http://127.0.0.1:4000/rr0123456789/simple"
    lines = rowrun.sibling_lines(url)
    assert lines["rocm7.2"] == url and set(lines) == {rowrun.SIBLING, "rocm7.2"}
    assert lines[rowrun.SIBLING] != url and lines[rowrun.SIBLING].endswith("/simple")
