"""Stage 4: built image -> validated image. Nothing reaches a registry without passing both parts:

(a) the pytest-testinfra suite (builder/validation) against a running container of the image, and
(b) the in-image smoke test, run the way a user runs it: `docker run IMAGE torch-smoke --json`,
side by side, each in a container of its own (neither reads what the other does), and reported in that order.
"""

from __future__ import annotations

import contextlib
import grp
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from builder.buildkit.engine import run_captured, side_by_side, started
from builder.core.scratch import scratch_dir
from builder.validate.suite import SUITE_DIR

SMOKE_TIMEOUT_S = 900
ROCM_DEVICES = ["kfd", "dri"]  # under /dev


@dataclass(frozen=True)
class Check:
    suite: str
    name: str
    status: str  # pass | fail | skip
    detail: str = ""
    fix: str = ""


@dataclass
class ValidationResult:
    ref: str
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not any(c.status == "fail" for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]


def validate_image(client: docker.DockerClient, ref: str, expect: dict[str, Any],
                   labels: dict[str, str] | None, gpu: bool = False) -> ValidationResult:
    """Run both suites; labels=None holds the labels to the expectations baked into the image."""
    start = time.monotonic()
    result = ValidationResult(ref)
    infra, smoke = side_by_side(client, lambda: run_testinfra(client, ref, expect, labels),
                                lambda: run_smoke(client, ref, gpu, str(expect.get("platform", ""))))
    result.checks += infra + smoke
    result.seconds = time.monotonic() - start
    return result


def run_testinfra(client: docker.DockerClient, ref: str, expect: dict[str, Any],
                  labels: dict[str, str] | None) -> list[Check]:
    with scratch_dir("rif-testinfra-") as folder, \
            started(client, ref, ["sleep", "infinity"], entrypoint=[]) as container:
        tmp = str(folder)
        spec = Path(tmp) / "expect.json"
        spec.write_text(json.dumps({"expect": expect, "labels": labels}))
        junit = Path(tmp) / "junit.xml"
        (Path(tmp) / "pytest.ini").write_text("[pytest]\n")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(Path(tmp) / "pytest.ini"),
             "--rootdir", tmp, str(SUITE_DIR / "test_image.py"), f"--hosts=docker://{container.id}",
             f"--rif-image={ref}", f"--rif-expect={spec}", f"--junitxml={junit}"],
            capture_output=True, text=True, check=False)
        if not junit.exists():
            return [Check("testinfra", "suite", "fail", f"pytest did not run: {proc.stderr[-2000:]}")]
        return parse_junit(junit.read_text())


def parse_junit(xml_text: str) -> list[Check]:
    checks = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        name = case.get("name", "?").split("[", 1)[0].removeprefix("test_")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            message = (failure.get("message") or failure.text or "failed").strip().splitlines()[0]
            checks.append(Check("testinfra", name, "fail", message[:500]))
        elif case.find("skipped") is not None:
            checks.append(Check("testinfra", name, "skip"))
        else:
            checks.append(Check("testinfra", name, "pass"))
    return checks


def gpu_run_options(platform: str = "rocm", dev: Path = Path("/dev")) -> dict[str, Any]:
    """The docker run options that give a container the host's GPUs.

    ROCm: /dev/kfd and /dev/dri (those that exist: a missing one would stop the container from starting,
    and torch-smoke's diagnostics explain a missing device better), and the groups that own them by the
    host's numeric GID: the render group's number differs between host and image, so a name would not do.
    CUDA: every GPU through the NVIDIA runtime.
    """
    if platform.startswith("cuda"):
        return {"device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
                "ipc_mode": "host"}
    devices = [f"{dev / name}:/dev/{name}:rwm" for name in ROCM_DEVICES if (dev / name).exists()]
    gids: set[int] = set()
    with contextlib.suppress(KeyError):
        gids.add(grp.getgrnam("render").gr_gid)
    for path in [dev / "kfd", *sorted((dev / "dri").glob("*"))]:
        with contextlib.suppress(OSError):
            gids.add(path.stat().st_gid)
    gids.discard(0)
    return {"devices": devices,
            "group_add": ["video", *map(str, sorted(gids))],
            "security_opt": ["seccomp=unconfined"], "ipc_mode": "host"}


def run_smoke(client: docker.DockerClient, ref: str, gpu: bool, platform: str = "rocm") -> list[Check]:
    command = ["torch-smoke", "--json", *(["--require-gpu"] if gpu else [])]
    options = gpu_run_options(platform) if gpu else {}
    try:
        code, out, err = run_captured(client, ref, command, timeout=SMOKE_TIMEOUT_S, **options)
    except TimeoutError as exc:
        return [Check("smoke", "run", "fail", str(exc))]
    return parse_smoke(out, err, code)


def parse_smoke(stdout: str, stderr: str, code: int) -> list[Check]:
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        return [Check("smoke", "run", "fail", f"torch-smoke exited {code} without a report: {stderr[-500:]}")]
    checks = [Check("smoke", r["name"], r["status"], r.get("detail", ""), r.get("fix", ""))
              for r in report["results"]]
    if code != 0 and not any(c.status == "fail" for c in checks):
        gpu = next((c for c in checks if c.name == "gpu"), None)
        if code == 3:
            checks.append(Check("smoke", "exit", "fail", "torch-smoke exited 3: a GPU was required and none is "
                                "visible" + (f" ({gpu.detail})" if gpu else ""), gpu.fix if gpu else ""))
        else:
            checks.append(Check("smoke", "exit", "fail", f"torch-smoke exited {code}"))
    return checks
