"""Before any bake: is every image's base there, and every wheel it installs in the wheelhouse?

A bake that lacks either fails late and says little: BuildKit pulls a base that is not in the engine from
Docker Hub (on a host that cannot reach it, after minutes), and pip in the last stage says only "No matching
distribution found for torch==2.13.0" when the wheelhouse holds that torch for another Python. This check
takes seconds and builds nothing: a base counts as there when the engine has it or the registry its reference
names answers for its manifest (one request, no pull); a wheel when the wheelhouse holds one of its name and
version whose tags install on the image's Python (cpXY) and platform (x86-64 glibc Linux). Whatever is
missing is listed with the command that makes it: `builder base OS`, or the `builder wheelhouse` line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from builder.core.errors import InputError, Problem

_FROM = re.compile(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE | re.MULTILINE)
_PLATFORM = re.compile(r"^(manylinux\d*(_\d+_\d+)?_x86_64|linux_x86_64|any)$")


@dataclass(frozen=True, kw_only=True)
class Need:
    """What one image's bake takes from outside: its base image, and the wheels it installs."""

    tag: str  # the image (a cell tag of it: what `--cell` selects)
    os: str  # e.g. debian-13: what `builder base` makes
    base_tool: str | None  # what `builder base` makes its base with (debootstrap), None: it cannot
    dockerfile: str  # the rendered Dockerfile: its FROM lines name the bases
    python: str  # e.g. 3.13
    requirements: tuple[str, ...]  # pip requirement strings, e.g. torch==2.13.0


Local = Callable[[str], bool]  # ref -> whether the engine has it
Remote = Callable[[str], str | None]  # ref -> None when a registry serves it, else why not


def bases(dockerfile: str) -> list[str]:
    """The images a Dockerfile starts FROM (not its own stages), in order."""
    stages: set[str] = set()
    found: list[str] = []
    for ref, name in _FROM.findall(dockerfile):
        if ref.lower() not in stages and ref not in found and ref.lower() != "scratch":
            found.append(ref)
        if name:
            stages.add(name.lower())
    return found


def wheel_problems(need: Need, wheelhouse: Path) -> list[str]:
    """Each requirement of need with no wheel in wheelhouse that installs on its Python and platform."""
    wheels = []
    for path in sorted(wheelhouse.glob("*.whl")):
        try:
            wheels.append((path.name, *parse_wheel_filename(path.name)))
        except InvalidWheelFilename:
            continue
    interpreter = "cp" + need.python.replace(".", "")
    missing = []
    for text in need.requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        named = [(file, version, tags) for file, name, version, _, tags in wheels
                 if name == canonicalize_name(req.name) and req.specifier.contains(version, prereleases=True)]
        if any(_installs(tags, interpreter) for _, _, tags in named):
            continue
        have = ", ".join(file for file, _, _ in named[:3]) or "none of that name and version"
        missing.append(f"{text} for {interpreter} (the wheelhouse has: {have})")
    return missing


def _installs(tags: frozenset[Tag], interpreter: str) -> bool:
    """A wheel tag that CPython X.Y on x86-64 glibc Linux installs: cpXY, abi3 from cp3 up to it, or py3."""
    minor = int(interpreter[3:])
    for tag in tags:
        python, abi = tag.interpreter, tag.abi
        if not _PLATFORM.match(tag.platform):
            continue
        if python == interpreter and abi in (interpreter, "abi3", "none"):
            return True
        if abi == "abi3" and python.startswith("cp3") and python[3:].isdigit() and int(python[3:]) <= minor:
            return True
        if abi == "none" and python in ("py3", "py2.py3", f"py{interpreter[2:]}"):
            return True
    return False


@dataclass(frozen=True)
class Store:
    """Where the builder looks for a base before it pulls one: its name in a message, and how an image made in the
    local engine gets there ({ref} in it; None: the local engine itself)."""

    name: str = "the local engine"
    move: str | None = None


LOCAL = Store()


def check(needs: list[Need], wheelhouse: Path | None, fetch: str, local: Local, remote: Remote,
          store: Store = LOCAL) -> list[Problem]:
    """Every missing base and wheel of needs, each with what makes it; [] when the bake has what it takes."""
    problems: list[Problem] = []
    seen: dict[str, str | None] = {}
    for need in needs:
        for ref in bases(need.dockerfile):
            if ref not in seen:
                seen[ref] = None if local(ref) else remote(ref)
            why = seen[ref]
            if why is None:
                continue
            problems.append(Problem(Path(need.tag), None, "base image",
                                    f"{ref} is not in {store.name} and not pullable ({why}): "
                                    f"{_make_base(need, ref, store)}"))
    if wheelhouse is not None:
        short = [(n, m) for n in needs for m in wheel_problems(n, wheelhouse)]
        for need, missing in short:
            problems.append(Problem(Path(need.tag), None, "wheelhouse", f"{wheelhouse} lacks {missing}"))
        if short:
            cells = " ".join(f"--cell {tag}" for tag in dict.fromkeys(n.tag for n, _ in short))
            problems.append(Problem(wheelhouse, None, "fetch them",
                                    f"`builder wheelhouse {fetch} --dest {wheelhouse} {cells}`"))
    return problems


def _make_base(need: Need, ref: str, store: Store) -> str:
    """What puts a missing base where the builder finds it."""
    make = (f"run `builder base {need.os}` ({need.base_tool} from the host's mirror; no registry needed)"
            if need.base_tool else f"pull or import {ref} into the engine (`builder base` cannot make {need.os}'s)")
    return make if store.move is None else f"{make}, then {store.move.format(ref=ref)}"


def engine_has(client: docker.DockerClient) -> Local:
    def has(ref: str) -> bool:
        try:
            client.images.get(ref)
        except (ImageNotFound, DockerException):
            return False
        return True
    return has


def require(needs: list[Need], wheelhouse: Path | None, fetch: str, local: Local, remote: Remote,
            store: Store = LOCAL) -> None:
    """InputError (exit 2, before any bake) listing every missing base and wheel with its fix.

    local: whether the builder's image store has a base (`engine_has`, for a builder on the local engine);
    remote: whether a registry serves a base it lacks (builder.registry.images.serves)."""
    problems = check(needs, wheelhouse, fetch, local, remote, store)
    if problems:
        raise InputError(problems)


