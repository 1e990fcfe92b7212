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

--installed-ratio R makes the payload compress about R times under gzip (2.7: real ROCm wheels, builder/data/
sizes.yaml; 1, the default: incompressible); sizes stay installed bytes, and the per-wave model is fed the ratio
gzip achieves on a sample. --stages times `builder stages` (the shared stages into the cache registry) before the
publish, on the same engine; --rebuild locks the row, publishes it, bumps numpy and publishes again on a new empty
engine importing the cache (rowrun.py). Every run whose steps all finished is appended to
benchmarks/results/bench_row.json (benchmarks.support.results), which bench_night reads.

Usage: python benchmarks/bench_row.py [--scale S] [--disk-gb G] [--installed-ratio R] [--stages] [--rebuild]
(needs root for the loop mount, debian:12 in the machine's engine at DOCKER_HOST, docker-registry, apt reachable
from builds for devel's toolchain)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support import loopfs, results, rocmwheels, rowfigures, rowrun, torchstandin
from benchmarks.support.scaleplumbing import FLAVORS, GB, ROOT, WHEEL_CACHE, size, terminate
from builder.core import facts
from builder.publish import sizes

GIB = 1 << 30
HIP = "7.2.0"  # the matrix's platform: rocm7.2
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


def ratio(text: str) -> float:
    try:
        return rocmwheels.check_ratio(float(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
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
    parser.add_argument("--installed-ratio", type=ratio, default=1.0, metavar="R",
                        help="installed / gzip-compressed bytes of the synthetic payload (1: incompressible; 2.7: "
                             "real ROCm wheels, builder/data/sizes.yaml)")
    parser.add_argument("--stages", action="store_true",
                        help="time `builder stages` (the shared stages into the cache registry) before the publish")
    parser.add_argument("--rebuild", action="store_true",
                        help="lock the row, and after the publish bump numpy and publish again on a new empty engine")
    return parser.parse_args(argv)


def disk_needed(scale: float, budget: int, wheels: int, ratio: float = 1.0, copies: int = 2) -> int:
    """This disk's bytes for a run at 1/scale: the loop filesystem (sparse, but it fills up to the peak: counted
    whole), `copies` of the synthetic wheels' files (their cache and the registry's layers; a locked run adds
    pip's HTTP cache), compressed `ratio` times, and what no scale shrinks (the devel toolchain, the base, their
    copies in the registry: UNSCALED)."""
    return int(budget / scale + copies * wheels / scale / ratio + UNSCALED)


def choose_scale(free: int, budget: int, wheels: int, ratio: float = 1.0, copies: int = 2) -> float | None:
    """The smallest scale factor (real size first) whose run fits in `free` bytes with a tenth to spare: the issue
    asks for real sizes unless this disk forces a factor. None when even the largest does not fit."""
    return next((float(s) for s in SCALES if disk_needed(s, budget, wheels, ratio, copies) <= free * 0.9), None)


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


def main() -> None:
    args = parse_args()
    load = os.getloadavg()[0]
    families = args.families or largest_row()
    known = facts.gfx_families()
    targets = sorted({t for f in families for t in known[f].targets})
    runner, free = sizes.DEFAULT_RUNNER_DISK, free_disk()
    wheels_bytes = int((args.common_gb + args.torch_gb + args.device_gb * len(targets)) * GB)  # real size
    fit = (wheels_bytes, args.installed_ratio, 3 if args.rebuild else 2)
    scale = args.scale if args.scale is not None else choose_scale(free, runner, *fit)
    if scale is None:
        raise SystemExit(f"this disk has {size(free)} free; even at 1/{SCALES[-1]} the row needs "
                         f"{size(disk_needed(SCALES[-1], runner, *fit))}")
    print(f"scale 1/{scale:g}: " + ("as asked" if args.scale else
          f"the smallest this disk holds ({size(disk_needed(scale, runner, *fit))} of {size(free)} free)"),
          flush=True)
    wanted = rocmwheels.Sizes(common=int(args.common_gb * GB / scale), device=int(args.device_gb * GB / scale),
                             torch=int(args.torch_gb * GB / scale), numpy=int(8e6 / scale))
    budget = int(runner / scale)
    disk = int(args.disk_gb * GB / scale) if args.disk_gb else budget
    print(f"row: {len(families)} families x {', '.join(FLAVORS)} = {2 * len(families)} images; {len(targets)} gfx "
          f"targets; scale 1/{scale:g}: common {size(wanted.common)}, torch {size(wanted.torch)}, device "
          f"{size(wanted.device)} per target; runner disk {size(budget)} (scaled), loop filesystem {size(disk)}",
          flush=True)
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.perf_counter()
    stand_in = torchstandin.files(f"{rocmwheels.TORCH_VERSION}+{rocmwheels.LOCAL_VERSION}", HIP, targets)
    wheels = rocmwheels.ensure(WHEEL_CACHE, wanted, targets, ratio=args.installed_ratio, torch_files=stand_in)
    achieved = rocmwheels.achieved_ratio(args.installed_ratio)
    print(f"synthetic wheels ready after {time.perf_counter() - started:.0f} s under {wheels.folder}; payload "
          f"installed/gzip {achieved:.3f} on a 16 MiB sample (asked {args.installed_ratio:g})", flush=True)
    row = rowfigures.Row(tuple((f, len(known[f].targets)) for f in families), wanted.common + wanted.torch,
                         wanted.device, achieved)
    options = rowrun.Options(families, budget, not args.all_at_once, args.stages, args.rebuild, row)
    work = Path(tempfile.mkdtemp(prefix="rif-bench-row-"))
    try:
        with loopfs.loop_filesystem(work / "runner.img", work / "runner", disk) as mount:
            outcome = rowrun.run(mount, work, wheels, real_numpy(), options)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep_wheels:
            shutil.rmtree(wheels.folder, ignore_errors=True)  # gigabytes of this disk; cheap to write again
    print()
    rowfigures.print_figures(outcome.figures)
    print_steps(outcome)
    print(f"total {time.perf_counter() - started:.0f} s")
    figures = recorded(outcome, row, scale, args.installed_ratio)
    if outcome.ok():
        run = results.record("bench_row", figures, load, notes="; ".join(filter(None, [outcome.notes,
                                                                                     *outcome.failed()])))
        print(f"recorded in {results.path_of('bench_row')}: {run.cite()}")
    else:
        print("not recorded: the publish failed (its figures are not a run a model may cite)")


def print_steps(outcome: rowrun.Outcome) -> None:
    """The stages' and the rebuild's figures, beside the publish's."""
    if (st := outcome.stages) is not None:
        per = f"{st.per_stage:.1f} s a shared stage" if st.per_stage else "no stage built"
        print(f"builder stages:                   exit {st.returncode}, {st.built} built, {st.failed} failed, "
              f"{st.wall:.0f} s ({per}), {size(st.uploaded)} uploaded")
    if (rb := outcome.rebuild) is not None:
        cold = outcome.figures.measured.wall
        print(f"numpy bump, new empty engine:     exit {rb.returncode}, {outcome.rebuild_published}/"
              f"{outcome.rebuild_images} images, {rb.wall:.0f} s, {size(rb.uploaded)} uploaded")
        print(f"rebuild wall / cold wall:         {rb.wall / cold:.3f} ({rb.wall:.0f} s / {cold:.0f} s)")


def recorded(outcome: rowrun.Outcome, row: rowfigures.Row, scale: float, asked: float) -> dict[str, float]:
    """The run's figures for benchmarks/results/bench_row.json: the publish's (rowfigures.recorded), the scale,
    the payload's ratios (asked, and achieved: what the model was fed), and the stages' and the rebuild's."""
    out = rowfigures.recorded(outcome.figures, row)
    out.update(scale=scale, installed_ratio=asked, achieved_ratio=round(row.ratio, 4))
    if (st := outcome.stages) is not None and st.returncode == 0:
        out.update(stages_s=round(st.wall, 1), stages_count=float(st.built), stages_failed=float(st.failed),
                   stages_uploaded_bytes=float(st.uploaded))
        if st.per_stage is not None:
            out["stage_s"] = round(st.per_stage, 1)
    if (rb := outcome.rebuild) is not None and rb.returncode == 0:
        out.update(rebuild_wall_s=round(rb.wall, 1), rebuild_images=float(outcome.rebuild_published),
                   rebuild_uploaded_bytes=float(rb.uploaded),
                   rebuild_per_cold=round(rb.wall / outcome.figures.measured.wall, 4))
    return out


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, in the wheels (a cache the next run completes) or the publish
        print("\ninterrupted: the engine, registry and loop filesystem are gone (half-written wheels are written again "
              "by the next run)", file=sys.stderr)
        raise SystemExit(130) from None
