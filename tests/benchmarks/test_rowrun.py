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
