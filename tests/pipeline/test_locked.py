"""Locked publishing against a real engine and a real local registry.

One image (runtime on Debian 12, CPU torch from a wheelhouse), its base image served by a registry mirror, taken
through the lock's life: lock, publish, re-publish (nothing), a tampered wheel (refused by --require-hashes,
nothing pushed), a new numpy (only the numpy step's layer is new), and a new base digest (every step built again
from the same lock: byte-identical site-packages). A devel image adds no lock of its own (its toolchain comes
from apt, on the base the lock pins), only minutes: it is left out.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import docker
import pytest

from builder.registry.client import RegistryClient
from testkit.matrices import BARE_TORCH, cpu_matrix, write_matrix
from testkit.synthwheels import rebrand
from tests.fakes.checkout import builder_cli

pytestmark = [pytest.mark.docker, pytest.mark.registry]

MATRIX = cpu_matrix(BARE_TORCH, image="pytorch") + "  flavor: [runtime]\n"
RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"
SITE = "/opt/venv/lib/python3.11/site-packages"


def publish(matrix: Path, tree: Path, wheels: Path, registry: str, record: Path) -> dict[str, str]:
    run = builder_cli("publish", "--matrix", str(matrix), "--locks", str(tree), "--wheelhouse", str(wheels),
                      "--registry", registry, "--record", str(record), "--progress", "plain", cwd=matrix.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    return {row["tag"]: row["state"] for row in json.loads(record.read_text())["images"]}


def lock(matrix: Path, tree: Path, wheels: Path, mirror: str, *update: str) -> str:
    run = builder_cli("lock", "--matrix", str(matrix), "--out", str(tree), "--wheelhouse", str(wheels),
                      "--base-registry", mirror, *update)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def changed_locks(output: str) -> set[str]:
    return {line.split()[-1].split("/lock/")[-1] for line in output.splitlines() if line.strip().startswith("written")}


def immutable_tags(registry: str, repository: str) -> set[str]:
    host, namespace = registry.split("/", 1)
    return {t for t in RegistryClient(host).tags(f"{namespace}/{repository}") if t.count("-") and len(t) > 13
            and t.rsplit("-", 1)[-1].isalnum() and len(t.rsplit("-", 1)[-1]) == 12}


def layers(registry: str, tag: str) -> list[str]:
    host, namespace = registry.split("/", 1)
    manifest = RegistryClient(host).manifest(f"{namespace}/pytorch", tag)
    assert manifest is not None
    return [layer["digest"] for layer in json.loads(manifest.body)["layers"]]


def site_packages(client: docker.DockerClient, image: str) -> str:
    """`sha256sum` of every file in the venv's site-packages, in path order, computed inside the image."""
    script = f"cd {SITE} && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"
    return client.containers.run(image, ["sh", "-c", script], remove=True).decode()


def test_a_locked_image_is_rebuilt_exactly_when_its_locked_inputs_change(
        tmp_path: Path, base_image: str, wheelhouse: Path, registry: str, namespace: str,
        docker_client: docker.DockerClient) -> None:
    matrix = write_matrix(tmp_path, MATRIX)
    tree, wheels = tmp_path / "tree", tmp_path / "wheels"
    wheels.mkdir()
    for wheel in wheelhouse.glob("*.whl"):
        os.link(wheel, wheels / wheel.name)
    mirror = f"{namespace}-mirror"  # the base image's registry, as a Docker Hub mirror would serve it
    docker_client.images.get(base_image).tag(f"{mirror}/debian", "12")
    docker_client.images.push(f"{mirror}/debian", "12")

    assert changed_locks(lock(matrix, tree, wheels, mirror)) == {"base.txt", "torch.txt", "torch-deps.txt",
                                                                 "runtime.txt"}
    assert "@sha256:" in (tree / "cpu_debian12_py3.11_torch2.13.0" / "lock" / "base.txt").read_text()
    assert publish(matrix, tree, wheels, namespace, tmp_path / "r1.json") == {RUNTIME: "published"}
    first = immutable_tags(namespace, "pytorch")
    assert len(first) == 1

    # unchanged locks: nothing is built or pushed
    assert publish(matrix, tree, wheels, namespace, tmp_path / "r2.json") == {RUNTIME: "skipped"}
    assert immutable_tags(namespace, "pytorch") == first

    # a wheel that is not the locked one: --require-hashes refuses it, nothing is pushed
    [numpy] = wheels.glob("numpy-*.whl")
    original = numpy.read_bytes()
    numpy.unlink()  # a new file, never the shared wheelhouse's
    numpy.write_bytes(original + b"\0altered")
    fresh = f"{namespace}-tampered"
    run = builder_cli("build", "--matrix", str(matrix), "--locks", str(tree), "--wheelhouse", str(wheels),
                      "--cell", RUNTIME, "--push", "--registry", fresh, "--report", str(tmp_path / "r3.json"),
                      cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    [row] = json.loads((tmp_path / "r3.json").read_text())["images"]
    assert row["state"] == "failed" and row["failed_stage"] == "build"
    assert "does not match the hashes in the lock" in row["failure"], row
    assert any("DO NOT MATCH THE HASHES" in line for line in row["log_tail"]), row["log_tail"]
    assert immutable_tags(fresh, "pytorch") == set()
    numpy.unlink()
    numpy.write_bytes(original)

    # a newer numpy in the wheelhouse: the lock moves only where numpy is installed, and so does the image
    rebrand(numpy, "2.4.99", wheels)
    assert changed_locks(lock(matrix, tree, wheels, mirror, "--update")) == {"runtime.txt"}
    assert publish(matrix, tree, wheels, namespace, tmp_path / "r4.json") == {RUNTIME: "published"}
    second = immutable_tags(namespace, "pytorch")
    assert len(second - first) == 1
    # each step mounts only its own wheels, so the torch layers are BuildKit's cached ones: byte for byte the same,
    # and only the numpy step's layer is new (nothing else is pushed again)
    [old_runtime] = [t for t in first if t.startswith(RUNTIME)]
    [new_runtime] = [t for t in second - first if t.startswith(RUNTIME)]
    before, after = layers(namespace, old_runtime), layers(namespace, new_runtime)
    log = (tmp_path / ".rif" / "logs" / f"{RUNTIME}.log").read_text()
    torch_steps = [line for line in log.splitlines() if "[torch " in line or line.endswith(" CACHED")]
    # layers: base, apt, groups, torch, torch's deps | numpy's step, the smoke program's and the cell's steps, WORKDIR
    assert before[:5] == after[:5] and before[5] != after[5], (before, after, torch_steps)
    out = docker_client.containers.run(f"{namespace}/pytorch:{RUNTIME}", ["pip", "list", "--format=json"],
                                       remove=True)
    assert {p["name"]: p["version"] for p in json.loads(out)}["numpy"] == "2.4.99"

    # a new base image digest (one changed file): only base.txt moves, and the image on that base. Every step of
    # it runs again (a new base is a new cache key all the way up): the same locked wheels, installed a second
    # time with no cache to draw on, give byte-identical site-packages
    changed = docker_client.containers.run(base_image, ["sh", "-c", "echo fix > /etc/rif-base-fix"], detach=True)
    changed.wait()
    changed.commit(f"{mirror}/debian", "12")
    changed.remove()
    docker_client.images.push(f"{mirror}/debian", "12")
    assert changed_locks(lock(matrix, tree, wheels, mirror, "--update")) == {"base.txt"}
    before_base = site_packages(docker_client, f"{namespace}/pytorch:{RUNTIME}")
    assert publish(matrix, tree, wheels, namespace, tmp_path / "r5.json") == {RUNTIME: "published"}
    third = immutable_tags(namespace, "pytorch")
    assert len(third - second) == 1
    log = (tmp_path / ".rif" / "logs" / f"{RUNTIME}.log").read_text().splitlines()
    torch_steps = {line.split()[0] for line in log if re.match(r"#\d+ \[(\S+ )?torch \d+/\d+\] RUN ", line)}
    assert torch_steps and not {line.split()[0] for line in log if line.endswith(" CACHED")} & torch_steps, log
    assert site_packages(docker_client, f"{namespace}/pytorch:{RUNTIME}") == before_base
    assert publish(matrix, tree, wheels, namespace, tmp_path / "r6.json") == {RUNTIME: "skipped"}
