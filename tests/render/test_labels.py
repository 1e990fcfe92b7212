"""builder.render.labels: what an image says about itself (OCI and the factory's labels) and its cell.json."""

from __future__ import annotations

import json
from pathlib import Path

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
