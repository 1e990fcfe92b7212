"""The largest production row at ROCm size (issue 37, item 7): the real `builder publish` of that row on an engine
whose data root is a filesystem of the runner's size, against a loopback registry.

The row is the one `builder matrix -m matrix.yaml --format github` gives the most images (TheRock 10.0: every GPU
family of its line, runtime and devel). Its images are built from synthetic, incompressible wheels of the sizes
the data cites (rocmwheels.py): torch and the ROCm libraries every family shares, and one device package per gfx
target (TheRock's device-all layer is 18.6 GB for its targets: about 0.6 GB each), on the local channel, debian-12
(the machine has no registry and no Ubuntu mirror to make ubuntu-24.04 from). Where this disk forces one, a scale
factor divides every size and the runner's disk: --scale, by default the smallest that fits the disk's free bytes
(choose_scale: the largest row runs at 1/2 with 54 GB free, 1/4 with 29 GB, 1/8 with 16 GB).

The engine is a fresh dockerd of its own (freshengine.py: the machine's binaries, containerd image store), its
data root and the run's temporary folder (where a bake's OCI layout goes, as on a runner with one disk) on a
loop-mounted ext4 of the scaled runner disk (loopfs.py), whose used bytes are sampled while the publish runs.
The registry is a fresh `docker-registry serve` behind a proxy that counts the bytes sent to it (cache export and
push); both go away at the end, the loop filesystem is unmounted and its file deleted, Ctrl-C included.

Usage: python benchmarks/bench_row.py [--scale S] [--disk-gb G]   (needs root for the loop mount, debian:12 in
the machine's engine at DOCKER_HOST, docker-registry, apt reachable from builds for devel's toolchain)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.bench_scale import seed
from benchmarks.support import loopfs, rocmwheels, rowfigures, torchstandin
from benchmarks.support.countingproxy import CountingProxy
from benchmarks.support.freshengine import empty_engine
from benchmarks.support.localregistry import LocalRegistry
from benchmarks.support.scaleplumbing import FLAVORS, GB, ROOT, WHEEL_CACHE, size, terminate
from benchmarks.support.scalesupply import write_matrix
from benchmarks.support.wheelindex import WheelIndex
from builder.core import facts

GIB = 1 << 30
HIP = "7.2.0"  # the matrix's platform: rocm7.2
RUNNER_DISK = 48 * GIB  # builder.publish.sizes.DEFAULT_RUNNER_DISK where it exists (issue 37's other part)
SCALES = (1, 2, 4, 8, 16, 32)  # the factors --scale tries by default, real size first
# Bytes a run takes that no scale shrinks: the devel toolchain (572 MB unpacked, 190 MB compressed, on the loop
# filesystem about three times while its wave bakes and once per devel image in the registry), debian:12 and
# BuildKit's state. Runs at 1/16 and 1/4 put about 1.7 GB of the peak there (docs/benchmarks.md).
UNSCALED = 3 * GB


def positive(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a scale factor is a number above 0")
    return value


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scale", type=positive, default=None,
                        help="every size and the runner's disk divided by this (default: the smallest of "
                             f"{', '.join(map(str, SCALES))} this disk holds)")
    parser.add_argument("--common-gb", type=float, default=3.0, help="ROCm libraries every family shares (real size)")
    parser.add_argument("--torch-gb", type=float, default=1.0, help="torch itself (real size)")
    parser.add_argument("--device-gb", type=float, default=0.6, help="one gfx target's device package (real size)")
    parser.add_argument("--disk-gb", type=float, default=0.0,
                        help="the loop filesystem's size, unscaled GB (default: the runner's disk)")
    parser.add_argument("--all-at-once", action="store_true",
                        help="publish the row in one bake, every image kept (without --by-family)")
    parser.add_argument("--keep-wheels", action="store_true", help="keep the synthetic wheels for another run")
    parser.add_argument("--families", nargs="*", default=None, help="GPU families (default: the largest row's)")
    return parser.parse_args()


def disk_needed(scale: float, budget: int, wheels: int) -> int:
    """This disk's bytes for a run at 1/scale: the loop filesystem (sparse, but it fills up to the peak: counted
    whole), the synthetic wheels and the registry's copy of them (incompressible, each payload once), and what no
    scale shrinks (the devel toolchain, the base, their copies in the registry: UNSCALED)."""
    return int(budget / scale + 2 * wheels / scale + UNSCALED)


def choose_scale(free: int, budget: int, wheels: int) -> float | None:
    """The smallest scale factor (real size first) whose run fits in `free` bytes with a tenth to spare: the issue
    asks for real sizes unless this disk forces a factor. None when even the largest does not fit."""
    return next((float(s) for s in SCALES if disk_needed(s, budget, wheels) <= free * 0.9), None)


def free_disk() -> int:
    """Free bytes where the run writes: the temporary folder (loop filesystem, registry) and the wheel cache."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    return min(shutil.disk_usage(tempfile.gettempdir()).free, shutil.disk_usage(WHEEL_CACHE).free)


def largest_row() -> list[str]:
    """The GPU families of the production combination with the most images (whole: a disk no row is split for;
    at the default budget the plan refuses the pytorch.org devel image that needs a larger runner)."""
    out = subprocess.run([sys.executable, "-m", "builder", "matrix", "-m", str(ROOT / "matrix.yaml"), "--format",
                          "github", "--runner-disk", "10T"], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    rows = json.loads(out)["include"]
    cells = max((r["cells"].split() for r in rows), key=len)
    known = facts.gfx_families()
    return sorted({part for cell in cells for part in cell.split("_") if part in known})


def real_numpy() -> rocmwheels.Wheel:
    """NumPy for the images' Python (3.11), downloaded once with the host's pip (the stand-in torch computes with
    it; the smoke test's round trip needs it)."""
    folder = WHEEL_CACHE / "numpy-real"
    found = sorted(folder.glob("numpy-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "--no-deps",
                        "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(folder),
                        "numpy<2.5"], check=True)
        found = sorted(folder.glob("numpy-*.whl"))
    path = found[-1]
    data = path.read_bytes()
    return rocmwheels.Wheel("numpy", path.name.split("-")[1], path, len(data), hashlib.sha256(data).hexdigest(),
                            len(data))


def runner_disk() -> int:
    try:  # the other half of issue 37 (the plan's sizes): not on every branch
        sizes = importlib.import_module("builder.publish.sizes")
    except ImportError:
        return RUNNER_DISK
    return int(getattr(sizes, "DEFAULT_RUNNER_DISK", RUNNER_DISK))


def main() -> None:
    args = parse_args()
    families = args.families or largest_row()
    known = facts.gfx_families()
    targets = sorted({t for f in families for t in known[f].targets})
    runner, free = runner_disk(), free_disk()
    wheels_bytes = int((args.common_gb + args.torch_gb + args.device_gb * len(targets)) * GB)  # real size
    scale = args.scale if args.scale is not None else choose_scale(free, runner, wheels_bytes)
    if scale is None:
        raise SystemExit(f"this disk has {size(free)} free; even at 1/{SCALES[-1]} the row needs "
                         f"{size(disk_needed(SCALES[-1], runner, wheels_bytes))}")
    print(f"scale 1/{scale:g}: " + ("as asked" if args.scale else
          f"the smallest this disk holds ({size(disk_needed(scale, runner, wheels_bytes))} of {size(free)} "
          "free)"), flush=True)
    sizes = rocmwheels.Sizes(common=int(args.common_gb * GB / scale), device=int(args.device_gb * GB / scale),
                             torch=int(args.torch_gb * GB / scale), numpy=int(8e6 / scale))
    budget = int(runner / scale)
    disk = int(args.disk_gb * GB / scale) if args.disk_gb else budget
    print(f"row: {len(families)} families x {', '.join(FLAVORS)} = {2 * len(families)} images; {len(targets)} gfx "
          f"targets; scale 1/{scale:g}: common {size(sizes.common)}, torch {size(sizes.torch)}, device "
          f"{size(sizes.device)} per target; runner disk {size(budget)} (scaled), loop filesystem {size(disk)}",
          flush=True)
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.perf_counter()
    stand_in = torchstandin.files(f"{rocmwheels.TORCH_VERSION}+{rocmwheels.LOCAL_VERSION}", HIP, targets)
    wheels = rocmwheels.ensure(WHEEL_CACHE, sizes, targets, mixed=False, torch_files=stand_in)
    wheels.wheels.append(real_numpy())
    print(f"synthetic wheels ready after {time.perf_counter() - started:.0f} s under {wheels.folder}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="rif-bench-row-"))
    try:
        with loopfs.loop_filesystem(work / "runner.img", work / "runner", disk) as mount:
            figures = run(mount, work, wheels, families, budget, not args.all_at_once)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep_wheels:
            shutil.rmtree(wheels.folder, ignore_errors=True)  # gigabytes of this disk; cheap to write again
    print()
    rowfigures.print_figures(figures)
    print(f"total {time.perf_counter() - started:.0f} s")


def run(mount: Path, work: Path, wheels: rocmwheels.WheelSet, families: list[str], budget: int,
        by_family: bool) -> rowfigures.Figures:
    empty = loopfs.used_bytes(mount)
    registry = LocalRegistry(work / "registry")
    index = WheelIndex(wheels.wheels, "127.0.0.1", "rr" + uuid.uuid4().hex[:10])
    with empty_engine(mount / "engine") as engine:
        registry.start()
        proxy = CountingProxy(registry.address)
        index.start()
        try:
            for wheel in wheels.wheels:  # NumPy: the real one (the stand-in computes with it), not a synthetic one
                index.show(wheel, wheel.project != "numpy" or wheel.version not in rocmwheels.NUMPY_VERSIONS)
            seed(engine)
            matrix = work / "matrix.yaml"
            write_matrix(matrix, families, list(FLAVORS), index.url)
            (mount / "tmp").mkdir()
            env = {**os.environ, "DOCKER_HOST": engine.host, "RIF_BUILD_NETWORK": "host", "TMPDIR": str(mount / "tmp")}
            before = loopfs.used_bytes(mount)
            sampler = loopfs.Sampler(mount).start()
            record, log = work / "record.json", work / "publish.log"
            namespace = f"{proxy.address}/bench"
            t0 = time.perf_counter()
            with log.open("wb") as out:
                done = subprocess.run([sys.executable, "-m", "builder", "publish", "--matrix", str(matrix),
                                       "--registry", namespace, "--cache-registry", namespace, "--record",
                                       str(record), "--progress", "plain", *(["--by-family"] if by_family else [])],
                                      cwd=ROOT, env=env, stdout=out,
                                      stderr=subprocess.STDOUT, check=False)
            wall = time.perf_counter() - t0
            peak = sampler.stop()
            print(log.read_text(errors="replace")[-3000:] if done.returncode else "publish: done", flush=True)
            subprocess.run(["docker", "-H", engine.host, "buildx", "prune", "-af"], capture_output=True, check=False)
            final = loopfs.used_bytes(mount)
            held = subprocess.run(["docker", "-H", engine.host, "images", "-q", "--no-trunc"], capture_output=True,
                                  text=True, check=False).stdout.split()
            return rowfigures.collect(rowfigures.Measured(
                returncode=done.returncode, record=record, registry=registry, uploaded=proxy.sent, wall=wall,
                budget=budget, empty=empty, before=before, peak=peak, final=final, held=frozenset(held)))
        finally:
            proxy.close()
            index.stop()
            registry.stop()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, in the wheels (a cache the next run completes) or the publish
        print("\ninterrupted: the engine, registry and loop filesystem are gone (half-written wheels are written again "
              "by the next run)", file=sys.stderr)
        raise SystemExit(130) from None
