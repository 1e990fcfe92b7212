"""benchmarks/support/results.py: the runs a model reads its figures from."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.support import results


def test_a_run_is_appended_and_read_back_with_what_it_ran(tmp_path: Path) -> None:
    first = results.record("bench_x", {"wall_s": 12.5}, 0.5, folder=tmp_path, argv=["benchmarks/bench_x.py", "-q"])
    results.record("bench_x", {"peak": 3.0}, 0.7, folder=tmp_path, argv=["benchmarks/bench_x.py"])
    runs = results.load("bench_x", folder=tmp_path)
    assert [r.figures for r in runs] == [{"wall_s": 12.5}, {"peak": 3.0}]
    assert runs[0] == first and first.command == "python benchmarks/bench_x.py -q"
    assert results.latest("bench_x", "wall_s", folder=tmp_path) == first
    assert results.latest("bench_x", "peak", "wall_s", folder=tmp_path) is None
    assert "python benchmarks/bench_x.py -q" in first.cite()


def test_a_benchmark_never_recorded_has_no_runs(tmp_path: Path) -> None:
    assert results.load("bench_none", folder=tmp_path) == []


@pytest.mark.parametrize("text", ['{"runs": [{"date": "x"}]}', "not json", '{"runs": [], "more": 1}'])
def test_a_file_not_written_by_record_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / "bench_x.json").write_text(text)
    with pytest.raises(results.ResultsError, match=r"bench_x\.json"):
        results.load("bench_x", folder=tmp_path)


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "bench_x.json").write_bytes(b" " * (results.LIMIT + 1))
    with pytest.raises(results.ResultsError, match="over"):
        results.load("bench_x", folder=tmp_path)


def test_a_name_that_is_not_a_module_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        results.path_of("../x", tmp_path)
