"""Scratch folders go away even when an interruption lands while they are created or removed."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from types import FrameType

import pytest

from builder.cli.kit import Terminated
from builder.core import scratch


def test_the_folder_is_private_and_removed_after_use() -> None:
    with scratch.scratch_dir("rif-test-") as path:
        assert path.is_dir() and path.name.startswith("rif-test-")
        assert path.stat().st_mode & 0o777 == 0o700
        (path / "sub").mkdir()
        (path / "sub" / "file").write_text("x")
    assert not path.exists()


def test_an_interruption_inside_the_removal_is_held_until_the_folder_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.rmtree
    calls: list[Path] = []

    def interrupted_once(path: Path, ignore_errors: bool = False) -> None:
        calls.append(path)
        if len(calls) == 1:  # half the tree removed, then SIGTERM's handler raises
            next(p for p in Path(path).iterdir()).unlink()
            raise Terminated()
        real(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(shutil, "rmtree", interrupted_once)
    with pytest.raises(Terminated), scratch.scratch_dir("rif-test-") as path:
        for name in "abc":
            (path / name).write_text(name)
    assert len(calls) == 2 and not path.exists()


def test_a_real_signal_in_the_body_still_removes_the_folder() -> None:
    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGUSR1, raise_terminated)
    try:
        with pytest.raises(Terminated), scratch.scratch_dir("rif-test-") as path:
            (path / "f").write_text("x")
            signal.raise_signal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not path.exists()
