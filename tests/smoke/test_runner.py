"""torch-smoke's runner: outcomes of a check, the per-check time limit (a check that blocks), report order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from builder.smoke.torch_smoke import runner
from builder.smoke.torch_smoke.core import Fail, Outcome, Skip
from builder.smoke.torch_smoke.platforms import CPU, GPU, INSTALL, SDK
from builder.smoke.torch_smoke.report import exit_code
from builder.smoke.torch_smoke.smoke import Check, Smoke
from tests.fakes.smoke import CPU_CELL, ROCM_CELL, fake_torch, smoke


def test_run_check_outcomes() -> None:
    def skip() -> str:
        raise Skip("not here")

    def boom() -> str:
        raise ZeroDivisionError("division by zero\nsecond line")

    def fail() -> str:
        raise Fail("wrong", "do this")

    assert runner.run_check("a", lambda: "fine", 5, "cpu").status == "pass"
    assert runner.run_check("b", skip, 5, "cpu").status == "skip"
    crash = runner.run_check("c", boom, 5, "cpu")
    assert (crash.status, crash.detail) == ("fail", "ZeroDivisionError: division by zero") and crash.fix
    info = runner.run_check("d", lambda: Outcome("info", "12.3 TFLOP/s"), 5, "gpu")
    assert (info.status, info.section) == ("info", "gpu")
    assert runner.run_check("e", fail, 5, "install", "general fix").fix == "do this"


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so the blocked check's thread ends with it."""
    event = threading.Event()
    yield event
    event.set()


def blocks(event: threading.Event) -> Check:
    """A check that hangs as a wedged GPU call does: until released, however fast the machine is."""
    return lambda s: "released" if event.wait() else "never"


def test_a_check_that_hangs_fails_at_the_limit_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, release: threading.Event) -> None:
    monkeypatch.setenv("RIF_CHECK_TIMEOUT", "1")
    monkeypatch.setitem(runner.CHECKS, "cpu_svd", blocks(release))
    result = runner.run_named(smoke(CPU_CELL, fake_torch()), "cpu_svd", "cpu")
    assert (result.status, result.detail, result.timed_out) == ("fail", "did not finish within 1 s", True)
    assert result.fix == "the GPU or driver may be hung: check `dmesg` on the host" and result.seconds >= 0.9
    assert not release.is_set()  # it was given up on, not finished


def test_after_a_gpu_check_hangs_the_rest_are_skipped(monkeypatch: pytest.MonkeyPatch,
                                                      release: threading.Event) -> None:
    monkeypatch.setenv("RIF_CHECK_TIMEOUT", "1")
    s = smoke(ROCM_CELL, fake_torch())
    s.platform = replace(s.platform, gpu=("gpu_arch", "gpu_conv"))
    monkeypatch.setitem(runner.CHECKS, "gpu_arch", blocks(release))
    monkeypatch.setitem(runner.CHECKS, "gpu_conv", lambda s: "ok")
    first, second = runner.run_gpu_checks(s)
    assert first.timed_out and first.section == "gpu"
    assert (second.status, second.detail) == ("skip", "not run: an earlier GPU check hung")


def test_limits_default_per_check() -> None:
    assert runner.limit_for("cpu_svd") == runner.DEFAULT_TIMEOUT_S == 120
    assert runner.limit_for("gpu_compile") == 600 and runner.limit_for("gpu_conv") == 300


def quick_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check passes at once with its own name (the real ones need torch), except `gpu` itself."""
    for name in [*INSTALL, *CPU, *SDK, *GPU, "gpu_hip_kernel"]:
        monkeypatch.setitem(runner.CHECKS, name, lambda s, name=name: name)


def names(s: Smoke) -> list[tuple[str, str, str]]:
    results, _ = runner.run_all(s)
    return [(r.section, r.name, r.status) for r in results]


def test_a_gpu_image_with_a_gpu_runs_its_rows_checks_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_checks(monkeypatch)
    got = names(smoke(ROCM_CELL, fake_torch(devices=(("AMD Radeon RX 7900 XTX", "gfx1100"),))))
    assert got == [*(("install", n, "pass") for n in INSTALL), *(("cpu", n, "pass") for n in CPU),
                   ("sdk", "hip_compile", "pass"), ("gpu", "gpu", "pass"), ("gpu", "gpu_env", "pass"),
                   ("gpu", "host_driver", "info"),
                   *(("gpu", n, "pass") for n in GPU), ("gpu", "gpu_hip_kernel", "pass")]


def test_a_simulated_gpu_runs_the_gpu_section_on_a_cpu_image(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_checks(monkeypatch)
    s = smoke(CPU_CELL, fake_torch(hip=None), simulate="gfx1100")
    results, flags = runner.run_all(s)
    assert [r.name for r in results] == [*INSTALL, *CPU, *SDK, "gpu", "gpu_env", "host_driver", *GPU,
                                         "gpu_hip_kernel"]
    assert flags == []
    stand_in = results[len(INSTALL) + len(CPU) + len(SDK)].detail
    assert stand_in == "1 device(s): 0: CPU stand-in (--simulate-gpu, test mode) (gfx1100)"
    assert next(r for r in results if r.name == "arch_list").status == "skip"


def test_a_rocm_image_without_a_gpu_runs_the_diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_checks(monkeypatch)
    results, flags = runner.run_all(smoke(ROCM_CELL, fake_torch()))
    tail = [(r.section, r.name, r.status) for r in results[len(INSTALL) + len(CPU) + len(SDK):]]
    assert tail == [("gpu", "gpu", "skip"), ("diagnostics", "dev_kfd", "warn"), ("diagnostics", "dev_dri", "warn"),
                    ("diagnostics", "gpu_env", "pass"), ("diagnostics", "gpu_target", "info"),
                    ("diagnostics", "host_driver", "info")]
    assert flags[:2] == ["--device=/dev/kfd", "--device=/dev/dri"]
    assert results[len(INSTALL) + len(CPU) + len(SDK)].fix.startswith("run with: docker run --device=/dev/kfd")


def test_cpu_cell_skips_the_gpu_section_plainly_and_require_gpu_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_checks(monkeypatch)
    results, flags = runner.run_all(smoke(CPU_CELL, fake_torch(hip=None)))
    assert [(r.name, r.status) for r in results][-2:] == [("hip_compile", "skip"), ("gpu", "skip")]
    assert results[-1].detail == "CPU image: no GPU checks (its torch is a CPU build)" and flags == []
    assert exit_code(results, require_gpu=True) == 3 and exit_code(results, require_gpu=False) == 0
