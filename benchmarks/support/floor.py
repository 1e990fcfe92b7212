"""An image's floor: the bytes it cannot do without (shared by bench_build.py and bench_scale.py).

floor = base image + the Python environment (/opt/venv) + the files of every system package the base does
not have (plus the bytecode their maintainer scripts compile, which belongs to the Python they install).
Everything above the floor is overhead: caches, wheels, duplicated files, stray build output.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker

from builder.buildkit.engine import installed_bytes, run_captured

BASE = "debian:12"

# Sizes measured inside the image: the venv, and the files of every package the base does not have.
MEASURE = r"""
import os, subprocess, sys
base = set(sys.argv[1].split(","))
def size(path):
    total = 0
    for root, dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total
venv = size("/opt/venv")
pkgs = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\n"], capture_output=True, text=True).stdout.split()
seen, owned = set(), 0
for pkg in pkgs:
    if pkg in base:
        continue
    for p in subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.splitlines():
        if os.path.isfile(p) and not os.path.islink(p):
            st = os.lstat(p)
            if (st.st_dev, st.st_ino) not in seen:  # merged /usr lists some files twice
                seen.add((st.st_dev, st.st_ino)); owned += st.st_size
pyc = sum(size(os.path.join(r, d)) for top in ("/usr/lib",) for r, ds, _ in os.walk(top) for d in ds
          if d == "__pycache__" and not r.startswith("/opt/venv"))
print(venv, owned + pyc)
"""


@dataclass(frozen=True)
class Floor:
    image: int  # the image's size (base included)
    base: int
    venv: int
    packages: int

    @property
    def over(self) -> int:
        return self.image - self.base - self.venv - self.packages

    @property
    def ratio(self) -> float:
        return self.over / self.image if self.image else 0.0


def image_size(client: docker.DockerClient, ref: str) -> int:
    """Unpacked bytes, as the floor's parts are measured (inspect's Size is the compressed content on containerd)."""
    size = installed_bytes(client, ref)
    if size is None:
        raise RuntimeError(f"the engine does not report {ref}'s unpacked size (Docker 28+ does)")
    return size


def base_packages(client: docker.DockerClient, base: str = BASE) -> str:
    _, out, _ = run_captured(client, base, ["dpkg-query", "-W", "-f", "${Package},"])
    return out.strip(",")


def floor_parts(client: docker.DockerClient, ref: str, base_pkgs: str) -> tuple[int, int]:
    """(venv bytes, system package bytes) measured inside the image."""
    _, out, _ = run_captured(client, ref, ["/usr/bin/python3", "-c", MEASURE, base_pkgs], entrypoint=[], user="root")
    venv, pkgs = out.split()
    return int(venv), int(pkgs)


def floor(client: docker.DockerClient, ref: str, base: str = BASE) -> Floor:
    venv, pkgs = floor_parts(client, ref, base_packages(client, base))
    return Floor(image_size(client, ref), image_size(client, base), venv, pkgs)
