"""The fixed costs of a night's jobs that this machine can measure (bench_night.py's model of a night).

- The factory's install: `pip install .` into a fresh environment with no pip cache (from PyPI, as a cold
  runner without the Actions cache does), and the way .github/actions/install-builder does it on a cache hit:
  the cached environment unpacked (tar + zstd, as actions/cache stores it) and the factory reinstalled into it
  offline (`--no-deps --no-index --no-build-isolation`). The cache's download is modelled from the compressed
  size at an assumed throughput (stated by the caller).
- A lock refresh (`builder lock --update --index-cache`): cold (every pip step resolved, one after another) and
  quiet (a warm cache, nothing changed) against a loopback simple index that answers conditional requests as
  PyPI does (testkit/simpleindex.py), over synthetic TheRock-shaped wheels; the base digests from a stand-in
  (no registry is needed to say "same digest").
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import zstandard

from builder.matrix.expand import load_matrix
from builder.render import indexpages, lockcache, resolve
from testkit.matrices import write_matrix
from testkit.simpleindex import SimpleIndex
from testkit.synthwheels import therock_like, wheel

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ["gfx942", "gfx1151", "gfx90a", "gfx950"]  # one target each: one device extra each
FAMILY_NAMES = {"gfx942": "gfx94X-dcgpu", "gfx1151": "gfx1151", "gfx90a": "gfx90a-dcgpu", "gfx950": "gfx950-dcgpu"}


@dataclass(frozen=True)
class Install:
    uncached_s: float  # pip install . into a fresh environment, no pip cache, from PyPI
    unpack_s: float  # the cached environment unpacked (tar + zstd)
    reinstall_s: float  # the factory alone into it, offline
    compressed_bytes: int  # what the cache hit downloads


@dataclass(frozen=True)
class LockRun:
    combinations: int
    pip_steps: int
    cold_s: float  # every pip step resolved by pip, one worker
    quiet_s: float  # a warm cache, nothing changed, 8 workers
    quiet_resolved: int  # pip steps resolved again on the quiet night (0 is right)
    requests: int  # what the quiet night sent the index
    conditional_304: int  # of them, conditional and answered 304
    changed_s: float  # one page changed (numpy's): the steps that read it resolved again
    changed_resolved: int


def measure_install(tmp: Path) -> Install:
    """Both ways of installing the factory, timed (network: this machine's to PyPI)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    venv = tmp / "rif-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--isolated", "--no-cache-dir", "--disable-pip-version-check",
           "install", "--quiet"]
    start = time.perf_counter()
    subprocess.run([*pip, str(ROOT)], check=True, env=env, cwd=tmp)
    uncached_s = time.perf_counter() - start
    subprocess.run([*pip, "hatchling==1.27.0"], check=True, env=env, cwd=tmp)  # the action's build backend
    packed = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(packed, closefd=False) as out, \
            tarfile.open(fileobj=out, mode="w|") as tar:
        tar.add(venv, arcname=venv.name)
    shutil.rmtree(venv)
    compressed = len(packed.getvalue())
    start = time.perf_counter()
    packed.seek(0)
    with zstandard.ZstdDecompressor().stream_reader(packed) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
        tar.extractall(tmp, filter="tar")
    unpack_s = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run([*pip, "--no-deps", "--no-index", "--no-build-isolation", "--force-reinstall", str(ROOT)],
                   check=True, env=env, cwd=tmp)
    return Install(uncached_s, unpack_s, time.perf_counter() - start, compressed)


def matrix_text(url: str, families: list[str], oses: list[str]) -> str:
    gfx = ", ".join(FAMILY_NAMES[f] for f in families)
    return (f'index_urls: {{rocm7.2: "{url}"}}\nmatrix:\n  os: [{", ".join(oses)}]\n  platform: [rocm7.2]\n'
            "  channel: [local]\n  torch:\n    - {version: '2.13.0', torchvision: null, torchaudio: null}\n"
            f"  gfx: [{gfx}]\n  flavor: [runtime]\n")


def measure_lock(tmp: Path, quick: bool) -> LockRun:
    """A cold refresh, a quiet one and one after numpy's page changed, against the loopback index."""
    families = FAMILIES[:1] if quick else FAMILIES
    oses = ["debian-12"] if quick else ["debian-12", "ubuntu-24.04"]
    therock_like(tmp / "wheels", families)
    index = SimpleIndex(tmp / "wheels")
    original = resolve.pin_base
    resolve.pin_base = lambda ref, registry, insecure: f"{ref}@sha256:{hashlib.sha256(ref.encode()).hexdigest()}"
    try:
        cells = load_matrix(write_matrix(tmp, matrix_text(index.url, families, oses)))
        tree, cache = tmp / "tree", tmp / "cache"
        cold = lockcache.LockCache(cache)
        start = time.perf_counter()
        refreshed(resolve.lock_tree(cells, tree, update=True, cache=cold, workers=1))
        cold_s = time.perf_counter() - start
        seen = len(index.requests)
        quiet = lockcache.LockCache(cache)
        start = time.perf_counter()
        refreshed(resolve.lock_tree(cells, tree, update=True, cache=quiet, workers=8))
        quiet_s = time.perf_counter() - start
        night = index.requests[seen:]
        made = wheel(tmp / "wheels", "numpy", "2.4.7", payload=b"m" * 64)
        os.utime(made, (time.time() + 5, time.time() + 5))
        changed = lockcache.LockCache(cache)
        start = time.perf_counter()
        refreshed(resolve.lock_tree(cells, tree, update=True, cache=changed, workers=8))
        changed_s = time.perf_counter() - start
    finally:
        resolve.pin_base = original  # type: ignore[assignment]
        index.close()
    return LockRun(len(oses), len(cold.resolved), cold_s, quiet_s,
                   len(quiet.resolved), len(night),
                   sum(r.conditional and r.status == 304 and r.agent == indexpages.USER_AGENT for r in night),
                   changed_s, len(changed.resolved))


def refreshed(report: resolve.LockReport) -> None:
    """A refresh that failed measured nothing: stop with pip's words rather than print a figure of it."""
    if report.errors:
        raise SystemExit("lock refresh failed: " + "; ".join(e.line() for e in report.errors))


def scratch() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="rif-bench-cost-")
