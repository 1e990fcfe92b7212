"""What a build costs the engine's store: polled while it runs, and what its images keep afterwards.

The benchmark's engine is a fresh one of its own (freshengine.py: containerd image store, its own containerd),
so every snapshot folder that appears after a build starts is this build's. With the containerd image store
both BuildKit's work and the images' unpacked layers are snapshots of containerd's overlayfs snapshotter, one
folder each under <containerd root>/io.containerd.snapshotter.v1.overlayfs/snapshots. So "bytes in the store"
is measured there, sampled every second (`du -sxb`: apparent bytes, never descending into a mount) for the
folders that appear after the build starts. The pip cache mount is left out: it is the folder whose fs/ holds
pip's cache (`fs/pip`, the cache mount's /tmp/pip), the wheel cache the issue's target excludes; a cache mount
that already existed is no new folder anyway. An image's own folders are read from containerd (a read-only view
of its top layer names every folder of its chain), so both sides of the ratio are `du` of snapshot folders.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker

from benchmarks.support.freshengine import Engine

NAMESPACE = "moby"  # dockerd's containerd namespace


def layer_folders(engine: Engine) -> set[str]:
    """The snapshot folders now."""
    return {p.name for p in engine.snapshots.iterdir()}


def is_pip_cache(engine: Engine, name: str) -> bool:
    """A cache mount with target /tmp keeps pip's cache at its root: fs/pip."""
    return (engine.snapshots / name / "fs" / "pip").is_dir()


def du(paths: list[Path]) -> int:
    """Apparent bytes under paths, each inode once (hard links within the set are counted once)."""
    return sum(du_each(paths).values())


def du_each(paths: list[Path]) -> dict[str, int]:
    """Apparent bytes per path (an inode already counted under an earlier path is not counted again)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return {}
    out = subprocess.run(["du", "-sxb", *existing], capture_output=True, text=True, check=False).stdout
    sizes = {}
    for line in out.splitlines():
        count, _, name = line.partition("\t")
        if count.isdigit():
            sizes[name] = int(count)
    return sizes


@dataclass
class StorePoller:
    """Samples the bytes of every snapshot folder created since start() until stop()."""

    engine: Engine
    interval: float = 1.0
    before: set[str] = field(default_factory=set)
    samples: list[dict[str, int]] = field(default_factory=list)  # folder -> bytes, per sample
    cache_folders: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> StorePoller:
        self.before = layer_folders(self.engine)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="store-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def new_folders(self) -> set[str]:
        return layer_folders(self.engine) - self.before

    def peak(self) -> dict[str, int]:
        """The sample with the largest sum (folder -> bytes): the engine is this benchmark's alone, so every
        new folder is this build's."""
        return max(self.samples, key=lambda sample: sum(sample.values()), default={})

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        try:
            fresh = self.new_folders()
        except OSError:  # a folder removed while listing: the next sample sees the store settled
            return
        for name in fresh - self.cache_folders:
            if is_pip_cache(self.engine, name):
                self.cache_folders.add(name)
        each = du_each([self.engine.snapshots / name for name in sorted(fresh - self.cache_folders)])
        self.samples.append({Path(k).name: v for k, v in each.items()})


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The chain IDs of an image's diff IDs: how containerd names an unpacked layer's snapshot."""
    chains: list[str] = []
    for diff in diff_ids:
        chains.append(diff if not chains else "sha256:" + hashlib.sha256(f"{chains[-1]} {diff}".encode()).hexdigest())
    return chains


def chain_folders(engine: Engine, chain: str) -> set[str]:
    """The snapshot folders of a chain: a read-only view of its top (`ctr snapshots view --mounts`) names them
    all in its mount (overlay lowerdirs, or a bind of the one folder); the view is removed again at once."""
    ctr = ["ctr", "-a", str(engine.containerd), "-n", NAMESPACE, "snapshots"]
    key = f"rif-bench-view-{uuid.uuid4().hex[:12]}"
    proc = subprocess.run([*ctr, "view", "--mounts", key, chain], capture_output=True, text=True, check=False)
    subprocess.run([*ctr, "rm", key], capture_output=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"containerd has no snapshot {chain}: {proc.stderr.strip()}")
    paths: list[str] = []
    for mount in json.loads(proc.stdout):
        if mount.get("Type") == "bind":
            paths.append(str(mount["Source"]))
        for option in mount.get("Options") or []:
            if str(option).startswith("lowerdir="):
                paths += str(option).removeprefix("lowerdir=").split(":")
    prefix = str(engine.snapshots) + "/"
    return {p.removeprefix(prefix).split("/")[0] for p in paths if p.startswith(prefix)}


def image_folders(engine: Engine, client: docker.DockerClient, refs: list[str]) -> set[str]:
    """The snapshot folders of every layer of the images (shared layers once)."""
    folders: set[str] = set()
    for ref in refs:
        chains = chain_ids(list(client.images.get(ref).attrs["RootFS"]["Layers"]))
        if chains:
            folders |= chain_folders(engine, chains[-1])
    return folders


def remove_built(client: docker.DockerClient, image_ids: list[str]) -> None:
    """Remove images this benchmark built, by ID and by force: a push leaves a repository digest on an image
    that removing its tags does not remove, and an ID names our build and nothing else."""
    for image_id in image_ids:
        try:
            client.images.remove(image_id, force=True, noprune=False)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            print(f"  note: could not remove {image_id}: {exc}")


def remove_images(client: docker.DockerClient, refs: list[str]) -> None:
    """Remove these references (tags and IDs this benchmark made), never by force: an image someone else also
    tagged keeps its other tags. A missing one is no error."""
    for ref in refs:
        try:
            client.images.remove(ref, noprune=False)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            if "No such image" not in str(exc) and "image has dependent child images" not in str(exc):
                print(f"  note: could not remove {ref}: {exc}")
