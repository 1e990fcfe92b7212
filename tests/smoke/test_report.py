"""torch-smoke's report: exit codes, the text layout with fix lines, the JSON fields."""

from __future__ import annotations

import json

import pytest

from builder.smoke.torch_smoke.core import Result
from builder.smoke.torch_smoke.report import as_json, exit_code, report
from tests.fakes.smoke import ROCM_CELL


@pytest.mark.parametrize(("statuses", "require_gpu", "code"), [
    (["pass", "pass"], False, 0),
    (["pass", "warn", "info", "skip"], False, 0),
    (["pass", "fail"], False, 1),
    (["pass", "skip"], True, 3),
    (["fail", "skip"], True, 1),
    (["pass", "pass"], True, 0),
])
def test_exit_code(statuses: list[str], require_gpu: bool, code: int) -> None:
    results = [Result(f"c{i}", s) for i, s in enumerate(statuses[:-1])]
    results.append(Result("gpu", statuses[-1]))
    assert exit_code(results, require_gpu) == code


RESULTS = [Result("import", "pass", "torch 2.13.0", section="install"),
           Result("torch_version", "fail", "torch 2.13.0 is installed, the image promises 2.12.0", "rebuild it",
                  section="install"),
           Result("gpu", "skip", "no GPU visible", "run with: docker run --device=/dev/kfd", section="gpu"),
           Result("gpu_env", "warn", "HSA_OVERRIDE_GFX_VERSION=11.0.0", "unset it", section="diagnostics"),
           Result("gpu_tflops", "info", "123.4 TFLOP/s", section="gpu")]


def test_report_lists_every_check_with_a_fix_under_each_problem() -> None:
    text = report(RESULTS, ROCM_CELL, 1).splitlines()
    assert text[0] == f"torch-smoke for {ROCM_CELL['tag']} (rocm7.2, torch 2.13.0)"
    assert text[1] == "install:"
    assert text[2] == "  PASS  import               torch 2.13.0"
    assert text[3].split() == ["FAIL", "torch_version", "torch", "2.13.0", "is", "installed,", "the", "image",
                               "promises", "2.12.0"]
    assert text[4] == "        fix: rebuild it"
    assert text[5] == "gpu:" and text[7].strip() == "fix: run with: docker run --device=/dev/kfd"
    assert text[8] == "diagnostics:" and text[10].strip() == "fix: unset it"
    assert text[11] == "gpu:" and text[12].split()[:2] == ["INFO", "gpu_tflops"]
    assert text[-1] == "1 passed, 1 failed, 1 warnings, 1 skipped, 1 info: exit 1 (a check failed)"


def test_json_carries_every_field() -> None:
    data = json.loads(as_json(RESULTS, ROCM_CELL, 1, ["--group-add 110"], simulated=False))
    assert list(data) == ["program", "cell", "platform", "exit_code", "exit_meaning", "gpu_visible", "simulated_gpu",
                          "summary", "runtime", "docker_flags", "apptainer_flags", "results"]
    assert data["summary"] == {"pass": 1, "fail": 1, "warn": 1, "skip": 1, "info": 1}
    assert data["results"][1] == {"name": "torch_version", "status": "fail",
                                  "detail": "torch 2.13.0 is installed, the image promises 2.12.0",
                                  "fix": "rebuild it", "seconds": 0.0, "section": "install", "timed_out": False}
    assert (data["platform"], data["exit_meaning"], data["gpu_visible"]) == ("rocm", "a check failed", False)
