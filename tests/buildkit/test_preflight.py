"""The preflight before any bake: bases in the engine or served by their registry, wheels for the image's Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.buildkit.builders import BuildKit, store
from builder.buildkit.preflight import LOCAL, Need, bases, check, wheel_problems
from builder.core.errors import InputError

DEBIAN13 = "cpu_debian13_py3.13_torch2.13.0_runtime"
DOCKERFILE_13 = "# syntax=docker/dockerfile:1\nFROM debian:13 AS base\nRUN true\nFROM base AS torch\n" \
                "FROM torch AS runtime\nFROM runtime AS devel\n"
# What the example's wheelhouse holds: CPU torch and numpy for Python 3.11 only, pure-Python dependencies.
EXAMPLE_WHEELS = ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                  "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
                  "filelock-4.3.1-py3-none-any.whl", "not-a-wheel.whl"]


def need(python: str = "3.13", os: str = "debian-13", dockerfile: str = DOCKERFILE_13, tag: str = DEBIAN13,
         requirements: tuple[str, ...] = ("torch==2.13.0", "numpy"), base_tool: str | None = "debootstrap") -> Need:
    return Need(tag=tag, os=os, base_tool=base_tool, dockerfile=dockerfile, python=python, requirements=requirements)


@pytest.fixture()
def wheelhouse(tmp_path: Path) -> Path:
    for name in EXAMPLE_WHEELS:
        (tmp_path / name).touch()
    return tmp_path


def everything_local(ref: str) -> bool:
    return True


def nothing_local(ref: str) -> bool:
    return False


def unreachable(ref: str) -> str:
    return "registry-1.docker.io: [Errno -3] Temporary failure in name resolution"


def test_a_debian13_cell_with_a_cp311_wheelhouse_names_the_missing_cp313_wheels_and_the_fetch_line(
        wheelhouse: Path) -> None:
    problems = [str(p) for p in check([need()], wheelhouse, "--matrix my.yaml", everything_local, unreachable)]
    assert problems == [
        f"{DEBIAN13}: wheelhouse: {wheelhouse} lacks torch==2.13.0 for cp313 (the wheelhouse has: "
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl)",
        f"{DEBIAN13}: wheelhouse: {wheelhouse} lacks numpy for cp313 (the wheelhouse has: "
        "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl)",
        f"{wheelhouse}: fetch them: `builder wheelhouse --matrix my.yaml --dest {wheelhouse} --cell {DEBIAN13}`"]


def test_the_same_wheelhouse_serves_a_debian12_cell(wheelhouse: Path) -> None:
    assert check([need("3.11", "debian-12", DOCKERFILE_13.replace("13", "12"))], wheelhouse, "--matrix m",
                 everything_local, unreachable) == []


def test_a_missing_version_is_named_even_when_another_version_is_there(wheelhouse: Path) -> None:
    [missing] = wheel_problems(need("3.11", requirements=("torch==2.12.0",)), wheelhouse)
    assert missing == "torch==2.12.0 for cp311 (the wheelhouse has: none of that name and version)"


@pytest.mark.parametrize(("wheel", "python", "installs"), [
    ("torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl", "3.13", True),
    ("torch-2.13.0-cp313-cp313t-manylinux_2_28_x86_64.whl", "3.13", False),  # free-threaded ABI
    ("torch-2.13.0-cp313-cp313-manylinux_2_28_aarch64.whl", "3.13", False),  # another machine
    ("torch-2.13.0-cp313-cp313-win_amd64.whl", "3.13", False),
    ("torch-2.13.0-cp313-cp313-musllinux_1_2_x86_64.whl", "3.13", False),  # musl: no Debian/Ubuntu/Rocky
    ("torch-2.13.0-cp39-abi3-manylinux2014_x86_64.whl", "3.13", True),  # stable ABI from 3.9 up
    ("torch-2.13.0-cp314-abi3-manylinux2014_x86_64.whl", "3.13", False),
    ("torch-2.13.0-py3-none-any.whl", "3.10", True),
    ("torch-2.13.0+rocm7.2-cp312-cp312-linux_x86_64.whl", "3.12", True),
])
def test_wheel_tags_are_matched_to_the_images_python_and_platform(tmp_path: Path, wheel: str, python: str,
                                                                  installs: bool) -> None:
    (tmp_path / wheel).touch()
    assert (wheel_problems(need(python, requirements=("torch==2.13.0",)), tmp_path) == []) == installs


def test_a_pinned_local_version_needs_that_local_version(tmp_path: Path) -> None:
    (tmp_path / "torch-2.13.0+rocm7.1-cp312-cp312-linux_x86_64.whl").touch()
    assert wheel_problems(need("3.12", requirements=("torch==2.13.0+rocm7.2",)), tmp_path)
    assert not wheel_problems(need("3.12", requirements=("torch==2.13.0+rocm7.1",)), tmp_path)


def test_a_cell_without_its_base_names_the_builder_base_line_and_pulls_nothing() -> None:
    asked: list[str] = []

    def remote(ref: str) -> str:
        asked.append(ref)
        return unreachable(ref)

    problems = check([need(), need(tag="cpu_debian13_py3.13_torch2.13.0_devel")], None, "--matrix m",
                     nothing_local, remote)
    assert asked == ["debian:13"]  # one lookup per base, however many images start from it
    assert [str(p) for p in problems] == [
        f"{tag}: base image: debian:13 is not in the local engine and not pullable (registry-1.docker.io: "
        "[Errno -3] Temporary failure in name resolution): run `builder base debian-13` (debootstrap from the "
        "host's mirror; no registry needed)" for tag in (DEBIAN13, "cpu_debian13_py3.13_torch2.13.0_devel")]


@pytest.mark.parametrize(("kit", "where", "then"), [
    (BuildKit("other", context="gpu-box", driver="docker"), "the engine of docker context gpu-box (builder other)",
     "then `docker save debian:13 | docker --context gpu-box load`"),
    (BuildKit("ci", driver="docker-container"), "builder ci, whose docker-container driver has no engine's images",
     "then push debian:13 to a registry the builder reaches and pin it there (`builder lock --base-registry"),
])
def test_a_missing_base_names_the_builders_own_store_and_how_an_image_made_here_gets_there(
        kit: BuildKit, where: str, then: str) -> None:
    [problem] = check([need()], None, "--matrix m", nothing_local, unreachable, store(kit))
    said = str(problem)
    assert f"debian:13 is not in {where}" in said and "local engine" not in said, said
    assert "run `builder base debian-13`" in said and then in said, said
    assert store(BuildKit()) == store(BuildKit("default", driver="docker")) == LOCAL  # the local engine: as before


def test_a_base_a_registry_serves_or_the_engine_holds_passes() -> None:
    assert check([need()], None, "--matrix m", nothing_local, lambda ref: None) == []
    assert check([need()], None, "--matrix m", everything_local, unreachable) == []


def test_a_dnf_distros_base_is_not_offered_to_builder_base() -> None:
    [problem] = check([need("3.9", "rocky-9", "FROM rockylinux:9 AS base\n", base_tool=None)], None, "--matrix m",
                      nothing_local, unreachable)
    assert "pull or import rockylinux:9 into the engine" in str(problem) and "builder base" in str(problem)


def test_bases_are_the_external_images_only() -> None:
    text = ("FROM --platform=linux/amd64 mirror.example:5000/library/ubuntu:24.04@sha256:" + "a" * 64 + " AS base\n"
            "FROM base AS torch\nfrom torch as runtime\nFROM scratch AS empty\nFROM debian:12\n")
    assert bases(text) == ["mirror.example:5000/library/ubuntu:24.04@sha256:" + "a" * 64, "debian:12"]


def test_an_input_error_lists_every_problem_at_once(wheelhouse: Path) -> None:
    error = InputError(check([need()], wheelhouse, "--matrix m", nothing_local, unreachable))
    assert len(error.problems) == 4  # the base, two wheels, the fetch line
