"""Each shared stage built once per publish (issue 28, item 3): stages BuildKit executed, over distinct stages.

A cold full publish of a tree with several combinations per OS base, replayed as the workflow runs it: one job
per combination, each on a cold runner (an empty engine: BuildKit's cache, cache mounts and images all gone),
importing and exporting BuildKit's cache through a loopback registry (--cache-registry). Three ways:
- jobs alone (before the first wave existed): every job builds the OS base and torch stages it needs;
- shared-stages wave, then jobs (publish.yml's `stages` job): the stages two or more combinations share are
  built once, and each job imports them;
- one machine (`builder build` of the whole tree): one bake.
Printed per way: bakes, stages executed (summed over the bakes, each counted by what it is made of: the same
OS base in two Dockerfiles is one stage; benchmarks/support/stagecount.py), distinct stages of the tree, their ratio
(target 1.0) and seconds.

The tree: debian-12, ROCm 7.1 and 7.2 lines, torch from a local wheelhouse of synthetic TheRock-shaped wheels
(testkit/synthwheels.py), two GPU families, and the same two combinations for a non-root user: 4
combinations, 6 images, 2 OS bases and 2 torch stages shared by two combinations each.

Usage: python benchmarks/bench_stages.py [--payload-mb 8]   (after scripts/setup.sh: its engine binaries,
debian:12 in its engine, docker-registry). It starts its own empty engine and registry and removes them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import docker

from benchmarks.support import stagecount
from benchmarks.support.freshengine import empty_engine
from benchmarks.support.localregistry import LocalRegistry
from builder.buildkit.bake import HOST
from builder.buildkit.export import Cache
from builder.pipeline import baking, jobs, lifecycle
from builder.pipeline.options import BakeOptions
from builder.render import sharedstages
from builder.render.sources import WheelSource
from testkit.synthwheels import therock_like

TORCH = "{version: '2.13.0', torchvision: null, torchaudio: null}"
MATRIX = f"""image: rif-bench-stages
matrix:
  os: [debian-12]
  platform: [rocm7.1, rocm7.2]
  torch: [{TORCH}]
  gfx: [gfx94X-dcgpu, gfx1151]
  channel: [local]
  flavor: [runtime]
include:
  - {{os: debian-12, platform: rocm7.1, torch: {TORCH}, gfx: gfx94X-dcgpu, channel: local, user: rif, tag: r71-rif}}
  - {{os: debian-12, platform: rocm7.2, torch: {TORCH}, gfx: gfx94X-dcgpu, channel: local, user: rif, tag: r72-rif}}
"""
BASE = "debian:12"


def cold(host: str) -> None:
    """The engine as a fresh runner has it: the base image only, no BuildKit cache, no cache mounts."""
    env = {**os.environ, "DOCKER_HOST": host}
    subprocess.run(["docker", "buildx", "prune", "--all", "--force"], env=env, check=True, capture_output=True)
    client = docker.DockerClient(base_url=host, timeout=600)
    for image in client.images.list():
        if BASE not in image.tags:
            client.images.remove(str(image.id), force=True)


Lines = list[tuple[str | None, str]]  # (the bake target a line was routed to, the line)


def bake_jobs(todo: list[jobs.Job], source: WheelSource, cache: Cache | None, host: str) -> Lines:
    """One job's bake (lifecycle.prepare, as `builder publish` runs it, nothing validated or pushed): its log."""
    lines: Lines = []
    target = {j.tag: j.rendered.target for j in todo if j.rendered is not None}
    events = lifecycle.Events(line=lambda tag, line: lines.append((target.get(tag), line)))
    options = BakeOptions(source=source, cache=cache, buildkit=HOST)  # fresh engines: no bridge
    prepared = lifecycle.prepare(docker.DockerClient(base_url=host, timeout=3600), todo, options, events)
    failed = [t for t, r in prepared.built.items() if not r.ok]
    if failed or len(prepared.built) != len(todo):
        error = next((r.error for r in prepared.built.values() if not r.ok), "")
        tail = "\n".join(text for _, text in lines[-30:])
        raise SystemExit(f"bake failed for {failed or 'some image'}: {error}\n{tail}")
    return lines


def wave(todo: list[jobs.Job], source: WheelSource, cache: Cache) -> tuple[Lines, dict[str, str]]:
    """The shared-stages wave: its log, and its targets' Dockerfiles."""
    lines: Lines = []
    outcomes = baking.shared_stages(todo, BakeOptions(source=source, cache=cache, buildkit=HOST),
                                       lambda target, line: lines.append((target, line)))
    if not all(o.result.ok for o in outcomes):
        raise SystemExit("the shared-stages wave failed:\n" + "\n".join(text for _, text in lines[-30:]))
    files = {j.rendered.group: j.rendered.dockerfile for j in todo if j.rendered is not None}
    return lines, {o.stage.key: files[o.stage.group] for o in outcomes}


def measure(way: str, todo: list[jobs.Job], source: WheelSource, host: str, registry: str) -> tuple[int, int,
                                                                                                          float]:
    """(bakes, stages executed summed over them, seconds) of one way of publishing the tree cold."""
    rendered = [j.rendered for j in todo if j.rendered is not None]
    dockerfiles = {r.target: r.dockerfile for r in rendered}
    cache = Cache(f"{registry}/{way.split()[0]}/buildcache", insecure=True)
    start, bakes, executed = time.monotonic(), 0, 0
    if way.startswith("wave"):
        cold(host)
        lines, wave_files = wave(todo, source, cache)
        bakes, executed = 1, len(stagecount.executed(lines, wave_files))
    groups = [todo] if way.startswith("one") else list(jobs.by_combination(todo).values())
    for group in groups:
        cold(host)
        lines = bake_jobs(group, source, None if way.startswith("one") else cache, host)
        if os.environ.get("RIF_BENCH_LOGS"):
            Path(os.environ["RIF_BENCH_LOGS"], f"{way.split()[0]}-{bakes}.log").write_text(
                "".join(f"{hint}\t{text}\n" for hint, text in lines))
        bakes, executed = bakes + 1, executed + len(stagecount.executed(lines, dockerfiles))
    return bakes, executed, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--payload-mb", type=int, default=8, help="size of the synthetic torch and device wheels")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rif-bench-stages-") as tmp_name:
        tmp = Path(tmp_name)
        therock_like(tmp / "wheels", ["gfx942", "gfx1151"], payload=args.payload_mb << 20, salt=tmp.name.encode())
        (tmp / "matrix.yaml").write_text(MATRIX)
        source = WheelSource(wheelhouse=tmp / "wheels")
        todo = jobs.matrix_jobs(tmp / "matrix.yaml", None, None, source)
        rendered = [j.rendered for j in todo if j.rendered is not None]
        distinct = len(stagecount.distinct({r.target: r.dockerfile for r in rendered},
                                           {r.target: r.stage for r in rendered}))
        shared = sharedstages.shared(rendered)
        print(f"tree: {len(jobs.by_combination(todo))} combinations, {len(todo)} images, {distinct} distinct "
              f"stages, {len(shared)} shared by two or more combinations")
        registry = LocalRegistry(tmp / "registry")
        registry.start()
        saved = os.environ.get("DOCKER_HOST")
        try:
            with empty_engine(tmp / "engine") as host:
                load_base(saved, host)
                os.environ["DOCKER_HOST"] = host
                print(f"{'way':<34}{'bakes':>6}{'stages run':>12}{'distinct':>10}{'ratio':>8}{'seconds':>9}")
                for way in ("jobs alone", "wave of shared stages, then jobs", "one machine (builder build)"):
                    bakes, executed, seconds = measure(way, todo, source, host, registry.address)
                    print(f"{way:<34}{bakes:>6}{executed:>12}{distinct:>10}{executed / distinct:>8.2f}{seconds:>9.1f}",
                          flush=True)
        finally:
            if saved is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = saved
            registry.stop()


def load_base(machine: str | None, host: str) -> None:
    """The base image into the empty engine, from the machine's (no registry is reachable here)."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    save = subprocess.Popen(["docker", *(["-H", machine] if machine else []), "save", BASE], stdout=subprocess.PIPE,
                            env=env)
    subprocess.run(["docker", "-H", host, "load"], stdin=save.stdout, env=env, check=True, capture_output=True)
    if save.wait() != 0:
        raise SystemExit(f"cannot save {BASE} from the machine's engine")


if __name__ == "__main__":
    main()
