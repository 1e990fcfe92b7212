"""The runner pool: runners.yaml beside the matrix read through the bounded YAML reader into a typed pool, bad
files refused naming file, line and key; --runner-disk a one-runner pool, --runner a runner of the pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.publish import runners, sizes
from tests.fakes.checkout import ROOT

GIB = 1 << 30
GOOD = "default: small\nrunners:\n  big: 100G\n  small: 48G\n"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "matrix.yaml").write_text("# the pool is read from beside it\n")
    (tmp_path / runners.FILE).write_text(text)
    return tmp_path / "matrix.yaml"


def test_a_pool_is_its_runners_smallest_first_and_its_default(tmp_path: Path) -> None:
    pool = runners.beside(write(tmp_path, GOOD))
    assert pool.runners == (runners.Runner("small", 48 * GIB), runners.Runner("big", 100 * GIB))
    assert pool.default == "small" and pool.source == tmp_path / runners.FILE
    assert pool.fitting(48 * GIB) == pool.runners[0] and pool.fitting(48 * GIB + 1) == pool.runners[1]
    assert pool.fitting(100 * GIB + 1) is None and pool.largest.label == "big"


def test_the_repository_pool_is_the_standard_runner_by_default_and_a_larger_one() -> None:
    pool = runners.beside(ROOT / "matrix.yaml")
    assert pool.default == runners.RUNNER and pool.runners[0] == runners.Runner()
    assert pool.runners[0].disk == sizes.DEFAULT_RUNNER_DISK and len(pool.runners) > 1


def test_a_matrix_with_no_pool_beside_it_plans_on_the_standard_runner(tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text("")
    assert runners.beside(tmp_path / "matrix.yaml") == runners.HOSTED == runners.one(runners.Runner())


@pytest.mark.parametrize(("text", "where"), [
    ("runners:\n  a: 48G\n", ":1: (top level)"),
    ("default: c\nrunners:\n  a: 48G\n", ":1: default: names no runner"),
    ("default: a\nrunners:\n  a: 48\n  b: 4.5G\n", ":4: runners.b: '4.5G' is not a size"),
    ("default: a\nrunners:\n  a: 0G\n", ":3: runners.a: '0G' is not a size"),
    ("default: a\nrunners:\n  a: [48G]\n", ":3: runners.a: the disk it has free is a size"),
    ("default: a\nrunners:\n  a: 48G\n  a b: 60G\n", ":4: runners.a b: not a runner label"),
    ("default: a\nrunners:\n  a: 48G\n  -x: 60G\n", ":4: runners.-x: not a runner label"),
    ("default: a\nrunners:\n  a: 48G\n  a: 60G\n", ":4: runners.a: duplicate key"),
    ("default: a\nrunners: []\n", ":2: runners: a mapping of at least one runner"),
    ("default: a\nrunners:\n  a: &d 48G\n  b: *d\n", ":4: (alias)"),
    ("default: a\nrunners:\n" + "".join(f"  r{k}: 1G\n" for k in range(40)), ":2: runners: 40 runners, over"),
    ("default: a\nrunners: {a: 48G}\nextra: 1\n", ":1: (top level): a pool is a mapping of exactly two keys"),
])
def test_a_bad_pool_file_is_an_error_naming_its_file_line_and_key(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(InputError) as caught:
        runners.beside(write(tmp_path, text))
    assert f"{tmp_path / runners.FILE}{where}" in str(caught.value)


def test_a_pool_file_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / runners.FILE).mkdir()
    with pytest.raises(InputError, match="cannot read"):
        runners.beside(tmp_path / "matrix.yaml")
    (tmp_path / runners.FILE).rmdir()
    (tmp_path / runners.FILE).symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError, match="cannot read"):
        runners.beside(tmp_path / "matrix.yaml")


def test_runner_disk_is_a_one_runner_pool_and_runner_alone_a_runner_of_the_pool(tmp_path: Path) -> None:
    matrix = write(tmp_path, GOOD)
    assert runners.resolve(matrix, None, None) == runners.beside(matrix)
    assert runners.resolve(matrix, None, "60G").runners == (runners.Runner("small", 60 * GIB),), "the default's label"
    assert runners.resolve(matrix, "x", "60G").runners == (runners.Runner("x", 60 * GIB),)
    assert runners.resolve(matrix, "big", None).runners == (runners.Runner("big", 100 * GIB),)
    with pytest.raises(InputError, match="--runner: 'huge' is not a runner of the pool"):
        runners.resolve(matrix, "huge", None)
    with pytest.raises(InputError, match="--runner-disk"):
        runners.resolve(matrix, None, "60P")


@pytest.mark.parametrize("label", ["", "a b", "x" * 101, "-lead", "ubuntu;rm"])
def test_a_runner_label_a_workflow_cannot_take_is_refused(tmp_path: Path, label: str) -> None:
    with pytest.raises(InputError, match="--runner"):
        runners.resolve(write(tmp_path, GOOD), label, "60G")
