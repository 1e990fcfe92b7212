"""What a build costs the engine's store: polled while it runs, and what its images keep afterwards.

dockerd's built-in BuildKit and the classic builder both keep layers (finished or in the making, build
stages, a RUN's writable layer) as folders under /var/lib/docker/overlay2; BuildKit adds its metadata under
/var/lib/docker/buildkit. So "bytes in the store" is measured there, and only for overlay2 folders that
appear after the build starts: another build on the same engine that deletes its images cannot make ours
look smaller. The pip cache mount is left out: it is the folder whose root holds pip's cache (`diff/pip`,
the cache mount's /tmp/pip), the wheel cache the issue's target excludes. Both sides of the ratio are
`du --apparent-size` of the same kind of folders, so they compare like with like.
"""

from __future__ import annotations

import hashlib
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import docker

DOCKER_ROOT = Path("/var/lib/docker")
OVERLAY = DOCKER_ROOT / "overlay2"
LAYERDB = DOCKER_ROOT / "image" / "overlay2" / "layerdb" / "sha256"
BUILDKIT = DOCKER_ROOT / "buildkit"


def layer_folders() -> set[str]:
    """The overlay2 folders now (the `l` folder of short links is not a layer)."""
    return {p.name for p in OVERLAY.iterdir() if p.name != "l"}


def is_pip_cache(name: str) -> bool:
    """A cache mount with target /tmp keeps pip's cache at its root: diff/pip."""
    return (OVERLAY / name / "diff" / "pip").is_dir()


def du(paths: list[Path]) -> int:
    """Apparent bytes under paths, each inode once (hard links within the set are counted once)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return 0
    out = subprocess.run(["du", "-scb", *existing], capture_output=True, text=True, check=False).stdout
    last = out.strip().splitlines()[-1:] if out.strip() else []
    return int(last[0].split()[0]) if last else 0


@dataclass
class StorePoller:
    """Polls the bytes of overlay2 folders created since start() (pip cache mount excluded) until stop()."""

    interval: float = 1.0
    before: set[str] = field(default_factory=set)
    buildkit_before: int = 0
    peak: int = 0
    samples: int = 0
    cache_folders: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> StorePoller:
        self.before = layer_folders()
        self.buildkit_before = du([BUILDKIT])
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="store-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> int:
        """The peak growth seen, bytes."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return self.peak

    def new_folders(self) -> set[str]:
        return layer_folders() - self.before

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        try:
            fresh = self.new_folders()
        except OSError:  # a folder removed while listing: the next sample sees the store settled
            return
        self.cache_folders |= {name for name in fresh if is_pip_cache(name)}
        counted = [OVERLAY / name for name in sorted(fresh - self.cache_folders)]
        grown = du(counted) + max(0, du([BUILDKIT]) - self.buildkit_before)
        self.peak = max(self.peak, grown)
        self.samples += 1


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The layer store's chain IDs of an image's diff IDs (how dockerd names a layer in its stack)."""
    chains: list[str] = []
    for diff in diff_ids:
        chains.append(diff if not chains else "sha256:" + hashlib.sha256(f"{chains[-1]} {diff}".encode()).hexdigest())
    return chains


def image_folders(client: docker.DockerClient, refs: list[str]) -> set[str]:
    """The overlay2 folders of every layer of the images (shared layers once)."""
    folders: set[str] = set()
    for ref in refs:
        diffs = list(client.images.get(ref).attrs["RootFS"]["Layers"])
        for chain in chain_ids(diffs):
            cache_id = LAYERDB / chain.removeprefix("sha256:") / "cache-id"
            if cache_id.is_file():
                folders.add(cache_id.read_text().strip())
    return folders


def final_bytes(client: docker.DockerClient, refs: list[str], before: set[str]) -> int:
    """Bytes of the images' layers that the build created (what the store keeps of it for the images)."""
    return du([OVERLAY / name for name in sorted(image_folders(client, refs) - before)])


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
