"""Stage 2: CellSpec -> Dockerfile text, the files baked beside it, and a content hash.

The content hash covers everything that determines the image: the Dockerfile (rendered without the
hash label), every file copied into it, and the wheels of a local wheelhouse. Two cells with the same
hash would build the same image.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import jinja2

from builder import smoke
from builder.plan import plan_images
from builder.spec import CellSpec
from builder.tags import CELL_FILE, HASH_LABEL, LABEL_PREFIX

SMOKE_PROGRAM = smoke.PROGRAM


@dataclass(frozen=True)
class WheelSource:
    """Where pip takes wheels from: the cell's index URL, or a local wheelhouse (air-gapped sites, tests)."""

    wheelhouse: Path | None = None

    def pip_args(self, cell: CellSpec) -> list[str]:
        if self.wheelhouse is not None:
            return ["--no-index", "--find-links", "/tmp/wheels"]
        return ["--index-url", cell.index_url]

    def describe(self, cell: CellSpec) -> str:
        return "local wheelhouse (--wheelhouse)" if self.wheelhouse else cell.index_url


@dataclass(frozen=True)
class RenderedCell:
    cell: CellSpec
    dockerfile: str
    files: dict[str, bytes] = field(repr=False)
    content_hash: str
    source: WheelSource

    @property
    def labels(self) -> dict[str, str]:
        return image_labels(self.cell, self.content_hash)


def template_dir() -> Path:
    """templates/ ships inside the wheel as builder/templates; a source checkout has it at the top."""
    packaged = Path(str(resources.files("builder"))) / "templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "templates"


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["shquote"] = shlex.quote
    return env.get_template("Dockerfile.j2")


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
    }
    labels.update({LABEL_PREFIX + k: v for k, v in own.items()})
    if content_hash:
        labels[HASH_LABEL] = content_hash
    return labels


def requirements(cell: CellSpec) -> list[str]:
    """pip requirements; on TheRock's index, per-device extras pull only this family's kernels."""
    extras = ""
    if cell.channel == "therock" and cell.gfx_targets:
        extras = "[" + ",".join(f"device-{t}" for t in cell.gfx_targets) + "]"
    reqs = [f"torch{extras}=={cell.torch}"]
    if cell.torchvision:
        reqs.append(f"torchvision{extras}=={cell.torchvision}")
    if cell.torchaudio:
        reqs.append(f"torchaudio=={cell.torchaudio}")
    return [*reqs, "numpy"]


def image_packages(cell: CellSpec) -> list[str]:
    """System packages of the final image: python for the venv, plus a toolchain for extensions in devel."""
    packages = ["python3", "ca-certificates"]
    if cell.flavor == "devel":
        packages += ["build-essential", "python3-dev", "git", "ninja-build"]
    return packages


def baked_files(cell: CellSpec) -> dict[str, bytes]:
    """Files COPYed into /opt/rif: the smoke-test program and the expectations it reads."""
    expect = json.dumps(cell.expectations(), indent=2, sort_keys=True).encode() + b"\n"
    return {f"rif/{SMOKE_PROGRAM}": smoke.bundle(), f"rif/{CELL_FILE}": expect}


def render_all(cells: list[CellSpec]) -> list[RenderedCell]:
    """One rendered Dockerfile per image (cells with the same content share one)."""
    return [render_cell(plan.content) for plan in plan_images(cells)]


def render_cell(cell: CellSpec, source: WheelSource = WheelSource()) -> RenderedCell:
    if cell.os_release.family != "apt":
        raise NotImplementedError(f"{cell.os}: rendering for {cell.os_release.family} is not implemented yet")
    files = baked_files(cell)
    body = _render(cell, source, content_hash="")
    digest = hashlib.sha256(body.encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name])
    if source.wheelhouse is not None:
        digest.update(wheelhouse_digest(source.wheelhouse).encode())
    content_hash = "sha256:" + digest.hexdigest()
    return RenderedCell(cell, _render(cell, source, content_hash), files, content_hash, source)


def _render(cell: CellSpec, source: WheelSource, content_hash: str) -> str:
    return _template().render(
        cell=cell,
        labels=image_labels(cell, content_hash),
        venv_packages=["python3", "python3-venv"],
        image_packages=image_packages(cell),
        wheelhouse=source.wheelhouse is not None,
        wheel_source_comment=source.describe(cell),
        pip_source=source.pip_args(cell),
        requirements=requirements(cell),
    )


@cache
def wheelhouse_digest(wheelhouse: Path) -> str:
    """sha256 over every wheel's name and sha256: a changed wheel changes the content hash."""
    cache_file = _digest_cache_file()
    try:
        known: dict[str, str] = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        known = {}
    digest = hashlib.sha256()
    for wheel in sorted(wheelhouse.glob("*.whl")):
        st = wheel.stat()
        key = f"{wheel.resolve()}|{st.st_size}|{st.st_mtime_ns}"
        if key not in known:
            known[key] = _file_sha256(wheel)
        digest.update(wheel.name.encode() + b"\0" + known[key].encode())
    with contextlib.suppress(OSError):
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(known))
    return digest.hexdigest()


def _digest_cache_file() -> Path:
    """Per-wheel digests keyed by path, size and mtime: a 1 GB torch wheel is hashed once, not every run."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rocm-image-factory" / "wheel-sha256.json"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
