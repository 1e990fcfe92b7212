"""The builder's side of the smoke test (builder.validate.runner): GPU run options and reading torch-smoke's report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from builder.validate.runner import gpu_run_options, parse_smoke


def test_gpu_run_options_pass_the_hosts_numeric_gids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builder.validate.runner.grp.getgrnam", lambda name: SimpleNamespace(gr_gid=110))
    (tmp_path / "dri").mkdir()
    (tmp_path / "kfd").touch()
    (tmp_path / "dri" / "renderD128").touch()
    if os.geteuid() == 0:
        os.chown(tmp_path / "dri" / "renderD128", 0, 123)
    options = gpu_run_options("rocm7.2", tmp_path)
    assert options["devices"] == [f"{tmp_path}/kfd:/dev/kfd:rwm", f"{tmp_path}/dri:/dev/dri:rwm"]
    assert options["group_add"][0] == "video" and "110" in options["group_add"] and "render" not in options["group_add"]
    if os.geteuid() == 0:
        assert "123" in options["group_add"]
    assert gpu_run_options("rocm7.2", tmp_path / "nothing")["devices"] == []
    assert "device_requests" in gpu_run_options("cuda12.8")


def test_exit_3_is_reported_with_the_fix() -> None:
    report = {"results": [{"name": "gpu", "status": "skip", "detail": "no GPU visible to torch",
                           "fix": "run with: docker run --device=/dev/kfd IMAGE torch-smoke"},
                          {"name": "gpu_env", "status": "warn", "detail": "x", "fix": "y"}]}
    checks = parse_smoke(json.dumps(report), "", 3)
    assert checks[-1].status == "fail" and "a GPU was required" in checks[-1].detail
    assert checks[-1].fix == "run with: docker run --device=/dev/kfd IMAGE torch-smoke"
    assert checks[1].status == "warn"
