"""examples/local.yaml locked against a loopback snapshot archive of real Debian packages (issue 38's first "done
when"): every `apt-get install` of the locked Dockerfile names exact versions, the lock and the Dockerfile name the
snapshot; `builder lock --update` at a later snapshot pins a newer version that appeared in the archive, in the one lock
file that installs it; and `builder reproduce` rebuilds the published image cold from the lock recorded with it, to
the same manifest digest, then names the layer of a copy tampered with in the registry.

The archive is scripts/apt_snapshot_archive.py, as a user runs it: indexes frozen from the host's Debian mirror at the
first request, .debs from the mirror's pool. One build (published, so `builder reproduce` can rebuild it without
cache and compare), the runtime image only: the devel image's toolchain is locked and checked in its Dockerfile, not
built (minutes of compilers that prove nothing more).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from builder.audit import layers, reproduce
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Export
from builder.core import ospins
from builder.pipeline import baking, jobs
from builder.pipeline.baking import Events
from builder.registry.client import RegistryClient
from builder.render import lockrecord
from builder.render.sources import WheelSource
from testkit.layers import blob
from tests.fakes.checkout import ROOT, builder_cli

pytestmark = [pytest.mark.docker, pytest.mark.registry]

SCRIPT = ROOT / "scripts" / "apt_snapshot_archive.py"
MATRIX = ROOT / "examples" / "local.yaml"
GROUP = "cpu_debian12_py3.11_torch2.13.0"
RUNTIME = f"{GROUP}_runtime"
T1, T2 = "20261101T000000Z", "20261102T000000Z"
NEWER = "ca-certificates"  # in the runtime step's closure, arch:all, no compiled code: a cheap package to repack
PIN = re.compile(r"[a-z0-9][a-z0-9.+-]*=[0-9][A-Za-z0-9.+~:-]*")


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """The loopback snapshot archive, on a free port; its folder and URL."""
    root = tmp_path / "archive"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "serve", "--root", str(root), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "serving http://127.0.0.1:PORT/ (snapshots of MIRROR)"
    try:
        assert line.startswith("serving "), line
        yield root, line.split()[1].rstrip("/")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def bump(root: Path, *args: str) -> str:
    run = subprocess.run([sys.executable, str(SCRIPT), "bump", "--root", str(root), *args], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def lock(tree: Path, wheelhouse: Path, mirror: str, url: str, *more: str) -> set[str]:
    run = builder_cli("lock", "--matrix", str(MATRIX), "--out", str(tree), "--wheelhouse", str(wheelhouse),
                      "--base-registry", mirror, "--apt-snapshot", url, *more)
    assert run.returncode == 0, run.stdout + run.stderr
    return {line.split()[-1].split("/lock/")[-1] for line in run.stdout.splitlines()
            if line.strip().startswith("written")}


def apt_installs(dockerfile: str) -> list[list[str]]:
    """The packages of every `apt-get ... install` command of a Dockerfile (options and redirections left out)."""
    found = []
    for command in re.split(r"&&|;|\|\|", dockerfile.replace("\\\n", " ")):
        words = command.split()
        if "apt-get" in words and "install" in words:
            after = words[words.index("install") + 1:]
            after = after[:after.index(">")] if ">" in after else after
            found.append([w for w in after if not w.startswith("-")])
    return found


def test_the_example_locked_to_a_snapshot_is_reproduced_from_its_own_lock_after_the_archive_moves(
        tmp_path: Path, archive: tuple[Path, str], base_image: str, wheelhouse: Path, namespace: str,
        docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Locked at T1 and published; the archive moves under T1 and a lock --update at T2 moves the checkout's lock on.
    A cold rebuild from the lock recorded with the image (not the checkout's: --locks with it is refused, naming the
    content hashes) gives the published manifest; a layer tampered with in the registry is then named."""
    root, url = archive
    monkeypatch.setenv("RIF_APT_SNAPSHOT_TRUSTED", "yes")  # the loopback archive is unsigned
    mirror = f"{namespace}-hub"  # the base's registry, as a Docker Hub mirror would serve it
    docker_client.images.get(base_image).tag(f"{mirror}/debian", "12")
    docker_client.images.push(f"{mirror}/debian", "12")
    tree = tmp_path / "tree"

    assert lock(tree, wheelhouse, mirror, url, "--apt-snapshot-time", T1) >= {"os-base.txt", "os-devel.txt"}
    [own] = jobs.matrix_jobs(MATRIX, [RUNTIME], None, WheelSource(wheelhouse.resolve(), tree.resolve(), True))
    assert own.rendered is not None
    locked = dict(own.rendered.lock_files)  # the runtime's own lock files: what is recorded with its image
    locks = {name: ospins.read(tree / GROUP / "lock" / name) for name in ("os-base.txt", "os-devel.txt")}
    dockerfile = (tree / GROUP / "Dockerfile").read_text()
    installs = apt_installs(dockerfile)
    assert len(installs) == 4, installs  # the base step and the devel step: a simulation, then the install
    for packages in installs:
        assert packages and all(PIN.fullmatch(p) for p in packages), packages
    pinned = {f"{p.name}={p.version}" for lk in locks.values() for p in lk.packages}
    assert {p for packages in installs for p in packages} == pinned
    assert all(lk.snapshot == T1 for lk in locks.values()) and f"{url}/{T1}/" in dockerfile
    [old] = [p.version for p in locks["os-base.txt"].packages if p.name == NEWER]

    record = tmp_path / "r1.json"
    built = builder_cli("build", "--matrix", str(MATRIX), "--locks", str(tree), "--wheelhouse", str(wheelhouse),
                        "--cell", RUNTIME, "--push", "--registry", namespace, "--report", str(record),
                        "--build-network", "host", "--progress", "plain")
    assert built.returncode == 0, built.stdout + built.stderr
    [row] = json.loads(record.read_text())["images"]
    assert row["state"] == "published" and row["digest"] and row["lock_artifact"], row
    assert row["digest"] == row["image_id"]  # validated (the engine's image) is what was pushed, by digest
    ref = f"{namespace}/{row['repository']}:{row['immutable_tag']}"

    # the archive moves under the locked snapshot: a newer ca-certificates, where the locked one still is
    assert bump(root, "--time", T1, NEWER) == f"{NEWER}={old}+rif1"
    # a later snapshot (the archive as at T1, the newer package in it): --update pins it, in os-base.txt alone
    bump(root, "--time", T2, "--from", T1, NEWER)
    assert lock(tree, wheelhouse, mirror, url, "--update", "--apt-snapshot-time", T2) == {"os-base.txt"}
    moved = ospins.read(tree / GROUP / "lock" / "os-base.txt")
    assert moved.snapshot == T2 and {p.name: p.version for p in moved.packages}[NEWER] == f"{old}+rif1"
    assert {p for p in moved.packages if p.name != NEWER} == {p for p in locks["os-base.txt"].packages
                                                             if p.name != NEWER}
    assert f"{NEWER}={old}+rif1" in (tree / GROUP / "Dockerfile").read_text()

    args = ["--matrix", str(MATRIX), "--wheelhouse", str(wheelhouse), "--build-network", "host", "--progress", "plain"]
    given = builder_cli("reproduce", ref, *args, "--locks", str(tree))  # --locks wins, and is not this image's lock
    assert given.returncode == 1, given.stdout[-3000:] + given.stderr[-3000:]
    assert f"(the lock recorded with the image, {row['lock_artifact']}, is not used)" in given.stdout
    assert "was built from other inputs" in " ".join(given.stderr.split())

    same = builder_cli("reproduce", ref, *args)  # cold, from the lock recorded with the image: T1's pins
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-3000:]
    summary = lockrecord.Recorded(locked).summary()
    assert summary.startswith(f"OS snapshot {T1}, ") and not summary.endswith(" 0 OS packages"), summary
    assert f"using the lock recorded with the image: {row['lock_artifact']}, {summary}" in same.stdout, same.stdout
    assert f"identical: the cold rebuild's manifest is {row['digest']}" in same.stdout, same.stdout
    shown = docker_client.containers.run(ref, ["dpkg-query", "-W", NEWER], remove=True)
    assert shown.decode().split() == [NEWER, old]

    tampered_is_named(ref, namespace, row, locked, wheelhouse, tmp_path)


def tampered_is_named(ref: str, namespace: str, row: dict[str, Any], locked: dict[str, str], wheelhouse: Path,
                      tmp_path: Path) -> None:
    """The cell file's layer gets other bytes in the registry, under the same tag. The tampered image (no lock refers
    to it: its manifest is another digest) is compared with a rebuild from BuildKit's cache of the recorded lock (the
    image is byte-reproducible: the same manifest as the cold rebuild proved), so the suite pays for one cold rebuild,
    not two."""
    registry, repository = namespace.split("/", 1)[0], f"{namespace.split('/', 1)[1]}/{row['repository']}"
    api = RegistryClient(registry)
    published = api.manifest(repository, row["immutable_tag"])
    assert published is not None
    body = json.loads(published.body)
    cell = next(i for i, d in reversed(list(enumerate(body["layers"])))  # above it: WORKDIR's empty layer
                if "opt/rif/cell.json" in layers.entries(io.BytesIO(api.blob(repository, d["digest"]))))
    evil = blob({"opt/rif/cell.json": b'{"evil": true}'})
    body["layers"][cell] = {**body["layers"][cell], "digest": api.push_blob(repository, evil), "size": len(evil)}
    api.put_manifest(repository, row["immutable_tag"], json.dumps(body).encode(), published.media_type)

    recorded = tmp_path / "recorded"
    lockrecord.Recorded(locked).write(recorded, GROUP)
    source = WheelSource(wheelhouse.resolve(), recorded.resolve(), True)  # as RIF_APT_SNAPSHOT_TRUSTED=yes makes it
    [job] = jobs.matrix_jobs(MATRIX, [row["tag"]], None, source)
    kit = BuildKit(None, "host")  # the CLI runs' --build-network above: the same cache keys

    def warm(image: reproduce.Published, layout: Path) -> str:
        assert (image.tag, image.content_hash, image.lock) == (job.tag, job.content_hash, None)
        export = Export(layout, image.compression, load=False)
        built = baking.bake_into([job], source, Events(), export, kit)
        assert built[job.tag].ok and built[job.tag].manifest_digest, built[job.tag].error
        return str(built[job.tag].manifest_digest)

    verdict = reproduce.check(ref, repository, row["immutable_tag"], api, warm)
    said = "\n".join(verdict.lines())
    assert not verdict.identical and verdict.layer == cell, said
    assert f"layer {cell} of {len(body['layers'])} differs" in said
    assert "~ opt/rif/cell.json (" in said
