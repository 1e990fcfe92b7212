"""The ROCm-scale benchmark's plumbing (bench_scale.py): its constants, what a run creates and removes again,
the engine and registry steps, and what one layout's results hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import docker

from benchmarks.support import enginestore, floor
from benchmarks.support.freshengine import Engine
from benchmarks.support.localregistry import Image, LocalRegistry, kill_pushes
from benchmarks.support.wheelindex import WheelIndex

ROOT = Path(__file__).resolve().parents[2]
WHEEL_CACHE = Path("/tmp/rif-bench-wheels")
IMAGE = "rif-bench-pytorch"  # the matrix's image: builder's own tags are rocm-image-factory/rif-bench-pytorch
BUILDER_REPO = f"rocm-image-factory/{IMAGE}"
FAMILIES = ("gfx94X-dcgpu", "gfx1151", "gfx950-dcgpu")
FLAVORS = ("runtime", "devel")
BASE = "debian:12"
PIP_CACHE_ID = "rif-pip"  # the new template's cache mount (builder/render/sources.py PIP_CACHE)
MB, GB = 1e6, 1e9
PUSH_WORKERS = 2


# ---------------------------------------------------------------- resources, cleaned up whatever happens


@dataclass
class Resources:
    """Everything the run creates, so the end (or Ctrl-C) removes exactly that."""

    client: docker.DockerClient
    engine: Engine  # the fresh engine the run builds on (its own: cold, and the machine's engine stays clean)
    work: Path
    refs: list[str] = field(default_factory=list)  # image references this run tagged
    ids: list[str] = field(default_factory=list)  # untagged images it left (the classic builder's stages)
    built: list[str] = field(default_factory=list)  # IDs of the images it built
    registries: list[LocalRegistry] = field(default_factory=list)
    index: WheelIndex | None = None

    def tag(self, ref: str) -> str:
        self.refs.append(ref)
        return ref

    def drop_images(self, refs: list[str] | None = None) -> None:
        """Remove images (all of this run's when refs is None): tags first, then the stages they kept."""
        chosen = list(self.refs) if refs is None else refs
        enginestore.remove_images(self.client, chosen)
        self.refs = [r for r in self.refs if r not in chosen]
        if refs is None:
            enginestore.remove_built(self.client, self.built)
            enginestore.remove_images(self.client, list(reversed(self.ids)))
            self.ids.clear()
            self.built.clear()
            builder_tags = [t for image in self.client.images.list(name=BUILDER_REPO) for t in image.tags
                            if t.startswith(BUILDER_REPO + ":")]
            enginestore.remove_images(self.client, builder_tags)

    def drop_stages(self) -> None:
        """Remove the classic builder's step images that no built image stands on (the venv stages): a step
        under a built image refuses (it has children), and a built image itself is never named here."""
        built = tuple(i.removeprefix("sha256:") for i in self.built)
        steps = [s for s in reversed(self.ids) if not any(b.startswith(s) for b in built)]
        enginestore.remove_images(self.client, steps)

    def discard(self, tags: list[str]) -> None:
        """Remove built images early (disk), by ID: their pushed references go with them."""
        ids = [str(self.client.images.get(tag).id) for tag in tags]
        enginestore.remove_built(self.client, ids)
        self.refs = [r for r in self.refs if r not in tags]

    def close(self) -> None:
        for step in (self.drop_images, self._stop_registries, self._stop_index):
            try:
                step()
            except Exception as exc:  # cleanup goes on: one failed step must not leave the rest behind
                print(f"  cleanup: {step.__name__}: {exc}", file=sys.stderr)
        shutil.rmtree(self.work, ignore_errors=True)

    def _stop_registries(self) -> None:
        for registry in self.registries:
            registry.stop()

    def _stop_index(self) -> None:
        if self.index is not None:
            self.index.stop()


def terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# ---------------------------------------------------------------- engine and registry steps


@contextmanager
def polled(engine: Engine) -> Iterator[enginestore.StorePoller]:
    poller = enginestore.StorePoller(engine).start()
    try:
        yield poller
    finally:
        poller.stop()


def push_all(registry: LocalRegistry, res: Resources, repo: str, images: dict[str, str]) -> dict[str, Image]:
    """Push each local image as repo:key and read back what the registry holds for it.

    The first goes alone (it brings the layers the others share), the rest two at a time: dockerd gzips a
    layer on one core, and this is what takes a push of GBs so long on a small machine."""
    keys = list(images)
    if keys:
        res.tag(registry.push(images[keys[0]], repo, keys[0]))
    pool = ThreadPoolExecutor(max_workers=PUSH_WORKERS)
    try:
        for ref in pool.map(lambda key: registry.push(images[key], repo, key), keys[1:]):
            res.tag(ref)
    except BaseException:
        kill_pushes()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return {key: registry.image(repo, key) for key in keys}


def start_registry(res: Resources, name: str) -> LocalRegistry:
    registry = LocalRegistry(res.work / name)
    res.registries.append(registry)
    registry.start()
    return registry


def run_logged(cmd: list[str], log: Path, cwd: Path | None = None) -> float:
    """Run a build command with its output in log; its wall time, or an error with the log's tail."""
    start = time.perf_counter()
    with log.open("w") as fh:
        code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, check=False).returncode
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed (exit {code}); log {log}:\n{tail}")
    return time.perf_counter() - start


# ---------------------------------------------------------------- one layout's results


@dataclass
class Layout:
    """What one layout cost: store, registry, downloads, floors."""

    name: str
    peak: int = 0
    final: int = 0
    images: dict[str, Image] = field(default_factory=dict)
    pair_bytes: int = 0
    repush: int = 0
    downloads: Counter[str] = field(default_factory=Counter)
    floors: dict[str, floor.Floor] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Timer:
    def __init__(self, layout: Layout, phase: str) -> None:
        self.layout, self.phase = layout, phase

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        print(f"[{self.layout.name}] {self.phase} ...", flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.layout.seconds[self.phase] = time.perf_counter() - self.start


def union_bytes(images: list[Image]) -> int:
    sizes = {layer.digest: layer.size for image in images for layer in image.layers}
    return sum(sizes.values())


def size(n: float) -> str:
    return f"{n / GB:.3f} GB" if abs(n) >= GB else f"{n / MB:.1f} MB"
