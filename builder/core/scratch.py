"""Scratch folders that an interruption cannot leave behind, and the factory's folder in the user's cache.

tempfile.TemporaryDirectory creates its folder before it can register the cleanup, and its rmtree stops
half-way when SIGINT/SIGTERM raises inside it; a run interrupted at either moment leaves a folder in /tmp.
Here the name is chosen before the folder exists (as dockerapi.started names containers), and the removal
runs to the end, holding any interruption that lands in it until the folder is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A private folder under the temporary directory, removed afterwards whatever happens."""
    path = Path(tempfile.gettempdir()) / f"{prefix}{uuid.uuid4().hex[:12]}"
    try:
        path.mkdir(mode=0o700)
        yield path
    finally:
        remove_fully(path)


def remove_fully(path: Path) -> None:
    """rmtree that finishes: an interruption raised inside it is re-raised once the folder is gone."""
    held: BaseException | None = None
    while True:
        try:
            shutil.rmtree(path, ignore_errors=True)
            break
        except (KeyboardInterrupt, Exception) as exc:  # Terminated is an Exception raised by the SIGTERM handler
            held = held or exc
    if held is not None:
        raise held


def user_cache() -> Path:
    """The factory's folder in the user's cache (XDG_CACHE_HOME, default ~/.cache): kept between runs, unlike a
    scratch folder (build trees, wheel digests, validations kept to be reused)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-image-factory"
