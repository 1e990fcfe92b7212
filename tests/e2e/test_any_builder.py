"""Any BuildKit (issue 28, item 5): `builder build --builder NAME` on a second builder gives the very image a
local build gives.

The second builder is a second dockerd (the project's engine binaries, benchmarks/support/freshengine.py: its own
socket, data root and exec root, no bridge, loopback only), reached as a docker context in a DOCKER_CONFIG of the test's
own (~/.docker stays untouched; the buildx plugin is linked in). Its engine gets the base image copied from the
main engine (docker save | docker load), as a runner would pull it. The image baked there comes back through
the OCI layout and is loaded into the main engine (DOCKER_HOST), where validation would run; the second engine's
build history shows the bake ran there, and its image store does not hold the image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from benchmarks.support.freshengine import empty_engine
from builder.matrix.expand import load_matrix
from builder.render.dockerfile import render_images
from builder.render.sources import WheelSource
from testkit import synthwheels
from testkit.matrices import BARE_TORCH, cpu_matrix, write_matrix
from tests.fakes.checkout import ROOT

pytestmark = pytest.mark.docker


@dataclass(frozen=True)
class Second:
    context: str  # the builder's name: a docker context, in env's DOCKER_CONFIG
    host: str  # its engine's DOCKER_HOST
    env: dict[str, str]  # the environment of `builder`: the main engine's DOCKER_HOST, the test's DOCKER_CONFIG


def docker_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def second(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Second]:
    root = tmp_path_factory.mktemp("second")
    config = root / "config"
    config.mkdir()
    plugins = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "cli-plugins"
    if plugins.is_dir():  # scripts/setup.sh puts buildx there; a system-wide plugin is found without it
        (config / "cli-plugins").symlink_to(plugins)
    env = {**os.environ, "DOCKER_CONFIG": str(config)}
    try:
        with empty_engine(root / "engine") as started:
            # freshengine yields the engine's DOCKER_HOST (or, once issue 28 item 6 lands there, an Engine with it)
            host = str(getattr(started, "host", started))
            info = docker_cli("-H", host, "info", "--format", "{{.DockerRootDir}}")
            assert info.returncode == 0 and info.stdout.strip() == str(root / "engine" / "data"), info.stderr
            saved = subprocess.Popen(["docker", "save", base_image], stdout=subprocess.PIPE)
            loaded = subprocess.run(["docker", "-H", host, "load", "-q"], stdin=saved.stdout, capture_output=True,
                                    text=True, timeout=300, check=False)
            assert saved.stdout is not None
            saved.stdout.close()
            assert saved.wait() == 0 and loaded.returncode == 0, loaded.stderr
            context = f"rif-second-{uuid.uuid4().hex[:8]}"
            made = docker_cli("context", "create", context, "--docker", f"host={host}", env=env)
            assert made.returncode == 0, made.stderr
            yield Second(context, host, env)
    finally:
        subprocess.run(["rm", "-rf", str(root / "engine")], check=False)  # its data root: root's files


def build(second: Second, matrix: Path, wheels: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    report = tmp / f"report-{uuid.uuid4().hex[:6]}.json"
    return subprocess.run([sys.executable, "-m", "builder", "build", "--matrix", str(matrix), "--wheelhouse",
                           str(wheels), "--no-validate", "--quiet", "--progress", "plain", "--report", str(report),
                           *extra], capture_output=True, text=True, env=second.env, cwd=ROOT, timeout=1200,
                          check=False)


def built_id(proc: subprocess.CompletedProcess[str]) -> str:
    """The image ID (its manifest digest, in the containerd image store) the run record gives."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = Path(proc.args[proc.args.index("--report") + 1])
    [row] = json.loads(report.read_text())["images"]
    return str(row["image_id"])


def history(second: Second) -> list[dict[str, object]]:
    """The second engine's BuildKit history (buildx 0.29: `history ls`, one JSON object a line)."""
    listed = docker_cli("--context", second.context, "buildx", "history", "ls", "--format", "json", env=second.env)
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]


def test_a_build_on_the_second_builder_is_the_local_builds_image(
        second: Second, docker_client: docker.DockerClient, tmp_path: Path) -> None:
    image = f"anyb{uuid.uuid4().hex[:8]}"
    matrix = write_matrix(tmp_path, cpu_matrix(BARE_TORCH, image=image))  # torch alone: one wheel
    [cell] = load_matrix(matrix)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    combination = render_images([cell], WheelSource(wheels))[0].group  # its Dockerfile's folder in the tree
    synthwheels.wheel(wheels, "torch", "2.13.0", payload=uuid.uuid4().bytes)  # bytes of its own: no old cache
    synthwheels.wheel(wheels, "numpy", "2.4.6")
    try:
        local = built_id(build(second, matrix, wheels, tmp_path))
        before = history(second)
        remote = built_id(build(second, matrix, wheels, tmp_path, "--builder", second.context))
        # Baked on the second engine: its history has the bake (named `<Dockerfile folder> (<stage>)`), whose
        # steps ran there, not from a cache.
        ran = [r for r in history(second) if r not in before]
        assert [(r.get("name"), r.get("status")) for r in ran] == [(f"images/{combination} (runtime)", "Completed")]
        assert int(str(ran[0]["completed_steps"])) > int(str(ran[0]["cached_steps"]))
        assert remote == local and remote.startswith("sha256:")  # byte for byte the local build's manifest
        assert docker_client.images.get(remote).id == remote  # loaded into the main engine, where it runs
        ref = f"rocm-image-factory/{image}:{cell.tag}"
        assert docker_cli("-H", second.host, "image", "inspect", ref).returncode != 0  # never loaded there
        print(f"manifest digest: local build {local}, --builder {second.context} {remote}")
    finally:
        for found in docker_client.images.list(name=f"rocm-image-factory/{image}"):
            docker_client.images.remove(found.id, force=True)


def test_the_preflight_names_a_real_builder_and_what_it_lacks(second: Second, tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, cpu_matrix(image=f"anyb{uuid.uuid4().hex[:8]}"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    proc = build(second, matrix, wheels, tmp_path, "--builder", second.context, "--build-network", "default")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"builder {second.context} (docker driver, running) lacks a bridge network" in proc.stderr
    proc = build(second, matrix, wheels, tmp_path, "--builder", "rif-no-such-builder")
    assert proc.returncode == 2 and 'no builder "rif-no-such-builder" found' in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
