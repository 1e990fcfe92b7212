"""The whole tag policy and the image contract, in one place: plain values in, plain values out.

Tags: every image has a readable tag per cell (moving: it follows the newest validated build of that
cell), one immutable tag `<readable>-<12 hex of the content hash>` that never changes once pushed, and
`latest` for one chosen image. The contract: the labels, the folder and the file every image carries,
read back by `builder test`/`builder push` and by torch-smoke inside the image.

Imports nothing else of the package, so every stage can use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from packaging.version import Version

from builder.core import channels

LABEL_PREFIX = "org.rocm-image-factory."
HASH_LABEL = LABEL_PREFIX + "content-hash"
TAG_LABEL = LABEL_PREFIX + "tag"
IMAGE_LABEL = LABEL_PREFIX + "image"  # the repository name the image is published under
SNAPSHOT_LABEL = LABEL_PREFIX + "snapshot"  # a base made by `builder base --snapshot T`: T (a lock records it)
# The labels an image's own cell.json (its expectations) decides: what the image is held to without the matrix.
CELL_LABELS = ("tag", "platform", "os", "flavor", "python", "user")
RIF_DIR = "/opt/rif"  # the factory's files inside every image
VENV_DIR = "/opt/venv"  # the Python environment with torch, first on PATH
CELL_FILE = "cell.json"  # the image's expectations, read by torch-smoke
LOCAL_NAMESPACE = "rocm-image-factory"  # local image names: rocm-image-factory/<image>:<tag>

LATEST = "latest"
RESERVED_TAGS = frozenset({LATEST})  # moving tags the factory assigns itself; no cell may take them
HASH_CHARS = 12
MAX_TAG_CHARS = 128  # the distribution spec's limit on a tag
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
IMMUTABLE_SUFFIX_RE = re.compile(rf"-[0-9a-f]{{{HASH_CHARS}}}$")
# The OCI referrers tag schema's fallback: `sha256-<hex of an image digest>` tags the index of the artifacts that
# refer to that image (its SBOM); no image of its own, never a page or a moving tag.
REFERRERS_TAG_RE = re.compile(r"sha256-[0-9a-f]{64}")


def readable_tag(platform: str, os: str, python: str, torch: str, gfx: str | None, flavor: str,
                 channel: str = "pytorch") -> str:
    """Stable tag in the spirit of AMD's rocm7.2_ubuntu24.04_py3.12_pytorch_release_2.9.1.

    platform_osversion_pyX.Y_torchX.Y.Z[_gfxfamily][_channel]_flavor, the channel named unless it is
    pytorch.org's, e.g. rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime,
    rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_therock_runtime or cpu_debian12_py3.11_torch2.13.0_devel.
    """
    parts = [platform, os.replace("-", ""), f"py{python}", f"torch{torch}"]
    if gfx:
        parts.append(gfx)
    if channels.of(channel).NAMED_IN_TAGS:
        parts.append(channel)
    parts.append(flavor)
    return "_".join(parts)


def short_hash(content_hash: str) -> str:
    return content_hash.removeprefix("sha256:")[:HASH_CHARS]


def immutable_tag(tag: str, content_hash: str) -> str:
    """The tag that names exactly one content: pushed once, never moved."""
    return f"{tag}-{short_hash(content_hash)}"


def local_ref(image: str, tag: str) -> str:
    """Where a build lands in the local engine before it is validated and pushed."""
    return f"{LOCAL_NAMESPACE}/{image}:{tag}"


def moving_tags(cell_tags: list[str], latest: bool) -> list[str]:
    """The tags promoted registry-side to an image's digest once it is published."""
    return [*cell_tags, *([LATEST] if latest else [])]


def latest_rank(rocm: str | None, torch: str) -> tuple[bool, Version, Version]:
    """Order of `latest` candidates: ROCm before CPU, then newest torch, then newest ROCm."""
    return rocm is not None, Version(torch), Version(rocm or "0")


def tag_problems(tag: str) -> list[str]:
    """Why a tag a maintainer chose cannot be used; [] when it can."""
    problems = []
    if not TAG_RE.fullmatch(tag):
        problems.append(f"{tag!r} is not a valid image tag (letters, digits, '_', '.', '-'; not starting "
                        "with '.' or '-')")
    if tag in RESERVED_TAGS:
        problems.append(f"{tag!r} is reserved: the factory moves it itself")
    if IMMUTABLE_SUFFIX_RE.search(tag):
        problems.append(f"{tag!r} ends like an immutable tag (-<{HASH_CHARS} hex>) and could overwrite one")
    longest = len(tag) + 1 + HASH_CHARS
    if longest > MAX_TAG_CHARS:
        problems.append(f"{tag!r} is {len(tag)} characters: its immutable form would be {longest}, over the "
                        f"registry limit of {MAX_TAG_CHARS}; use at most {MAX_TAG_CHARS - 1 - HASH_CHARS}")
    return problems


def labels_against_cell(labels: Mapping[str, str], expect: Mapping[str, Any]) -> list[str]:
    """The factory's labels that disagree with the expectations baked into the image ([] when none does): what an
    image's labels are held to without its matrix (`builder test IMAGE`, `builder push IMAGE`)."""
    wrong = [key for key in CELL_LABELS if key not in expect or labels.get(LABEL_PREFIX + key) != expect[key]]
    if "gfx_family" not in expect or labels.get(LABEL_PREFIX + "gfx-family") != (expect["gfx_family"] or "none"):
        wrong.append("gfx-family")
    if not labels.get(HASH_LABEL, "").startswith("sha256:"):
        wrong.append("content-hash")
    return wrong
