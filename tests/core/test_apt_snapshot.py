"""A pinned apt step against a real engine and a loopback snapshot archive: it installs exactly the lock's versions,
byte for byte the same after the archive moved, and fails loudly when apt would install anything the lock lacks."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from builder.core import aptindex, ospins
from builder.core.osfamilies import apt
from builder.render import aptfetch
from tests.fakes.aptarchive import Deb, Served, write_snapshot

pytestmark = pytest.mark.docker

T1 = "20261101T000000Z"
CLAMP = ("find / -xdev $(awk '$5 != \"/\" { printf \"-path %s -prune -o \", $5 }' /proc/self/mountinfo) "
         "-newermt \"@$T\" -exec touch --no-dereference --date=@0 -- {} +")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "archive"
    write_snapshot(root, T1, "bookworm", [Deb("rif-hello", "1.0", "rif-lib (>= 1.0)"), Deb("rif-lib", "1.0")],
                   real=True)
    server = Served(root)
    yield root, server.url
    server.close()


def build(context: Path, lock: ospins.OsLock, base: str, tag: str) -> list[str]:
    """Build FROM base plus the lock's step, no cache; the image's layer digests."""
    cache = f"--mount=type=cache,id=rif-apt-test-{uuid.uuid4().hex[:8]},target=/var/cache/apt,sharing=locked"
    steps = " && ".join([*apt.pinned_install_commands(lock), apt.cleanup_command()])
    (context / "Dockerfile").write_text(f"FROM {base}\nRUN {cache} T=$(date +%s) && {steps} && {CLAMP}\n")
    run = subprocess.run(["docker", "buildx", "build", "--network", "host", "--no-cache", "--load", "-t", tag,
                          "--build-arg", "SOURCE_DATE_EPOCH=0", str(context)], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    inspect = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True, check=True)
    return list(json.loads(inspect.stdout)[0]["RootFS"]["Layers"])


def lock_of(url: str, wants: tuple[str, ...]) -> ospins.OsLock:
    sources = (ospins.Source(f"{url}/{T1}/", "bookworm", ("main",)),)
    index = aptindex.load(sources, aptfetch.fetch)
    return ospins.OsLock("debian-12", wants, T1, sources, tuple(index.closure(wants, index.base_set())), True)


def test_a_pinned_step_is_the_same_after_the_archive_moved_and_refuses_what_it_does_not_pin(
        tmp_path: Path, served: tuple[Path, str], base_image: str, docker_client: docker.DockerClient) -> None:
    root, url = served
    lock = lock_of(url, ("rif-hello",))
    assert {f"{p.name}={p.version}" for p in lock.packages} == {"rif-hello=1.0", "rif-lib=1.0"}
    tag = f"rif-apt-snapshot-test:{uuid.uuid4().hex[:8]}"
    (tmp_path / "ctx").mkdir()
    try:
        first = build(tmp_path / "ctx", lock, base_image, tag)
        # the mirror moves: a newer rif-lib is served where the lock's version still is
        write_snapshot(root, T1, "bookworm", [Deb("rif-hello", "1.0", "rif-lib (>= 1.0)"), Deb("rif-lib", "1.0"),
                                               Deb("rif-lib", "1.1")], real=True)
        assert build(tmp_path / "ctx", lock, base_image, tag) == first
        shown = docker_client.containers.run(tag, ["dpkg-query", "-W", "rif-lib"], remove=True).decode()
        assert shown.split() == ["rif-lib", "1.0"]
        partial = ospins.OsLock(lock.os, lock.wants, T1, lock.sources,
                                tuple(p for p in lock.packages if p.name == "rif-hello"), True)
        with pytest.raises(AssertionError, match="apt would install packages the lock does not pin"):
            build(tmp_path / "ctx", partial, base_image, tag)
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)
