"""builder.audit.diff: image references, and the packages added, removed or changed between two SBOMs."""

from __future__ import annotations

import pytest

from builder.audit import diff
from builder.core.errors import InputError
from builder.validate import sbom


def test_diff_says_added_removed_and_changed_per_ecosystem() -> None:
    a = [sbom.Package("deb", "libc6", "2.36-9+deb12u1", "amd64"),
         sbom.Package("deb", "tzdata", "2024a-0+deb12u1", "all"),
         sbom.Package("deb", "perl-base", "5.36.0-7", "amd64"), sbom.Package("pypi", "numpy", "2.1.0", None, "ab" * 32),
         sbom.Package("pypi", "typing_extensions", "4.12.2"), sbom.Package("pypi", "pip", "24.0")]
    b = [sbom.Package("deb", "libc6", "2.36-9+deb12u7", "amd64"), a[1],
         sbom.Package("pypi", "NumPy", "2.2.0"), sbom.Package("pypi", "typing-extensions", "4.12.2"),
         sbom.Package("pypi", "pip", "24.0"), sbom.Package("pypi", "torch", "2.13.0")]
    found = diff.diff(a, b)
    assert [(c.kind, c.ecosystem, c.name, c.before, c.after) for c in found.changes] == [
        ("changed", "deb", "libc6", "2.36-9+deb12u1", "2.36-9+deb12u7"),
        ("removed", "deb", "perl-base", "5.36.0-7", None),
        ("changed", "pypi", "numpy", "2.1.0", "2.2.0"),  # names compare as PEP 503 normalises them
        ("added", "pypi", "torch", None, "2.13.0")]
    assert diff.diff(a, list(reversed(a))).changes == []



@pytest.mark.parametrize("text", ["127.0.0.1:5000/ns/pytorch:tag_1.0", "ghcr.io/org/pytorch@sha256:" + "a" * 64,
                                  "localhost:5000/a/b/c:latest"])
def test_good_references(text: str) -> None:
    assert str(diff.parse_ref(text, "A")) == text



@pytest.mark.parametrize("text", ["pytorch:latest", "ghcr.io/org/pytorch", "ghcr.io/org/PyTorch:x",
                                  "ghcr.io/org/pytorch@sha256:abc", "ghcr.io/org/pytorch:-x", "ghcr.io/x/y:a b",
                                  "ghcr.io/org/pytorch:tag@sha256:" + "a" * 64, "x" * 700])
def test_bad_references_are_input_errors(text: str) -> None:
    with pytest.raises(InputError):
        diff.parse_ref(text, "A")


def test_a_foreign_architecture_is_its_own_package_and_several_versions_compare_as_a_set() -> None:
    native, foreign = sbom.Package("deb", "libc6", "1", "amd64"), sbom.Package("deb", "libc6", "1", "i386")
    found = diff.diff([native], [native, foreign])
    assert [(c.kind, c.name) for c in found.changes] == [("added", "libc6:i386")]
    twice = [sbom.Package("pypi", "six", "1.0"), sbom.Package("pypi", "six", "2.0")]
    assert [(c.before, c.after) for c in diff.diff(twice, twice[:1]).changes] == [("1.0, 2.0", "1.0")]


def test_as_json_sorts_changes_by_kind_and_counts_each_sides_packages() -> None:
    a, b = [sbom.Package("pypi", "six", "1.0"), sbom.Package("pypi", "pip", "24")], [sbom.Package("pypi", "six", "2")]
    found = diff.diff(a, b)
    left = diff.Inventory(diff.parse_ref("r.io/ns/x:a", "A"), "sha256:" + "a" * 64, "sha256:" + "b" * 64, a, 0)
    right = diff.Inventory(diff.parse_ref("r.io/ns/x:b", "B"), "sha256:" + "c" * 64, "sha256:" + "d" * 64, b, 0)
    shown = diff.as_json(left, right, found)
    assert shown["a"] == {"ref": "r.io/ns/x:a", "digest": "sha256:" + "a" * 64, "sbom": "sha256:" + "b" * 64,
                          "packages": 2}
    assert shown["added"] == [] and [r["name"] for r in shown["removed"]] == ["pip"]
    assert shown["changed"] == [{"ecosystem": "pypi", "name": "six", "before": "1.0", "after": "2"}]
    assert [c.name for c in found.of("removed")] == ["pip"]
    assert left.warnings == []
    left.skipped = 2
    assert left.warnings == ["r.io/ns/x:a: 2 SBOM component(s) of no readable shape left out of the diff"]
