"""What a build costs the engine's store: polled while it runs, and what its images keep afterwards.

dockerd's built-in BuildKit and the classic builder both keep layers (finished or in the making, build
stages, a RUN's writable layer) as folders under /var/lib/docker/overlay2. So "bytes in the store" is
measured there, sampled every second (`du -sxb`: apparent bytes, never descending into a mounted merged
view), for folders that appear after the build starts. The engine is shared: once the build is over, only
the folders of its images, and those stacked on them, are counted, so another build at the same time adds
nothing. The pip cache mount is left out: it is the folder whose root holds pip's cache (`diff/pip`, the
cache mount's /tmp/pip), the wheel cache the issue's target excludes; a cache mount that already existed is
no new folder anyway. Both sides of the ratio are `du` of layer folders, so they compare like with like.
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


def layer_folders() -> set[str]:
    """The overlay2 folders now (the `l` folder of short links is not a layer)."""
    return {p.name for p in OVERLAY.iterdir() if p.name != "l"}


def is_pip_cache(name: str) -> bool:
    """A cache mount with target /tmp keeps pip's cache at its root: diff/pip."""
    return (OVERLAY / name / "diff" / "pip").is_dir()


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


@dataclass(frozen=True)
class Folder:
    """A layer folder as first seen: its short link name and the short names of the layers below it."""

    link: str
    lower: tuple[str, ...]


def folder_info(name: str) -> Folder:
    try:
        link = (OVERLAY / name / "link").read_text().strip()
    except OSError:
        link = ""
    try:
        lower = tuple(p.removeprefix("l/") for p in (OVERLAY / name / "lower").read_text().strip().split(":") if p)
    except OSError:
        lower = ()
    return Folder(link, lower)


@dataclass
class StorePoller:
    """Samples the bytes of every overlay2 folder created since start() until stop(); peak() then counts only
    the folders of this build, which is known only once it is over (see peak)."""

    interval: float = 1.0
    before: set[str] = field(default_factory=set)
    samples: list[dict[str, int]] = field(default_factory=list)  # folder -> bytes, per sample
    folders: dict[str, Folder] = field(default_factory=dict)
    cache_folders: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> StorePoller:
        self.before = layer_folders()
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
        return layer_folders() - self.before

    def ours(self, layers: set[str]) -> set[str]:
        """The folders of this build: the layers of its images (final images, kept stages) and every folder
        stacked on one of them (a RUN's or COPY's working layer, gone by now). A build beside ours on the same
        engine makes folders on its own layers, and they are left out."""
        links = {self.folders[name].link for name in layers if name in self.folders}
        return {name for name, info in self.folders.items()
                if name in layers or any(link in links for link in info.lower)}

    def peak(self, layers: set[str]) -> tuple[dict[str, int], int]:
        """The sample with the largest sum over this build's folders (folder -> bytes), and the bytes of the
        folders of other builds left out of that sample."""
        mine = self.ours(layers)
        best: dict[str, int] = {}
        others = 0
        for sample in self.samples:
            counted = {name: n for name, n in sample.items() if name in mine}
            if sum(counted.values()) > sum(best.values()):
                best, others = counted, sum(sample.values()) - sum(counted.values())
        return best, others

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        try:
            fresh = self.new_folders()
        except OSError:  # a folder removed while listing: the next sample sees the store settled
            return
        for name in fresh - set(self.folders):
            self.folders[name] = folder_info(name)
            if is_pip_cache(name):
                self.cache_folders.add(name)
        each = du_each([OVERLAY / name for name in sorted(fresh - self.cache_folders)])
        self.samples.append({Path(k).name: v for k, v in each.items()})


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
