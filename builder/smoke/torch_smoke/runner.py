"""Runs the checks a platform selects, each under a time limit, so a hung GPU call fails instead of hanging."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from functools import partial
from typing import TypeVar

from . import apptainer, constraint, cpu, gpu, hip, install, libs
from .core import HUNG_FIX, SECTION_FIX, Fail, Outcome, Result, Skip, first_line
from .diagnostics import FINDINGS, Finding, diagnose, docker_flags, env_finding, no_gpu_fix
from .smoke import Check, Smoke

DEFAULT_TIMEOUT_S = 120.0
# First calls compile kernels (MIOpen, Triton); hip_compile runs hipcc once per gfx target, then a torch extension.
SLOW_TIMEOUT_S = {"gpu_conv": 300.0, "gpu_compile": 600.0, "hip_compile": 600.0, "gpu_hip_kernel": 300.0}
TIMEOUT_ENV = "RIF_CHECK_TIMEOUT"  # seconds for every check, overriding the limits above
CHECKS: dict[str, Check] = {**install.CHECKS, **libs.CHECKS, **constraint.CHECKS, **cpu.CHECKS, **gpu.CHECKS,
                             **hip.CHECKS}

T = TypeVar("T")


def call_with_limit(fn: Callable[[], T], timeout: float) -> tuple[bool, T | None, BaseException | None]:
    """(finished, value, exception): fn runs in a daemon thread, so a hung call cannot hang the run."""
    box: list[tuple[T | None, BaseException | None]] = []

    def target() -> None:
        try:
            box.append((fn(), None))
        except BaseException as exc:
            box.append((None, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        return False, None, None
    return True, box[0][0], box[0][1]


def run_check(name: str, fn: Callable[[], str | Outcome], timeout: float, section: str = "",
              fix: str = "", under_apptainer: bool = False) -> Result:
    """One check -> one Result; an exception is a failure with a fix line, a hang fails at the limit. A check
    that could not write says so: the image is read-only under Apptainer (and under docker run --read-only)."""
    start = time.monotonic()
    finished, value, exc = call_with_limit(fn, timeout)
    seconds = round(time.monotonic() - start, 3)
    if not finished:
        return Result(name, "fail", f"did not finish within {timeout:g} s", HUNG_FIX, seconds, section, True)
    fix = fix or SECTION_FIX.get(section, "")
    if isinstance(exc, Skip):
        result = Result(name, "skip", str(exc))
    elif isinstance(exc, Fail):
        result = Result(name, "fail", str(exc), exc.fix or fix)
    elif exc is not None:
        result = Result(name, "fail", first_line(exc), fix)
    elif isinstance(value, Outcome):
        result = Result(name, value.status, value.detail, value.fix)
    else:
        result = Result(name, "pass", str(value))
    if result.status == "fail" and apptainer.is_read_only(exc, result.detail):
        result.detail = f"read-only environment: {result.detail}"
        result.fix = apptainer.read_only_fix(under_apptainer)
    result.seconds, result.section = seconds, section
    return result


def limit_for(name: str) -> float:
    override = os.environ.get(TIMEOUT_ENV)
    return float(override) if override else SLOW_TIMEOUT_S.get(name, DEFAULT_TIMEOUT_S)


def run_named(smoke: Smoke, name: str, section: str, fix: str = "") -> Result:
    """The check of that name, or its SKIP line where the platform's table says it does not apply."""
    why = smoke.platform.not_applicable.get(name)
    if why is not None:
        return Result(name, "skip", why, section=section)
    return run_check(name, partial(CHECKS[name], smoke), limit_for(name), section, fix, smoke.view.apptainer)


def run_gpu_checks(smoke: Smoke) -> list[Result]:
    """After one GPU check hangs the device is suspect: the rest are skipped, not each waited out."""
    results: list[Result] = []
    for name in smoke.platform.gpu:
        if any(r.timed_out for r in results):
            results.append(Result(name, "skip", "not run: an earlier GPU check hung", section="gpu"))
        else:
            results.append(run_named(smoke, name, "gpu", smoke.gpu_fix()))
    return results


def run_diagnostics(smoke: Smoke) -> list[Finding]:
    names = smoke.platform.diagnostics
    finished, findings, exc = call_with_limit(lambda: diagnose(smoke.view, smoke.expect, names), DEFAULT_TIMEOUT_S)
    if finished and exc is None and findings is not None:
        for f in findings:
            f.result.section = "diagnostics"
        return findings
    why = first_line(exc) if exc else f"did not finish within {DEFAULT_TIMEOUT_S:g} s"
    return [Finding(Result("diagnostics", "warn", f"the diagnostics failed: {why}", section="diagnostics"))]


def run_only(smoke: Smoke, only: Collection[str]) -> list[Result]:
    """The named checks alone, in report order (--only): GPU ones after the `gpu` check, when it sees a GPU."""
    results = [run_named(smoke, name, section) for section, names in smoke.platform.base for name in names
               if name in only]
    wanted = [name for name in smoke.platform.gpu if name in only]
    if wanted or "gpu" in only:
        visible = run_named(smoke, "gpu", "gpu", smoke.gpu_fix())
        results.append(visible)
        if wanted and visible.status != "pass":
            results += [Result(n, "skip", "not run: no GPU visible", section="gpu") for n in wanted]
        elif wanted:
            smoke.platform = replace(smoke.platform, gpu=tuple(wanted))
            results += run_gpu_checks(smoke)
    return results


def run_all(smoke: Smoke) -> tuple[list[Result], list[str]]:
    """Every check in report order, and the docker run (or apptainer exec) flags that would make a GPU visible."""
    results = [run_named(smoke, name, section) for section, names in smoke.platform.base for name in names]
    if not smoke.platform.gpu:
        return [*results, Result("gpu", "skip", smoke.platform.no_gpu_section, section="gpu")], []
    visible = run_named(smoke, "gpu", "gpu", smoke.gpu_fix())
    results.append(visible)
    if visible.status == "pass":
        host = [env_finding(smoke.view, smoke.expect, gpu_visible=True).result]
        if "host_driver" in smoke.platform.diagnostics:  # the driver range matters even where a GPU is seen
            host.append(FINDINGS["host_driver"](smoke.view, smoke.expect).result)
        for r in host:
            r.section = "gpu"
        return [*results, *host, *run_gpu_checks(smoke)], []
    findings = run_diagnostics(smoke)
    if visible.status == "skip" and smoke.torch is not None:
        visible.fix = no_gpu_fix(findings, smoke.platform, smoke.view.apptainer)
    return [*results, *(f.result for f in findings)], docker_flags(findings)
