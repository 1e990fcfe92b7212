"""The Apptainer runner: an engine image with Apptainer in it, made here from the host's Debian mirror, never pulled.

Debian sid packages Apptainer (1.4; it needs glibc 2.38, so Debian 12 has none). The runner is a minbase sid root
debootstrapped with Apptainer, squashfs-tools and the FUSE tools it mounts SIFs with, imported into the engine
under a tag that is a hash of this recipe: made once, then reused by every run on that engine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

from builder.buildkit import baseimage
from builder.core.errors import InputError, Problem
from builder.core.logfiles import LOG_DIR, logged_run
from builder.core.scratch import scratch_dir

REPOSITORY = "rif-apptainer-runner"  # not the factory's namespace: `builder prune` and the tests leave it alone
SUITE = "sid"
PACKAGES = ("apptainer", "squashfs-tools", "squashfuse", "fuse2fs", "fuse-overlayfs", "ca-certificates")
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


def recipe() -> dict[str, object]:
    """What the runner is made from; its hash is the runner's tag."""
    return {"distro": "debian", "suite": SUITE, "variant": "minbase", "packages": sorted(PACKAGES), "version": 1}


def runner_ref() -> str:
    digest = hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()
    return f"{REPOSITORY}:{digest[:16]}"


def ensure(client: docker.DockerClient, mirror: str | None = None) -> str:
    """The runner's reference, made now when the engine does not have it yet."""
    ref = runner_ref()
    try:
        client.images.get(ref)
    except ImageNotFound:
        make(ref, mirror)
    except DockerException as exc:
        raise RuntimeError(f"cannot look up the Apptainer runner {ref}: {exc}") from exc
    return ref


def make(ref: str, mirror: str | None = None) -> None:
    """Debootstrap the recipe's root from the host's Debian mirror and `docker import` it as ref."""
    mirror = mirror or baseimage.host_mirror("debian")
    if mirror is None:
        raise InputError([Problem(baseimage.APT_SOURCES, None, "mirror",
                                  "no debian mirror in the host's apt sources: the Apptainer runner is debootstrapped "
                                  "from one")])
    if shutil.which("debootstrap") is None:
        raise RuntimeError("the Apptainer runner is made with debootstrap, which is not installed "
                           "(apt-get install debootstrap)")
    with scratch_dir("rif-apptainer-root-") as tmp:
        root = tmp / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}"]
        if KEYRING.exists():
            cmd.append(f"--keyring={KEYRING}")
        logged_run([*cmd, SUITE, str(root), mirror], LOG_DIR / "apptainer-runner.log")
        _slim(root)
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "--change", 'CMD ["bash"]', "-", ref], stdin=tar.stdout, check=True,
                       stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise RuntimeError("tar of the Apptainer runner's root filesystem failed")


def _slim(root: Path) -> None:
    """What the runner never needs: apt's lists and downloaded packages, debootstrap's leftovers."""
    for pattern in ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb", "debootstrap"):
        for path in root.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
