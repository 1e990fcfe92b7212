"""Stage 2: CellSpecs -> one Dockerfile per combination, each image a target of it, with its content hash.

A combination is everything an image's Python environment shares with its siblings: OS, Python, ROCm
line, torch and companions, channel, index and user. Its images (runtime and devel per GPU family) are
stages of one Dockerfile: devel is `FROM` its runtime, and every family starts from one `torch` stage, so
BuildKit builds and stores each shared layer once.

An image's content hash covers exactly what determines it: the stages it is built through (their
instructions, not their names or comments), every file those stages copy, the wheels of a local
wheelhouse and the image's labels. A change to a sibling's stage never changes it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import jinja2

from builder import smoke
from builder.core.spec import CellSpec
from builder.core.tags import CELL_FILE, HASH_LABEL, LABEL_PREFIX, RIF_DIR, VENV_DIR, readable_tag
from builder.matrix.selection import plan_images
from builder.render import contenthash, lockfile
from builder.render.contenthash import stage_chains
from builder.render.installs import (
    apt_sdk_steps,
    devel_packages,
    device_requirements,
    runtime_packages,
    sdk_requirements,
    small_requirements,
    venv_packages,
)

SMOKE_PROGRAM = smoke.PROGRAM
SMOKE_PATH = f"rif/{SMOKE_PROGRAM}"  # in the build tree, shared by every image
CELLS_DIR = "cells"  # the build tree's cells/<tag>/cell.json: each image's /opt/rif/cell.json
PIP_CACHE = "--mount=type=cache,id=rif-pip,target=/tmp"  # pip --cache-dir /tmp/pip
WHEELS_DIR = "wheels"  # a local wheelhouse, linked into the build tree and bind-mounted, never copied
WHEELS_MOUNT = "/mnt"  # where the build sees it: a folder every base image has, so no mount point is left
LOCK_MOUNT = "/tmp/rif/requirements.txt"  # a step's lock file, inside the pip cache mount: never in a layer


@dataclass(frozen=True)
class WheelSource:
    """Where pip takes wheels from (the cell's index URL, or a local wheelhouse for air-gapped sites and tests)
    and, when locked, the tree whose `<combination>/lock/` files pin the base image and every wheel."""

    wheelhouse: Path | None = None
    locks: Path | None = None

    def pip_args(self, cell: CellSpec) -> list[str]:
        if self.wheelhouse is not None:
            return ["--no-index", "--find-links", WHEELS_MOUNT]
        url = urlsplit(cell.index_url)
        # pip ignores a plain-HTTP index unless told to trust it: a matrix that names one (a mirror inside
        # the site's network) means it.
        trust = ["--trusted-host", url.hostname] if url.scheme == "http" and url.hostname else []
        return ["--index-url", cell.index_url, *trust]

    def mounts(self) -> list[str]:
        """The pip cache is a cache mount either way; a wheelhouse comes in read-only by a bind mount."""
        bind = [f"--mount=type=bind,source={WHEELS_DIR},target={WHEELS_MOUNT}"] if self.wheelhouse else []
        return [PIP_CACHE, *bind]

    def describe(self, cell: CellSpec) -> str:
        where = "local wheelhouse (--wheelhouse)" if self.wheelhouse else cell.index_url
        return where + (", exactly the wheels of lock/ (--require-hashes)" if self.locks else "")


def step_wheels(lock_text: str) -> str:
    """A locked step's own wheels in the build tree (a wheelhouse build): the folder its bind mount reads, named
    by its lock, so a new wheel elsewhere in the wheelhouse leaves BuildKit's cache of this step untouched."""
    return f"{WHEELS_DIR}/{hashlib.sha256(lock_text.encode()).hexdigest()[:12]}"


class NameClash(ValueError):
    """Two images of one render would share a name BuildKit needs unique (a stage or a bake target)."""


@dataclass(frozen=True)
class RenderedCell:
    """One image: the combination's Dockerfile, the stage that is this image, and its content hash."""

    cell: CellSpec
    group: str  # the combination: images/<group>/Dockerfile
    stage: str  # the Dockerfile target that is this image
    dockerfile: str
    files: dict[str, bytes] = field(repr=False)  # build-tree path -> bytes, for the stages of this image
    content_hash: str
    source: WheelSource

    @property
    def labels(self) -> dict[str, str]:
        return image_labels(self.cell, self.content_hash)

    @property
    def target(self) -> str:
        """Its bake target: the tag, in the characters bake allows in a name."""
        return bake_target(self.cell.tag)

    @property
    def chain(self) -> list[tuple[str, bool]]:
        """The stages it is built through, base first, each named uniquely in the bake (combination/stage)
        and marked when it runs a step on the build context: what `bake.waves` orders by."""
        chains = stage_chains(self.dockerfile)
        return [(f"{self.group}/{name}", contenthash.runs_on_context(chains[name].text))
                for name in chains[self.stage].names]


@dataclass(frozen=True)
class _Stage:
    cell: CellSpec
    stage: str
    parent: str = "torch"
    device: list[str] = field(default_factory=list)
    small: list[str] = field(default_factory=list)
    sdk: list[str] = field(default_factory=list)  # a devel stage's ROCm SDK (pip), over its runtime
    apt_sdk: list[str] = field(default_factory=list)  # or the shell steps that add it from AMD's apt repository


def bake_target(tag: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", tag)


def template_dir() -> Path:
    """templates/ ships inside the wheel as builder/templates; a source checkout has it at the top."""
    packaged = Path(str(resources.files("builder"))) / "templates"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "templates"


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


def cell_dir(cell: CellSpec) -> str:
    """A folder of its own per image: its RUN step binds exactly this folder, so no mount stub is ever made."""
    return f"{CELLS_DIR}/{cell.tag}"


def cell_path(cell: CellSpec) -> str:
    return f"{cell_dir(cell)}/{CELL_FILE}"


def cell_json(cell: CellSpec) -> bytes:
    return json.dumps(cell.expectations(), indent=2, sort_keys=True).encode() + b"\n"


def group_key(cell: CellSpec) -> str:
    """What the images of one combination share: all but the family, flavor and tag."""
    return cell.model_dump_json(exclude={"gfx", "flavor", "tag", "explicit_tag", "line", "expect_torch"})


def group_name(cell: CellSpec) -> str:
    """A per-family TheRock line (7.9-7.12) serves each family its own torch wheel from its own index: one
    combination per family there, named after it (group_key already tells them apart by index URL)."""
    parts = [cell.platform, cell.os.replace("-", ""), f"py{cell.python}", f"torch{cell.torch}"]
    release = cell.therock_release
    parts += [cell.gfx] if release and release.index == "per-family" and cell.gfx else []
    parts += [cell.channel] if cell.channel != "pytorch" else []
    parts += [cell.user] if cell.user != "root" else []
    return "_".join(parts)


def _stage_name(cell: CellSpec) -> str:
    readable = readable_tag(cell.platform, cell.os, cell.python, cell.torch, cell.gfx, cell.flavor, cell.channel)
    if cell.tag != readable:
        return "tag-" + cell.tag.lower()
    return "-".join([cell.flavor, *([cell.gfx.lower()] if cell.gfx else [])])


def runtime_parent(cell: CellSpec) -> CellSpec:
    """The runtime image a devel image is built on: its readable runtime sibling."""
    tag = readable_tag(cell.platform, cell.os, cell.python, cell.torch, cell.gfx, "runtime", cell.channel)
    return cell.model_copy(update={"flavor": "runtime", "tag": tag, "explicit_tag": False, "line": None})


def _runtime(cell: CellSpec) -> _Stage:
    return _Stage(cell, _stage_name(cell), device=device_requirements(cell), small=small_requirements(cell))


def _same(a: _Stage, b: _Stage) -> bool:
    """Two runtime stages that build the same layers (the cells may differ in where they came from)."""
    return (cell_json(a.cell), a.device, a.small) == (cell_json(b.cell), b.device, b.small)


def render_all(cells: list[CellSpec], source: WheelSource = WheelSource()) -> list[RenderedCell]:
    """One target per image (cells with the same content share one), grouped into combinations."""
    return render_images([plan.content for plan in plan_images(cells)], source)


def render_cell(cell: CellSpec, source: WheelSource = WheelSource()) -> RenderedCell:
    return render_images([cell], source)[0]


def render_images(images: list[CellSpec], source: WheelSource = WheelSource()) -> list[RenderedCell]:
    """Image cells -> rendered images, in the order given."""
    groups: dict[str, list[CellSpec]] = {}
    for cell in images:
        if cell.os_release.family != "apt":
            raise NotImplementedError(f"{cell.os}: rendering for {cell.os_release.family} is not implemented yet")
        groups.setdefault(group_key(cell), []).append(cell)
    names = _group_names(groups)
    by_tag: dict[str, RenderedCell] = {}
    problems: list[str] = []
    for key, members in groups.items():
        try:
            for rendered in _render_group(names[key], members, source):
                by_tag[rendered.cell.tag] = rendered
        except lockfile.LockProblem as exc:  # every combination's, not just the first one's
            problems += exc.problems
    if problems:
        raise lockfile.LockProblem(problems)
    return [by_tag[c.tag] for c in images]


def _group_names(groups: dict[str, list[CellSpec]]) -> dict[str, str]:
    """Readable names; two combinations that read the same (another index, say) get a short key hash."""
    plain = {key: group_name(members[0]) for key, members in groups.items()}
    clash = {n for n in plain.values() if list(plain.values()).count(n) > 1}
    return {key: name + ("_" + hashlib.sha256(key.encode()).hexdigest()[:8] if name in clash else "")
            for key, name in plain.items()}


def _stages(members: list[CellSpec]) -> tuple[dict[str, _Stage], dict[str, _Stage]]:
    """A combination's runtime and devel stages by name (a devel image brings its runtime parent)."""
    runtimes: dict[str, _Stage] = {}
    develops: dict[str, _Stage] = {}
    names = [_stage_name(c) for c in members]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        tags = [c.tag for c in members if _stage_name(c) in clash]
        raise NameClash(f"images {', '.join(tags)} would share the Dockerfile stage {clash[0]!r} (tags that differ "
                        "only in letter case): give them tags that differ otherwise")
    for cell in members:
        if cell.flavor == "runtime":
            runtimes[_stage_name(cell)] = _runtime(cell)
    for cell in members:
        if cell.flavor == "devel":
            parent = _runtime(runtime_parent(cell))
            if _same(runtimes.get(parent.stage, parent), parent) is False:  # an image of that name differs
                parent = _Stage(parent.cell, f"{_stage_name(cell)}-runtime", device=parent.device, small=parent.small)
            runtimes.setdefault(parent.stage, parent)
            develops[_stage_name(cell)] = _Stage(cell, _stage_name(cell), parent=parent.stage,
                                                 sdk=sdk_requirements(cell), apt_sdk=apt_sdk_steps(cell))
    return runtimes, develops


def lock_steps(members: list[CellSpec]) -> list[lockfile.Step]:
    """The installing steps of a combination's Dockerfile, in build order: what its locks pin."""
    first = members[0]
    torch = (f"torch=={first.torch_wheel}",)
    steps = [lockfile.Step(lockfile.BASE_FILE, (first.os_release.base,)),
             lockfile.Step("torch.txt", torch, first.python, no_deps=True),
             lockfile.Step("torch-deps.txt", torch, first.python, after=("torch.txt",))]
    shared = ("torch.txt", "torch-deps.txt")
    runtimes, develops = _stages(members)
    below: dict[str, tuple[str, ...]] = {}  # runtime stage -> the lock files of its layers
    for stage in runtimes.values():
        device: tuple[str, ...] = (f"{stage.stage}-device.txt",) if stage.device else ()
        if stage.device:
            steps.append(lockfile.Step(device[0], tuple(stage.device), first.python, after=shared))
        small = (*stage.device, *(r for r in stage.small if r not in stage.device))
        steps.append(lockfile.Step(f"{stage.stage}.txt", small, first.python, after=shared + device))
        below[stage.stage] = shared + device + (f"{stage.stage}.txt",)
    for stage in develops.values():
        if stage.sdk:
            steps.append(lockfile.Step(f"{stage.stage}.txt", tuple(stage.sdk), first.python, after=below[stage.parent]))
    return steps


def _render_group(group: str, members: list[CellSpec], source: WheelSource) -> list[RenderedCell]:
    runtimes, develops = _stages(members)
    stages = {**runtimes, **develops}
    first = members[0]
    locks = lockfile.read_fresh(source.locks, group, lock_steps(members)) if source.locks else {}
    lock_dir = f"{group}/{lockfile.LOCK_DIR}"
    text = _template().render(
        combo=first, group=group, images=[stages[_stage_name(c)] for c in members],
        runtimes=list(runtimes.values()), develops=list(develops.values()),
        runtime_packages=runtime_packages(), venv_packages=venv_packages(), devel_packages=devel_packages(),
        mounts=source.mounts(), pip_source=source.pip_args(first), wheel_source_comment=source.describe(first),
        lock_mounts={name: [PIP_CACHE, f"--mount=type=bind,source={step_wheels(text)},target={WHEELS_MOUNT}"]
                     for name, text in locks.items()} if source.wheelhouse else {},
        torch_requirement=[f"torch=={first.torch_wheel}"],
        cell_file={s.cell.tag: cell_dir(s.cell) for s in stages.values()},
        rif_dir=RIF_DIR, venv_dir=VENV_DIR, cell_json=CELL_FILE, smoke_program=SMOKE_PROGRAM,
        base_ref=lockfile.pinned_base(locks[lockfile.BASE_FILE]) if locks else first.os_release.base,
        locked=bool(locks), lock_dir=lock_dir, lock_mount=LOCK_MOUNT,
        filled={name for name, data in locks.items() if lockfile.pins_of(data)},
    )
    chains = stage_chains(text)
    out = []
    for cell in members:
        stage = _stage_name(cell)
        copied = {SMOKE_PATH: smoke.bundle()}
        copied.update({cell_path(s.cell): cell_json(s.cell) for s in stages.values()
                       if s.stage in chains[stage].names})
        # Lock files come in by bind mount, named in the chain's RUN lines; hashed under their name in lock/,
        # so the combination's folder name (which can differ between renders) never moves the hash.
        mounted = {f"{lock_dir}/{name}": data.encode() for name, data in locks.items()
                   if f"source={lock_dir}/{name}," in chains[stage].text}
        hashed = {**copied, **{k.removeprefix(group + "/"): v for k, v in mounted.items()}}
        content_hash = contenthash.content_hash(chains[stage].text.replace(f"source={group}/", "source="), hashed,
                                                image_labels(cell, ""),
                                                source.wheelhouse if source.locks is None else None)
        out.append(RenderedCell(cell, group, stage, text, {**copied, **mounted, **_base_lock(locks, lock_dir)},
                                content_hash, source))
    return out


def _base_lock(locks: dict[str, str], lock_dir: str) -> dict[str, bytes]:
    """base.txt goes into the tree with the other locks (its pin is in the FROM line, hashed there)."""
    base = locks.get(lockfile.BASE_FILE)
    return {f"{lock_dir}/{lockfile.BASE_FILE}": base.encode()} if base is not None else {}


def tree_files(rendered: Iterable[RenderedCell]) -> dict[str, bytes]:
    """Every file of a build tree but the bake file: the Dockerfiles, the smoke program, each cell.json."""
    files: dict[str, bytes] = {}
    for r in rendered:
        files[f"{r.group}/Dockerfile"] = r.dockerfile.encode()
        files.update(r.files)
    return dict(sorted(files.items()))
