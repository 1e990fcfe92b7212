"""ROCm-scale benchmark (issue 16, item 8): the old layout and the BuildKit layout side by side, in one run.

Why synthetic: a real ROCm environment is 10-20 GB and needs a GPU index; what the layout costs depends only
on the bytes, how they split into layers and how they compress. So the environment is made of synthetic
wheels of realistic size and compressibility (rocmwheels.py): a common package of several GB that torch
depends on, one ~1 GB device package per GPU target (pulled by `torch[device-<target>]`, as on TheRock's
index) and a small numpy whose version the update scenario bumps. They are served from the host over HTTP
(wheelindex.py), so every wheel download is counted.

Both layouts build runtime + devel for three single-target families of builder/data/gfx.yaml, local
channel, debian-12, and push them to a fresh local registry each:
- old: the template of 4a75d66^ (oldlayout.py), one classic build per image, pip --no-cache-dir;
- new: `builder render` of the same matrix, built with plain `docker buildx bake`.
Then, per layout: a numpy update of one family's pair (rebuild, push, count what the registry gained), and
for the new layout a build of a changed cell (another user: a new combination, every pip step runs again)
to show the pip cache mount serving what was downloaded before. Last, `builder build` against plain
`docker buildx bake` of the same file, both fully cached.

It builds on a fresh engine of its own (freshengine.py: the machine's dockerd and buildx binaries, the
containerd image store production uses, an empty data root and containerd), so every build is cold and the
machine's engine is neither read nor filled; debian:12 is copied in from the machine's engine (DOCKER_HOST).
The engine and all it holds go at the end, Ctrl-C included. `--skip-old` leaves out the old layout (the
previous template does not change; it is what needs the disk).

Usage: python benchmarks/bench_scale.py [--common-gb 3 --device-gb 1 --torch-gb 0.25 --numpy-mb 16] [--skip-old]
Needs: Docker with buildx and debian:12 (scripts/setup.sh), docker-registry, apt reachable from builds (devel's
toolchain), and disk: the old layout alone holds about 14x one environment (venv stages, six copies, their
compressed content in containerd's store, the registry).

Its parts: scaleplumbing.py (constants, cleanup, engine and registry steps), scalesupply.py (wheels, index,
matrices, pip cache), scalelayouts.py (the two layouts), scaletiming.py (builder against plain bake) and
scaletable.py (the printed figures).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker

from benchmarks.support import rocmwheels
from benchmarks.support.freshengine import Engine, empty_engine
from benchmarks.support.rocmwheels import Sizes, WheelSet
from benchmarks.support.scalelayouts import new_layout, old_layout
from benchmarks.support.scaleplumbing import BASE, FAMILIES, FLAVORS, GB, MB, WHEEL_CACHE, Resources, size, terminate
from benchmarks.support.scalesupply import forget_wheels, make_supply, write_matrix
from benchmarks.support.scaletable import no_old, print_notes, print_table, rows
from benchmarks.support.scaletiming import timing
from builder.core import facts

# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--common-gb", type=float, default=3.0, help="installed size of the common package")
    parser.add_argument("--device-gb", type=float, default=1.0, help="installed size of each device package")
    parser.add_argument("--torch-gb", type=float, default=0.25, help="installed size of torch itself")
    parser.add_argument("--numpy-mb", type=float, default=16.0, help="installed size of the small dependency")
    parser.add_argument("--families", nargs=3, default=list(FAMILIES), metavar="FAMILY",
                        help="three single-target gfx families of builder/data/gfx.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="warm timing runs of each command")
    parser.add_argument("--no-timing", action="store_true", help="skip builder build vs plain bake")
    parser.add_argument("--skip-old", action="store_true", help="build the new layout only (the old one's disk)")
    return parser.parse_args()


def targets_of(families: list[str]) -> list[str]:
    known = facts.gfx_families()
    for family in families:
        if family not in known or len(known[family].targets) != 1:
            raise SystemExit(f"{family}: not a single-target family of builder/data/gfx.yaml")
    return [known[f].targets[0] for f in families]


def check_disk(sizes: Sizes, folder: Path, skip_old: bool) -> None:
    """The old layout's peak: 9 environments in the store (3 venv stages, 6 copies), each with its compressed
    content (about half) in containerd's content store, then 6 pushed (about 3 compressed). The new layout's:
    the environment twice (BuildKit's snapshots and the images' unpacked layers), its content, the registry.
    And the wheels themselves (about half their installed size)."""
    env = sizes.common + sizes.device + sizes.torch + sizes.numpy
    wheels = (sizes.common + 3 * sizes.device + sizes.torch) // 2
    layout = 4 * env if skip_old else 9 * env * 3 // 2 + 3 * env
    need = layout + (0 if (WHEEL_CACHE / sizes.key()).is_dir() else wheels)
    free = shutil.disk_usage(folder).free
    print(f"environment {size(env)}; the run needs about {size(need)} of disk at its peak; {size(free)} free")
    if need > free - 5 * GB:
        raise SystemExit("not enough disk for these sizes: lower --common-gb / --device-gb, or --skip-old")


def seed(engine: Engine, image: str = BASE) -> None:
    """Copy the base image from the machine's engine (DOCKER_HOST) into the fresh one, as a runner has it."""
    source = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "-H", engine.host, "load", "-q"], stdin=source.stdout, capture_output=True,
                          text=True, check=False)
    if source.stdout is not None:
        source.stdout.close()
    if source.wait() != 0 or load.returncode != 0:
        raise SystemExit(f"could not copy {image} into the fresh engine: {load.stderr.strip()}")


def main() -> None:
    args = parse_args()
    sizes = Sizes(common=int(args.common_gb * GB), device=int(args.device_gb * GB), torch=int(args.torch_gb * GB),
                  numpy=int(args.numpy_mb * MB))
    families = list(args.families)
    work = Path(tempfile.mkdtemp(prefix="rif-bench-scale-"))
    check_disk(sizes, work, args.skip_old)
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C cleans up, even if started with it ignored
    started = time.perf_counter()
    print(f"synthetic wheels under {WHEEL_CACHE} ({sizes.key()}) ...", flush=True)
    wheels = rocmwheels.ensure(WHEEL_CACHE, sizes, targets_of(families))
    print(f"  ready after {time.perf_counter() - started:.0f} s: " + ", ".join(
        f"{w.project} {w.version} {size(w.size)} (installed {size(w.installed)})" for w in wheels.wheels))
    try:
        with empty_engine(work / "engine") as engine:
            seed(engine)
            os.environ["DOCKER_HOST"] = engine.host  # every docker, buildx and builder call below goes there
            os.environ["RIF_BUILD_NETWORK"] = "host"  # the fresh engine has no bridge (loopback only)
            versions = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                                      text=True, check=False).stdout.strip()
            buildx = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True,
                                    check=False).stdout.strip()
            print(f"fresh engine {engine.host}: dockerd {versions}, {buildx}", flush=True)
            (work / "run").mkdir()
            res = Resources(docker.DockerClient(base_url=engine.host, timeout=3600), engine, work / "run")
            try:
                run(res, wheels, families, args)
            finally:
                res.close()
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.0f} s")


def run(res: Resources, wheels: WheelSet, families: list[str], args: argparse.Namespace) -> None:
    supply = make_supply(res, wheels, "rb" + uuid.uuid4().hex[:12])
    url = supply.index.url if supply.index else "http://unused.invalid/simple"
    print(f"wheels from {url if supply.index else supply.wheelhouse}", flush=True)
    matrix = res.work / "matrix.yaml"
    cells = write_matrix(matrix, families, list(FLAVORS), url)
    cells.sort(key=lambda c: (families.index(c.gfx or ""), FLAVORS.index(c.flavor)))
    old = None if args.skip_old else old_layout(res, supply, cells)
    new = new_layout(res, supply, matrix, families[0])
    timed = None if args.no_timing else timing(res, supply, matrix, families[0], args.repeats)
    supply.notes.append(forget_wheels(res, supply))
    if supply.patched:
        supply.notes.append(f"pip refuses a plain-HTTP index off loopback and builder's render does not say "
                            f"--trusted-host {supply.index.host if supply.index else ''}: added to its pip lines "
                            "(the only edit to builder's render; the old layout gets it too)")
    print()
    print_table(rows(old, new, families, timed) if old else no_old(rows(new, new, families, timed)))
    print()
    print_notes(old, new, supply, wheels, timed)


if __name__ == "__main__":
    main()
