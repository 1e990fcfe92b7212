"""A filesystem of a runner's size for one benchmark: a sparse file, ext4, loop-mounted; and its used bytes,
sampled while a command runs (the peak disk a row takes on its runner).

The file is sparse, so the host's disk pays only for what the filesystem holds. Whatever happens (an error,
Ctrl-C, SIGTERM turned into KeyboardInterrupt by the caller), the filesystem is unmounted (lazily, if a process
still holds it) and the file deleted.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LoopError(RuntimeError):
    """The loop filesystem could not be made or mounted."""


def used_bytes(mount: Path) -> int:
    """Bytes in use on the filesystem (as df counts them: blocks not free, the reserved ones aside)."""
    stat = os.statvfs(mount)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


@contextmanager
def loop_filesystem(image: Path, mount: Path, size: int) -> Iterator[Path]:
    """An empty ext4 of size bytes (no reserved blocks: a runner's disk is all the job's) mounted at mount."""
    if image.exists() or mount.exists():
        raise LoopError(f"{image} or {mount} already exists: another run's, or one not cleaned up")
    mount.mkdir(parents=True)
    try:
        with image.open("wb") as fh:
            fh.truncate(size)
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(image)])
        _run(["mount", "-o", "loop", str(image), str(mount)])
        try:
            yield mount
        finally:
            if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode != 0:
                subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
    finally:
        image.unlink(missing_ok=True)
        if mount.is_dir() and not os.path.ismount(mount):
            mount.rmdir()


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LoopError(f"{' '.join(cmd)}: {done.stderr.strip()[-300:]}")


class Sampler:
    """The filesystem's used bytes every interval seconds on a thread; peak is the largest seen."""

    def __init__(self, mount: Path, interval: float = 0.5) -> None:
        self.mount, self.interval = mount, interval
        self.peak = self.first = used_bytes(mount)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.sample()
        return self.peak

    def sample(self) -> None:
        try:
            self.peak = max(self.peak, used_bytes(self.mount))
        except OSError:  # unmounted under it (Ctrl-C, SIGTERM): the run is being cleaned up
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

