"""torch-smoke's `libs` check asks the loader about at most 4 libraries at a time (builder/smoke/torch_smoke/libs.py
documents WORKERS = 4: a ROCm torch has hundreds of libraries and the runner has 4 cores; 40 loader processes at
once would crowd out the image's own checks). The pool's size is read where the check makes it, and the answers
keep the files' order whatever the pool."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from builder.smoke.torch_smoke import libs


def test_the_loader_is_asked_about_4_libraries_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pools: list[int | None] = []

    class Recorded(ThreadPoolExecutor):
        def __init__(self, max_workers: int | None = None, *args: Any, **kwargs: Any) -> None:
            pools.append(max_workers)
            super().__init__(max_workers, *args, **kwargs)

    monkeypatch.setattr(libs, "ThreadPoolExecutor", Recorded)
    files = [tmp_path / f"lib{k}.so" for k in range(12)]
    asked: list[str] = []

    def run(argv: Sequence[str], timeout: float) -> tuple[int, str]:
        asked.append(argv[-1])
        return 0, ""

    scan = libs.scan(files, ["ldd"], run=run, budget=3600)
    assert pools == [4]
    assert scan.checked == 12 and not scan.timed_out and sorted(asked) == sorted(str(f) for f in files)
