"""The preflight's guards (issue 53, "Validation"): `require` raises (exit 2) for every missing base and wheel and
returns only when nothing is missing; the pipeline asks it for every job before any bake, and a missing input
stops the run before BuildKit is asked for anything.

The engine and the registry are answers here (has the base / serves it / why not), as tests/buildkit/
test_preflight.py gives them; the wheelhouse is a real folder of empty files named as pip names wheels."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import docker
import pytest

from builder.buildkit import preflight
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Cache
from builder.core.errors import InputError
from builder.pipeline import baking, jobs, lifecycle
from builder.pipeline.options import BakeOptions
from builder.render.sources import WheelSource
from tests.buildkit.test_preflight import need as needing
from tests.fakes.checkout import ROOT

MATRIX = ROOT / "examples" / "local.yaml"
DOCKERFILE = "FROM debian:13 AS base\nRUN true\nFROM base AS torch\n"
TAG = "cpu_debian13_py3.13_torch2.13.0_runtime"


def need() -> preflight.Need:
    return preflight.Need(tag=TAG, os="debian-13", base_tool="debootstrap", dockerfile=DOCKERFILE, python="3.13",
                          requirements=("torch==2.13.0",))


def unreachable(ref: str) -> str:
    return "registry-1.docker.io: no route"


def test_require_raises_every_problem_and_returns_only_when_nothing_is_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        preflight.require([need()], tmp_path, "--matrix m", lambda ref: False, unreachable)
    assert [(str(p.file), p.key) for p in info.value.problems] == [
        (TAG, "base image"), (TAG, "wheelhouse"), (str(tmp_path), "fetch them")]
    assert "debian:13 is not in the local engine and not pullable (registry-1.docker.io: no route)" in \
        info.value.problems[0].message
    (tmp_path / "torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl").touch()
    assert preflight.require([need()], tmp_path, "--matrix m", lambda ref: True, unreachable) is None


def test_require_raises_for_a_base_alone_without_a_wheelhouse() -> None:
    with pytest.raises(InputError, match=r"debian:13 is not in the local engine"):
        preflight.require([need()], None, "--matrix m", lambda ref: False, unreachable)


@pytest.fixture
def nothing_there(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No base in the builder's store and no registry serving one; every base asked for is recorded."""
    asked: list[str] = []

    def has(kit: BuildKit) -> preflight.Local:
        return lambda ref: bool(asked.append(ref))

    monkeypatch.setattr(jobs.builders, "has_image", has)
    monkeypatch.setattr(jobs.images, "serves", lambda: unreachable)
    return asked


def test_the_jobs_inputs_are_asked_for_and_a_missing_one_is_an_input_error(
        tmp_path: Path, nothing_there: list[str]) -> None:
    todo = jobs.matrix_jobs(MATRIX, None, None, WheelSource(wheelhouse=tmp_path))
    with pytest.raises(InputError) as info:
        jobs.require_inputs(todo, WheelSource(wheelhouse=tmp_path))
    assert nothing_there  # every base was asked for
    keys = {p.key for p in info.value.problems}
    assert keys == {"base image", "wheelhouse", "fetch them"}
    [fetch] = [p for p in info.value.problems if p.key == "fetch them"]
    assert fetch.message.startswith(f"`builder wheelhouse --matrix {MATRIX} --dest {tmp_path} --cell ")


def test_a_missing_input_stops_the_run_before_any_bake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        nothing_there: list[str]) -> None:
    baked: list[object] = []
    monkeypatch.setattr(baking, "require_builder", lambda kit: kit)
    monkeypatch.setattr(baking, "bake", lambda *args, **kwargs: baked.append(args))
    monkeypatch.setattr(baking, "straight", lambda export, kit: export)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = WheelSource(wheelhouse=tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    todo = jobs.matrix_jobs(MATRIX, None, None, source)
    with pytest.raises(InputError, match="base image"):
        lifecycle.prepare(cast(docker.DockerClient, None), todo, BakeOptions(source=source))
    assert baked == [] and nothing_there


def test_a_missing_input_stops_the_shared_stages_before_any_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     nothing_there: list[str]) -> None:
    """`builder stages` bakes too: the same preflight first, or a stage waits on a base no one made."""
    built: list[object] = []
    monkeypatch.setattr(baking, "require_builder", lambda kit: kit)
    monkeypatch.setattr(baking.stagewave, "build", lambda *args, **kwargs: built.append(args) or [])
    source = WheelSource(wheelhouse=tmp_path)
    todo = jobs.matrix_jobs(MATRIX, None, None, source)
    options = BakeOptions(source=source, cache=Cache("127.0.0.1:5000/ns/buildcache"))
    with pytest.raises(InputError, match="base image"):
        baking.shared_stages(todo, options, lambda tag, line: None)
    assert built == [] and nothing_there


@pytest.mark.parametrize(("wheel", "python", "installs"), [
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "3.13", False),  # another CPython's own ABI
    ("torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl", "3.11", False),
    ("torch-2.13.0-cp313-abi3-manylinux_2_28_x86_64.whl", "3.13", True),  # the stable ABI of its own minor
    ("torch-2.13.0-cp312-abi3-manylinux_2_28_x86_64.whl", "3.13", True),  # one minor below
    ("torch-2.13.0-cp314-abi3-manylinux_2_28_x86_64.whl", "3.13", False),  # one minor above
    ("torch-2.13.0-py3-none-any.whl", "3.13", True),
    ("torch-2.13.0-py2.py3-none-any.whl", "3.13", True),
    ("torch-2.13.0-py313-none-any.whl", "3.13", True),
    ("torch-2.13.0-py312-none-any.whl", "3.13", False),
    ("torch-2.13.0-py3-cp313-any.whl", "3.11", False),
])
def test_a_wheel_installs_only_where_its_interpreter_and_abi_say(tmp_path: Path, wheel: str, python: str,
                                                                  installs: bool) -> None:
    """Both sides of the stable-ABI boundary (cpXY-abi3 installs on CPython X.Y and later), and a CPython ABI that
    is another minor's, as pip's own tag rules decide them (packaging.tags.sys_tags of CPython 3.13 on
    manylinux x86-64 lists cp313-abi3 and cp312-abi3, not cp314-abi3, cp311-cp311 or py312-none)."""
    (tmp_path / wheel).touch()
    problems = preflight.wheel_problems(needing(python, requirements=("torch==2.13.0",)), tmp_path)
    assert (problems == []) == installs, problems
