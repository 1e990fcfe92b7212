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
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import jinja2

from builder import smoke
from builder.core import ospins
from builder.core.spec import CellSpec
from builder.core.tags import CELL_FILE, RIF_DIR, VENV_DIR
from builder.matrix.selection import plan_images
from builder.render import contenthash, labels, lockfile, oslock, sources
from builder.render.contenthash import stage_chains
from builder.render.installs import devel_packages, runtime_packages, venv_packages
from builder.render.sources import INDEX, LOCK_MOUNT, PIP_CACHE, WHEELS_MOUNT, WheelSource, step_wheels
from builder.render.stages import lock_steps, stage_name, stages_of

SMOKE_PROGRAM = smoke.PROGRAM
SMOKE_PATH = f"rif/{SMOKE_PROGRAM}"  # in the build tree, shared by every image


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
    os_pinned: bool = False  # every OS package step installs exactly its lock (lock/os-*.txt)
    lock_files: dict[str, str] = field(default_factory=dict, repr=False)  # its own locks by name (none: unlocked)
    pins: sources.Pins = ()  # what its combination pins exactly: unlocked, its wheels are sources.pinned_wheels(pins)

    @property
    def labels(self) -> dict[str, str]:
        return labels.image_labels(self.cell, self.content_hash)

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


def group_key(cell: CellSpec) -> str:
    """What the images of one combination share: all but the family, flavor and tag."""
    return cell.model_dump_json(exclude={"gfx", "flavor", "tag", "explicit_tag", "line", "expect_torch"})


def group_name(cell: CellSpec) -> str:
    """A per-family TheRock line (7.9-7.12) serves each family its own torch wheel from its own index: one
    combination per family there, named after it (group_key already tells them apart by index URL)."""
    parts = [cell.platform, cell.os.replace("-", ""), f"py{cell.python}", f"torch{cell.torch}"]
    release = cell.therock_release
    parts += [cell.gfx] if release and release.index == "per-family" and cell.gfx else []
    parts += [cell.channel] if cell.wheels.NAMED_IN_TAGS else []
    parts += [cell.user] if cell.user != "root" else []
    return "_".join(parts)


def render_all(cells: list[CellSpec], source: WheelSource = INDEX) -> list[RenderedCell]:
    """One target per image (cells with the same content share one), grouped into combinations."""
    return render_images([plan.content for plan in plan_images(cells)], source)


def render_cell(cell: CellSpec, source: WheelSource = INDEX) -> RenderedCell:
    return render_images([cell], source)[0]


def render_images(images: list[CellSpec], source: WheelSource = INDEX) -> list[RenderedCell]:
    """Image cells -> rendered images, in the order given."""
    groups: dict[str, list[CellSpec]] = {}
    for cell in images:
        groups.setdefault(group_key(cell), []).append(cell)
    names = _group_names(groups)
    by_tag: dict[str, RenderedCell] = {}
    problems: list[str] = []
    program = smoke.bundle()  # once per render, not per image: building the zipapp is most of a render's time
    for key, members in groups.items():
        try:
            for rendered in _render_group(names[key], members, source, program):
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


def _render_group(group: str, members: list[CellSpec], source: WheelSource, program: bytes) -> list[RenderedCell]:
    runtimes, develops = stages_of(members)
    stages = {**runtimes, **develops}
    first = members[0]
    locks = lockfile.read_fresh(source.locks, group, lock_steps(members)) if source.locks else {}
    lock_dir = f"{group}/{lockfile.LOCK_DIR}"
    os_locks = oslock.read_group(source.locks / lock_dir, members) if source.locks else {}
    os_pinned = bool(os_locks) and set(os_locks) == {s.file for s in oslock.steps(members)}
    pins = sources.combination_pins(members)  # unlocked: the wheels it can install, in a folder of their own
    text = _template().render(
        combo=first, group=group, images=[stages[stage_name(c)] for c in members],
        runtimes=list(runtimes.values()), develops=list(develops.values()),
        runtime_packages=runtime_packages(first), venv_packages=venv_packages(first),
        devel_packages=devel_packages(first), os_family=first.os_family,
        mounts=source.mounts(sources.pinned_wheels(pins)), pip_source=source.pip_args(first),
        wheel_source_comment=source.describe(first),
        lock_mounts={name: [PIP_CACHE, f"--mount=type=bind,source={step_wheels(text)},target={WHEELS_MOUNT}"]
                     for name, text in locks.items()} if source.wheelhouse else {},
        torch_requirement=[f"torch=={first.torch_wheel}"],
        cell_file={s.cell.tag: labels.cell_dir(s.cell) for s in stages.values()},
        rif_dir=RIF_DIR, venv_dir=VENV_DIR, cell_json=CELL_FILE, smoke_program=SMOKE_PROGRAM,
        base_ref=lockfile.pinned_base(locks[lockfile.BASE_FILE]) if locks else first.os_release.base,
        locked=bool(locks), lock_dir=lock_dir, lock_mount=LOCK_MOUNT,
        filled={name for name, data in locks.items() if lockfile.pins_of(data)},
        os_locks=oslock.narrowed(os_locks, source.apt_trusted),
    )
    chains = stage_chains(text)
    cell_files = {s.stage: (labels.cell_path(s.cell), labels.cell_json(s.cell)) for s in stages.values()}
    out = []
    for cell in members:
        stage = stage_name(cell)
        copied = {SMOKE_PATH: program}
        copied.update(file for name, file in cell_files.items() if name in chains[stage].names)
        # Lock files come in by bind mount, named in the chain's RUN lines; hashed under their name in lock/,
        # so the combination's folder name (which can differ between renders) never moves the hash.
        mounted = {f"{lock_dir}/{name}": data.encode() for name, data in locks.items()
                   if f"source={lock_dir}/{name}," in chains[stage].text}
        hashed = {**copied, **{k.removeprefix(group + "/"): v for k, v in mounted.items()}}
        content_hash = contenthash.content_hash(chains[stage].text.replace(f"source={group}/", "source="), hashed,
                                                labels.image_labels(cell, ""),
                                                source.wheelhouse if source.locks is None else None, pins)
        out.append(RenderedCell(cell, group, stage, text, {**copied, **mounted, **_base_lock(locks, lock_dir)},
                                content_hash, source, os_pinned, _own_locks(cell, locks, os_locks), pins))
    return out


def _own_locks(cell: CellSpec, locks: dict[str, str], os_locks: dict[str, ospins.OsLock]) -> dict[str, str]:
    """The lock files the image's own layers are built from (what a render of it alone reads): the record
    published with it (builder.render.lockrecord)."""
    own = {step.file for step in lock_steps([cell])} | {step.file for step in oslock.steps([cell])}
    return {name: text for name, text in locks.items() if name in own} | \
        {name: lock.text() for name, lock in os_locks.items() if name in own}


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
