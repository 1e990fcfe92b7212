"""`builder diff` and `builder reproduce` (builder.cli.audit): the diff printed as a table, exit codes."""

from __future__ import annotations

import io

import pytest
from typer.testing import CliRunner

from builder.audit import diff
from builder.cli import audit
from builder.cli.app import app
from builder.validate.sbom import Package
from tests.fakes.consoles import shown

__all__ = ["shown"]  # the fixture, used by name

A, B = "r.io/ns/pytorch:a", "r.io/ns/pytorch@sha256:" + "b" * 64


def inventory(ref: str, packages: list[Package], skipped: int = 0) -> diff.Inventory:
    return diff.Inventory(diff.parse_ref(ref, "A"), "sha256:" + "d" * 64, "sha256:" + "e" * 64, packages, skipped)


def test_print_diff_names_both_images_and_one_row_per_change(shown: io.StringIO) -> None:
    a = inventory(A, [Package("deb", "libc6", "1", "amd64"), Package("pypi", "six", "1.0")])
    b = inventory(B, [Package("deb", "libc6", "2", "amd64"), Package("pypi", "torch", "2.13.0")])
    audit.print_diff(a, b, diff.diff(a.packages, b.packages))
    lines = shown.getvalue().splitlines()
    assert lines[0] == f"A: {A}@sha256:{'d' * 64} (2 packages)" and lines[1] == f"B: {B} (2 packages)"
    rows = [line.split() for line in lines if "│" in line and "kind" not in line]
    assert [r[1:6:2] for r in rows] == [["~", "os", "libc6"], ["-", "python", "six"], ["+", "python", "torch"]]
    assert lines[-1] == "1 added, 1 removed, 1 changed"


def test_print_diff_of_the_same_packages_says_so(shown: io.StringIO) -> None:
    same = inventory(A, [Package("pypi", "six", "1.0")])
    audit.print_diff(same, same, diff.diff(same.packages, same.packages))
    assert shown.getvalue().splitlines()[-1] == "no package changed"


def test_diff_exits_1_when_entries_were_left_out_or_an_image_has_no_sbom(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diff, "fetch", lambda ref, insecure: inventory(str(ref), [], skipped=2))
    result = CliRunner().invoke(app, ["diff", A, B])
    assert result.exit_code == 1 and "2 SBOM component(s) of no readable shape" in result.output

    def no_sbom(ref: diff.ImageRef, insecure: frozenset[str]) -> diff.Inventory:
        raise diff.NoSbom(f"{ref} has no SBOM attached")
    monkeypatch.setattr(diff, "fetch", no_sbom)
    result = CliRunner().invoke(app, ["diff", A, B])
    assert result.exit_code == 1 and f"error: {A} has no SBOM attached" in result.output


def test_diff_of_a_bad_reference_exits_2() -> None:
    result = CliRunner().invoke(app, ["diff", "pytorch:latest", B])
    assert result.exit_code == 2 and "is no image reference" in result.output
