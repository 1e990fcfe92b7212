"""builder.render.labels: what an image says about itself (OCI and the factory's labels) and its cell.json."""

from __future__ import annotations

import json
from pathlib import Path

from builder.core import tags
from builder.core.tags import HASH_LABEL, LABEL_PREFIX
from builder.render import labels
from testkit.matrices import FAMILIES, ONE_CPU, load_cells


def test_a_cpu_image_says_none_for_what_it_lacks_and_carries_its_content_hash(tmp_path: Path) -> None:
    [cell] = load_cells(tmp_path, ONE_CPU)
    found = labels.image_labels(cell, "sha256:" + "1" * 64)
    own = {k.removeprefix(LABEL_PREFIX): v for k, v in found.items() if k.startswith(LABEL_PREFIX)}
    assert (own["rocm"], own["gfx-family"], own["gfx-targets"], own["amdgpu-driver"]) == ("none",) * 4
    assert (own["tag"], own["torch"], own["os"], own["flavor"]) == (cell.tag, cell.torch, cell.os, cell.flavor)
    assert found[HASH_LABEL] == "sha256:" + "1" * 64
    assert found["org.opencontainers.image.title"] == f"PyTorch {cell.torch} (CPU, {cell.os}, {cell.flavor})"
    assert found["org.opencontainers.image.ref.name"] == cell.tag
    assert HASH_LABEL not in labels.image_labels(cell, "")


def test_a_rocm_image_names_its_rocm_family_and_targets(tmp_path: Path) -> None:
    cell = load_cells(tmp_path, FAMILIES)[0]
    found = labels.image_labels(cell, "")
    assert found[LABEL_PREFIX + "rocm"] == cell.rocm and found[LABEL_PREFIX + "gfx-family"] == cell.gfx
    assert found[LABEL_PREFIX + "gfx-targets"] == ",".join(cell.gfx_targets)
    assert f"(ROCm {cell.rocm}, " in found["org.opencontainers.image.title"]
    # the host driver AMD supports the line with (builder/data/drivers.yaml), as cell.json carries it
    assert found[LABEL_PREFIX + "amdgpu-driver"] == json.loads(labels.cell_json(cell))["amdgpu_driver"]["range"]


def test_each_image_has_a_cell_json_folder_of_its_own(tmp_path: Path) -> None:
    [cell] = load_cells(tmp_path, ONE_CPU)
    assert labels.cell_path(cell) == f"cells/{cell.tag}/cell.json"
    text = labels.cell_json(cell)
    assert json.loads(text) == cell.expectations() and text.endswith(b"}\n")
    assert text == json.dumps(cell.expectations(), indent=2, sort_keys=True).encode() + b"\n"


def test_the_labels_of_every_cell_agree_with_its_cell_json_as_an_image_without_its_matrix_is_held(
        tmp_path: Path) -> None:
    # `builder push IMAGE` reads cell.json back from the image (JSON, as cell_json writes it) and holds the labels
    # to it; a build's pass answers for that push only when they agree (builder.validate.reuse.keys_of).
    (tmp_path / "cpu").mkdir()
    cells = load_cells(tmp_path / "cpu", ONE_CPU) + load_cells(tmp_path, FAMILIES)
    for cell in cells:
        found = labels.image_labels(cell, "sha256:" + "2" * 64)
        assert tags.labels_against_cell(found, json.loads(labels.cell_json(cell))) == [], cell.tag


def test_each_label_that_disagrees_with_cell_json_is_named(tmp_path: Path) -> None:
    cell = load_cells(tmp_path, FAMILIES)[0]
    expect = json.loads(labels.cell_json(cell))
    good = labels.image_labels(cell, "sha256:" + "2" * 64)
    for key in (*tags.CELL_LABELS, "gfx-family"):
        assert tags.labels_against_cell({**good, LABEL_PREFIX + key: "other"}, expect) == [key]
        assert tags.labels_against_cell({k: v for k, v in good.items() if k != LABEL_PREFIX + key}, expect) == [key]
    assert tags.labels_against_cell({**good, HASH_LABEL: "md5:0"}, expect) == ["content-hash"]
    assert tags.labels_against_cell(labels.image_labels(cell, ""), expect) == ["content-hash"]
    # an expectation the image's cell.json lacks is a disagreement, not a match of two absences
    assert tags.labels_against_cell(good, {k: v for k, v in expect.items() if k != "user"}) == ["user"]
    assert tags.labels_against_cell(good, {k: v for k, v in expect.items() if k != "gfx_family"}) == ["gfx-family"]
    (tmp_path / "cpu").mkdir()
    cpu = load_cells(tmp_path / "cpu", ONE_CPU)[0]  # no gfx family: the label says "none", cell.json null
    cpu_labels = labels.image_labels(cpu, "sha256:" + "2" * 64)
    cpu_expect = json.loads(labels.cell_json(cpu))
    assert cpu_expect["gfx_family"] is None
    assert tags.labels_against_cell({**cpu_labels, LABEL_PREFIX + "gfx-family": ""}, cpu_expect) == ["gfx-family"]
