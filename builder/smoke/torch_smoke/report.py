"""What the user and `builder test` read: the text report, the JSON report, and the exit code."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from .core import EXIT_FAILED, EXIT_MEANING, EXIT_NO_GPU, EXIT_OK, MARKS, Result, platform_kind


def gpu_visible(results: list[Result]) -> bool:
    return any(r.name == "gpu" and r.status == "pass" for r in results)


def exit_code(results: list[Result], require_gpu: bool) -> int:
    """1 if any check failed, else 3 if a GPU was required and none is visible, else 0."""
    if any(r.status == "fail" for r in results):
        return EXIT_FAILED
    if require_gpu and not gpu_visible(results):
        return EXIT_NO_GPU
    return EXIT_OK


def summary(results: list[Result]) -> dict[str, int]:
    return {status: sum(r.status == status for r in results) for status in MARKS}


def report(results: list[Result], expect: Mapping[str, Any], code: int) -> str:
    """The readable report: sections, one line a check, a fix line under each problem."""
    lines = [f"torch-smoke for {expect.get('tag', '?')} ({expect.get('platform', '?')}, torch {expect.get('torch')})"]
    section = None
    for r in results:
        if r.section != section:
            section = r.section
            lines.append(f"{section}:")
        lines.append(f"  {MARKS[r.status]}  {r.name:<20} {r.detail}")
        if r.fix and r.status in ("fail", "warn", "skip"):
            lines.append(f"        fix: {r.fix}")
    n = summary(results)
    lines.append(f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warnings, {n['skip']} skipped, {n['info']} info"
                 f": exit {code} ({EXIT_MEANING[code]})")
    return "\n".join(lines)


def as_json(results: list[Result], expect: Mapping[str, Any], code: int, flags: list[str],
            simulated: bool, under_apptainer: bool = False) -> str:
    """The report for machines (`builder test` parses it): every result with all its fields; the flags that would
    make a GPU visible are docker run's, or apptainer exec's under Apptainer."""
    return json.dumps({
        "program": "torch-smoke", "cell": dict(expect), "platform": platform_kind(expect), "exit_code": code,
        "exit_meaning": EXIT_MEANING[code], "gpu_visible": gpu_visible(results), "simulated_gpu": simulated,
        "summary": summary(results), "runtime": "apptainer" if under_apptainer else "docker",
        "docker_flags": [] if under_apptainer else flags, "apptainer_flags": flags if under_apptainer else [],
        "results": [asdict(r) for r in results],
    }, indent=2)
