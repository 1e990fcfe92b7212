"""What an image says about itself: its labels (the OCI annotations and the factory's own) and its cell.json.

`docker inspect` tells what an image is and how it was made; the smoke test inside it reads cell.json to
know what to expect of the image it runs in.
"""

from __future__ import annotations

import functools
import json

from builder.core import drivers
from builder.core.spec import CellSpec
from builder.core.tags import CELL_FILE, HASH_LABEL, LABEL_PREFIX

CELLS_DIR = "cells"  # the build tree's cells/<tag>/cell.json: each image's /opt/rif/cell.json


def image_labels(cell: CellSpec, content_hash: str) -> dict[str, str]:
    """OCI annotations plus the cell itself, so `docker inspect` tells what an image is and how it was made."""
    platform = f"ROCm {cell.rocm}" if cell.rocm else "CPU"
    labels = {
        "org.opencontainers.image.title": f"PyTorch {cell.torch} ({platform}, {cell.os}, {cell.flavor})",
        "org.opencontainers.image.description": "PyTorch image built and validated by rocm-image-factory",
        "org.opencontainers.image.version": cell.torch,
        "org.opencontainers.image.source": cell.source_url,
        "org.opencontainers.image.ref.name": cell.tag,
        "org.opencontainers.image.base.name": cell.os_release.base,
        "org.opencontainers.image.vendor": "rocm-image-factory",
    }
    own = {
        "image": cell.image,
        "tag": cell.tag,
        "platform": cell.platform,
        "channel": cell.channel,
        "rocm": cell.rocm or "none",
        "torch": cell.torch,
        "torchvision": cell.torchvision or "none",
        "torchaudio": cell.torchaudio or "none",
        "gfx-family": cell.gfx or "none",
        "gfx-targets": ",".join(cell.gfx_targets) or "none",
        "python": cell.python,
        "os": cell.os,
        "flavor": cell.flavor,
        "user": cell.user,
        # The host's amdgpu driver releases AMD supports the image's ROCm line with (AMD GPU Driver 6.4.x-31.50.x).
        "amdgpu-driver": drivers.range_text(drivers.rocm_line(cell.rocm)) if cell.rocm else "none",
    }
    labels.update({LABEL_PREFIX + k: v for k, v in own.items()})
    if content_hash:
        labels[HASH_LABEL] = content_hash
    return labels


def cell_dir(cell: CellSpec) -> str:
    """A folder of its own per image: its RUN step binds exactly this folder, so no mount stub is ever made."""
    return f"{CELLS_DIR}/{cell.tag}"


def cell_path(cell: CellSpec) -> str:
    return f"{cell_dir(cell)}/{CELL_FILE}"


@functools.lru_cache(maxsize=4096)
def cell_json(cell: CellSpec) -> bytes:
    """Made once per cell (a CellSpec is frozen): a render asks for it for every image whose stages it is in, and
    json's indented encoder is Python, not C."""
    return json.dumps(cell.expectations(), indent=2, sort_keys=True).encode() + b"\n"
