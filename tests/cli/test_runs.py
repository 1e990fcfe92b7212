"""builder.cli.runs: the summary of a run: failures first with what to look at, a row per image, where it went."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from builder.cli import runs
from builder.publish.record import ImageReport
from builder.validate.runner import Check
from tests.fakes.consoles import shown

__all__ = ["shown"]  # the fixture, used by name


def report(tag: str, state: str = "published", **fields: object) -> ImageReport:
    return ImageReport(tag=tag, repository="pytorch", tags=[tag], immutable_tag=f"{tag}-h",  # type: ignore[arg-type]
                       content_hash="sha256:" + "1" * 64, state=state, **fields)


@pytest.mark.parametrize(("statuses", "said"), [
    ([], "-"), (["pass"] * 12 + ["warn"], "12 passed, 1 warning"), (["warn", "warn", "fail", "skip"],
                                                                    "1 failed, 2 warnings, 1 skipped"),
])
def test_check_counts(statuses: list[str], said: str) -> None:
    assert runs.check_counts([Check("s", str(i), s) for i, s in enumerate(statuses)]) == said


@pytest.mark.parametrize(("fields", "said"), [
    ({}, "-"), ({"image_bytes": 2_000_000_000}, "2.00 GB"),
    ({"image_bytes": 2_000_000_000, "compressed_bytes": 900_000_000}, "2.00 GB (900 MB compressed)"),
    ({"image_bytes": 2_000_000_000, "compressed_bytes": 900_000_000, "pushed_bytes": 0},
     "2.00 GB (900 MB compressed, 0 B pushed)"),
    ({"image_bytes": 2_000_000_000, "compressed_bytes": 900_000_000, "pushed_bytes": 5_000_000},
     "2.00 GB (900 MB compressed, 5 MB pushed)"),
])
def test_sizes_installed_then_compressed_then_pushed(fields: dict[str, int], said: str) -> None:
    assert runs._sizes(report("t", **fields)) == said


def test_a_build_failure_shows_its_log_tail_and_path_before_the_table(shown: io.StringIO) -> None:
    failed = report("bad", "failed", failed_stage="build", failure="exit 1", log_tail=[f"l{i}" for i in range(20)])
    runs.print_reports([failed, report("good", digest="sha256:" + "2" * 64, pushed=True)], "r.io/ns", "",
                       Path("/logs"))
    text = shown.getvalue()
    assert text.index("build failed bad: exit 1") < text.index("publish to r.io/ns")
    assert "    l5\n" in text and "    l4\n" not in text and "full log: /logs/bad.log" in text
    assert f"pushed r.io/ns/pytorch:good-h@sha256:{'2' * 64}" in text
    assert "1 built, 0 unchanged, 1 failed" in text


def test_a_rehearsal_says_nothing_was_pushed(shown: io.StringIO) -> None:
    runs.print_reports([report("a", "validated"), report("b", "would-skip", moved=["latest"])], "r.io/ns", "no push")
    text = shown.getvalue()
    assert "no push: publish to r.io/ns" in text and "would move latest" in text
    assert "1 built and validated, 1 unchanged, 0 failed; nothing pushed, no tag moved" in text


def test_a_plan_counts_what_would_be_built(shown: io.StringIO) -> None:
    runs.print_reports([report("a", "would-build"), report("b", "would-skip")], "r.io/ns", "plan")
    assert "1 would be built, 1 unchanged; nothing built" in shown.getvalue()
