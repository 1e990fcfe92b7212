"""builder.matrix.releases: the one torch (and companions) each TheRock line built; every torch version cited.

Cells are expanded from small matrix files as a maintainer writes them; the data is builder/data/compat.yaml, whose
torch_versions cite each line's own files (ROCm/TheRock promote_from_rc_to_final_test.py @ 8834ca38 for 7.9,
docs/packaging/versioning.md @ 418cd5f6 for 7.10's 2.9.1, ...).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from builder.core import facts
from builder.core.facts import torch_minor
from builder.matrix import explain, releases
from builder.matrix.expand import Expansion, expand_matrix

ROOT = Path(__file__).resolve().parents[2]
ANCHOR = "include:\n  - {os: debian-12, platform: cpu, torch: '2.13.0', tag: anchor}\n"


def therock(tmp_path: Path, line: str, torch: str, gfx: str = "gfx94X-dcgpu") -> Expansion:
    file = tmp_path / "m.yaml"
    file.write_text(f"matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm{line}]\n  torch: [{torch}]\n  gfx: [{gfx}]\n"
                    f"  channel: [therock]\n{ANCHOR}", encoding="utf-8")
    return expand_matrix(file)


def version_drops(expansion: Expansion) -> list[str]:
    return [d.reason for d in expansion.dropped if d.rule == "therock-torch-version"]


# --- the two cases: one patch per line ------------------------------------------------------------------

@pytest.mark.parametrize(("line", "asked", "built", "gfx"), [
    ("7.9", "2.9.1", "2.9.0", "gfx94X-dcgpu"),   # therock-7.9.0 (2025-10-15) predates 2.9.1 (2025-11-12)
    ("7.10", "2.9.0", "2.9.1", "gfx94X-dcgpu"),  # versioning.md: 2.9.1+rocm7.10.0
    ("7.11", "2.9.0", "2.9.1", "gfx1151"),
    ("7.12", "2.9.0", "2.9.1", "gfx1151"),
    ("7.13", "2.9.0", "2.9.1", "gfx1151"),
    ("7.10", "2.7.0", "2.7.1", "gfx94X-dcgpu"),
    ("7.14", "2.12.1", "2.12.0", "gfx94X-dcgpu"),
])
def test_a_patch_the_line_did_not_build_is_dropped_naming_the_one_it_did(tmp_path: Path, line: str, asked: str,
                                                                          built: str, gfx: str) -> None:
    expansion = therock(tmp_path, line, f"'{asked}'", gfx)
    [reason] = version_drops(expansion)
    minor = torch_minor(asked)
    assert reason.startswith(f"TheRock {line} built torch {minor} as torch {built}, ")
    assert f"not torch {asked}: use those versions" in reason
    assert facts.compat().therock[line].torch_versions[minor].source in reason
    assert [c.tag for c in expansion.cells] == ["anchor"]


def test_explain_says_which_patch_the_line_built(tmp_path: Path) -> None:
    """--explain's per-line verdict carries the drop's reason: the version the line did build."""
    expansion = therock(tmp_path, "7.9", "'2.9.1'")
    [verdict] = [v for v in explain.line_verdicts(expansion) if v.platform == "rocm7.9"]
    assert verdict.verdict.startswith("dropped: therock-torch-version: TheRock 7.9 built torch 2.9 as torch 2.9.0, "
                                      "torchvision 0.24.0, torchaudio 2.9.0 (+rocm7.9.0; ")


@pytest.mark.parametrize(("line", "torch", "companions"), [
    ("7.9", "2.9.0", ("0.24.0", "2.9.0")),
    ("7.10", "2.9.1", ("0.24.0", "2.9.0")),   # not pytorch.org's 0.24.1 / 2.9.1
    ("7.10", "2.7.1", ("0.22.1", "2.7.1a0")),  # a pre-release torchaudio
    ("10.0", "2.13.0", ("0.28.0", "2.11.0.2")),
])
def test_the_patch_the_line_built_is_kept_with_its_own_companions(tmp_path: Path, line: str, torch: str,
                                                                  companions: tuple[str, str]) -> None:
    [cell] = [c for c in therock(tmp_path, line, f"'{torch}'").cells if c.tag != "anchor"]
    assert (cell.torchvision, cell.torchaudio) == companions
    assert cell.torch_wheel == f"{torch}+rocm{facts.compat().therock[line].version}"


@pytest.mark.parametrize(("line", "torch", "pin", "built"), [
    ("7.10", "2.7.1", "torchaudio: '2.7.1'", "torchaudio 2.7.1a0"),
    ("7.10", "2.9.1", "torchvision: '0.24.1'", "torchvision 0.24.0"),
    ("10.0", "2.13.0", "torchaudio: '2.11.0'", "torchaudio 2.11.0.2"),
])
def test_a_companion_pin_the_line_did_not_build_is_dropped(tmp_path: Path, line: str, torch: str, pin: str,
                                                           built: str) -> None:
    [reason] = version_drops(therock(tmp_path, line, f"{{version: '{torch}', {pin}}}"))
    asked = pin.replace(": '", " ").rstrip("'")
    assert f"{built}" in reason.split(" (+rocm")[0] and f"not {asked}: use those versions" in reason


def test_a_minor_whose_patch_is_not_verified_builds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = facts.compat()
    line = data.therock["7.12"]
    unknown = line.torch_versions["2.8"].model_copy(update={"torch": None, "source": "nothing read names it"})
    lines = {**data.therock, "7.12": line.model_copy(update={"torch_versions": {**line.torch_versions,
                                                                                 "2.8": unknown}})}
    monkeypatch.setattr(facts, "compat", lambda: data.model_copy(update={"therock": lines}))
    [reason] = version_drops(therock(tmp_path, "7.12", "'2.8.0'", "gfx1151"))
    assert reason == ("which torch 2.8 patch TheRock 7.12 built is not verified (nothing read names it): no cell of "
                      "torch 2.8 is built on that line")


# --- the data: every line, every minor, every source ------------------------------------------------------------

@pytest.mark.parametrize("line", list(facts.compat().therock))
def test_every_minor_a_line_builds_has_its_exact_versions_and_source(line: str) -> None:
    release = facts.compat().therock[line]
    minors = set(release.torch) | set(release.per_family.torch if release.per_family else ())
    assert set(release.torch_versions) == minors
    for minor, built in release.torch_versions.items():
        assert built.source.strip(), (line, minor)
        if built.torch is None:
            continue
        assert torch_minor(built.torch) == minor
        assert releases.uncited([built.torch]) == [], (line, minor)  # a line builds published releases only
        paired = facts.compat().torch[minor]
        for name, version, want in (("torchvision", built.torchvision, paired.torchvision),
                                    ("torchaudio", built.torchaudio, paired.torchaudio)):
            assert version is None or torch_minor(version) == want, (line, minor, name)


def test_every_torch_release_cites_its_page() -> None:
    for version, record in facts.compat().torch_releases.items():
        assert record.source == f"https://pypi.org/project/torch/{version}/"
        assert Version(version).local is None and not Version(version).is_prerelease
    dates = [r.published for _, r in sorted(facts.compat().torch_releases.items(), key=lambda kv: Version(kv[0]))]
    assert dates == sorted(dates)  # a later release is never published before an earlier one


# --- the production matrix -----------------------------------------------------------------------------------

def matrix_versions(text: str) -> list[str]:
    data = yaml.safe_load(text)
    items = [*data["matrix"]["torch"], *(inc["torch"] for inc in data.get("include", []))]
    return [str(t["version"] if isinstance(t, dict) else t) for t in items]


def test_every_torch_version_in_the_production_matrix_is_a_cited_release() -> None:
    versions = matrix_versions((ROOT / "matrix.yaml").read_text(encoding="utf-8"))
    assert versions and releases.uncited(versions) == []


def test_a_matrix_naming_an_unpublished_torch_fails_the_check(tmp_path: Path) -> None:
    text = (ROOT / "matrix.yaml").read_text(encoding="utf-8").replace('"2.14.1"', '"2.14.2"')
    assert releases.uncited(matrix_versions(text)) == ["2.14.2"]
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: ['2.14.2']\n" + ANCHOR, encoding="utf-8")
    [drop] = expand_matrix(file).dropped
    assert (drop.rule, drop.reason) == ("torch-release", "torch 2.14.2 is not a cited release (compat.yaml "
                                        "torch_releases: torch 2.14 releases are 2.14.0, 2.14.1 listed, each with its "
                                        "source)")


def test_no_kept_therock_cell_of_production_asks_for_a_patch_its_line_did_not_build() -> None:
    cells = [c for c in expand_matrix(ROOT / "matrix.yaml").cells if c.therock_release is not None]
    assert cells
    for cell in cells:
        built = cell.therock_release.torch_versions[torch_minor(cell.torch)]  # type: ignore[union-attr]
        assert (cell.torch, cell.torchvision, cell.torchaudio) == (built.torch, built.torchvision, built.torchaudio)
