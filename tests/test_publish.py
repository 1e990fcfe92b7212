"""Publishing on real registries: skip by content, promote by digest, survive a dying registry, auth."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import docker
import pytest

from builder.credentials import Credentials
from builder.registry import RegistryClient
from tests.conftest import ROOT, unavailable

pytestmark = pytest.mark.docker

RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"
DEVEL = "cpu_debian12_py3.11_torch2.13.0_devel"
TORCH = "{version: '2.13.0', torchvision: null, torchaudio: null}"
MATRIX = f"image: pytorch\nmatrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: [{TORCH}]\n" \
         "  flavor: [runtime, devel]\n"


def cell_override(flavor: str, tag: str, extra: str) -> str:
    """A matrix in which one cell's input changes and every other cell stays the same."""
    return (MATRIX + f"exclude:\n  - {{flavor: {flavor}}}\ninclude:\n"
            f"  - {{os: debian-12, platform: cpu, torch: {TORCH}, flavor: {flavor}, tag: {tag}, {extra}}}\n")


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    record: dict[str, dict[str, object]]
    seconds: float


def publish(matrix_text: str, registry: str, wheelhouse: Path, tmp: Path, env: dict[str, str] | None = None,
            *extra: str) -> Run:
    matrix = tmp / f"m-{uuid.uuid4().hex[:6]}.yaml"
    matrix.write_text(matrix_text)
    record = tmp / f"r-{uuid.uuid4().hex[:6]}.json"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "builder", "publish", "--matrix", str(matrix), "--registry", registry,
                           "--wheelhouse", str(wheelhouse), "--record", str(record), "--quiet", *extra],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, check=False)
    seconds = time.monotonic() - start
    cells = {c["tag"]: c for c in json.loads(record.read_text())["images"]} if record.exists() else {}
    return Run(proc, cells, seconds)


@pytest.fixture
def ns(registry: str) -> tuple[str, RegistryClient, str]:
    name = f"pub{uuid.uuid4().hex[:8]}"
    return f"{registry}/{name}", RegistryClient(registry), f"{name}/pytorch"


def test_republish_builds_and_pushes_nothing(ns: tuple[str, RegistryClient, str], base_image: str,
                                             wheelhouse: Path, tmp_path: Path) -> None:
    target, api, repo = ns
    first = publish(MATRIX, target, wheelhouse, tmp_path)
    assert first.proc.returncode == 0, first.proc.stdout + first.proc.stderr
    assert {k: v["state"] for k, v in first.record.items()} == {RUNTIME: "published", DEVEL: "published"}
    digests = {tag: api.digest(repo, tag) for tag in api.tags(repo)}
    immutable = {str(r["immutable_tag"]) for r in first.record.values()}
    assert set(digests) == {RUNTIME, DEVEL, "latest"} | immutable
    assert digests[RUNTIME] == digests["latest"] == first.record[RUNTIME]["digest"]

    again = publish(MATRIX, target, wheelhouse, tmp_path)
    assert again.proc.returncode == 0
    assert {k: (v["state"], v["pushed"], v["moved"]) for k, v in again.record.items()} == {
        RUNTIME: ("skipped", False, []), DEVEL: ("skipped", False, [])}
    assert {tag: api.digest(repo, tag) for tag in api.tags(repo)} == digests
    assert "0 built, 2 unchanged, 0 failed" in again.proc.stdout
    assert again.seconds < first.seconds / 2


def test_dry_run_touches_nothing(ns: tuple[str, RegistryClient, str], base_image: str, wheelhouse: Path,
                                 tmp_path: Path, docker_client: docker.DockerClient) -> None:
    target, api, repo = ns
    run = publish(MATRIX, target, wheelhouse, tmp_path, None, "--dry-run")
    assert run.proc.returncode == 0, run.proc.stderr
    assert {k: (v["state"], v["moved"]) for k, v in run.record.items()} == {
        RUNTIME: ("would-build", [RUNTIME, "latest"]), DEVEL: ("would-build", [DEVEL])}
    assert api.tags(repo) == []


def test_changed_cell_alone_is_rebuilt_and_a_failing_cell_keeps_its_good_digest(
        ns: tuple[str, RegistryClient, str], base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    target, api, repo = ns
    first = publish(MATRIX, target, wheelhouse, tmp_path)
    assert first.proc.returncode == 0, first.proc.stderr
    good = {RUNTIME: api.digest(repo, RUNTIME), DEVEL: api.digest(repo, DEVEL)}

    changed = publish(cell_override("devel", DEVEL, "user: ml"), target, wheelhouse, tmp_path)
    assert changed.proc.returncode == 0, changed.proc.stderr
    assert changed.record[RUNTIME]["state"] == "skipped"
    assert changed.record[DEVEL]["state"] == "published" and changed.record[DEVEL]["moved"] == [DEVEL]
    assert api.digest(repo, RUNTIME) == good[RUNTIME]
    assert api.digest(repo, DEVEL) == changed.record[DEVEL]["digest"] != good[DEVEL]

    broken = publish(cell_override("runtime", RUNTIME, "expect: {torch: '2.12.0'}"), target, wheelhouse, tmp_path)
    assert broken.proc.returncode == 1
    assert broken.record[RUNTIME]["state"] == "failed" and broken.record[RUNTIME]["failure"] == "validation"
    assert any("torch" in str(c) for c in broken.record[RUNTIME]["failed_checks"])  # type: ignore[attr-defined]
    assert api.digest(repo, RUNTIME) == api.digest(repo, "latest") == good[RUNTIME]


# -- registries started by the tests themselves ------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Registry:
    """A real distribution registry on its own port and storage, which a test may stop and start."""

    def __init__(self, root: Path, htpasswd: Path | None = None) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        auth = f"auth:\n  htpasswd:\n    realm: rif-test\n    path: {htpasswd}\n" if htpasswd else ""
        self.config = root / f"registry-{self.port}.yml"
        self.config.write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: "
                               f"{root / 'storage'}}}\nhttp:\n  addr: {self.address}\n{auth}")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["docker-registry", "serve", str(self.config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://{self.address}/v2/", timeout=1)
                return
            except urllib.error.HTTPError:
                return  # 401 from an auth registry: it is up
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("registry did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None


@pytest.fixture
def own_registry(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Registry]:
    if subprocess.run(["sh", "-c", "command -v docker-registry"], capture_output=True, check=False).returncode:
        unavailable("docker-registry is not installed")
    reg = Registry(tmp_path)
    reg.start()
    yield reg
    reg.stop()


def assert_every_tag_resolves(api: RegistryClient, repo: str) -> None:
    for tag in api.tags(repo):
        manifest = api.manifest(repo, tag)
        assert manifest is not None, f"{repo}:{tag} points at a missing manifest"
        assert api.config_labels(repo, tag), f"{repo}:{tag}: config blob missing"


def test_registry_dying_mid_push_fails_cleanly_and_a_rerun_completes(
        own_registry: Registry, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    target = f"{own_registry.address}/dying"
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX)
    record = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "builder", "publish", "--matrix", str(matrix), "--registry", target,
           "--wheelhouse", str(wheelhouse), "--record", str(record), "--quiet", "--cell", RUNTIME]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    assert proc.stdout is not None
    output = []
    for line in proc.stdout:
        output.append(line)
        if line.startswith("==> push"):
            time.sleep(1.0)  # the layers are on their way
            own_registry.stop()
            break
    output += proc.stdout.readlines()
    assert proc.wait(timeout=300) == 1, "".join(output)
    cell = json.loads(record.read_text())["images"][0]
    assert cell["state"] == "failed" and str(cell["failure"]).startswith("push:"), cell

    own_registry.start()
    api = RegistryClient(own_registry.address)
    assert RUNTIME not in api.tags("dying/pytorch")
    assert_every_tag_resolves(api, "dying/pytorch")
    rerun = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "==> build" not in rerun.stdout  # the image built before the failure is reused, not rebuilt
    cell = json.loads(record.read_text())["images"][0]
    assert cell["state"] == "published" and api.digest("dying/pytorch", RUNTIME) == cell["digest"]
    assert_every_tag_resolves(api, "dying/pytorch")


SECRET = f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture
def auth_registry(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Registry]:
    if subprocess.run(["sh", "-c", "command -v docker-registry"], capture_output=True, check=False).returncode:
        unavailable("docker-registry is not installed")
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(f"alice:{bcrypt.hashpw(SECRET.encode(), bcrypt.gensalt(rounds=5)).decode()}\n")
    reg = Registry(tmp_path, htpasswd)
    reg.start()
    yield reg
    reg.stop()


def test_htpasswd_registry_with_good_and_wrong_credentials(
        auth_registry: Registry, base_image: str, wheelhouse: Path, tmp_path: Path,
        docker_client: docker.DockerClient) -> None:
    target = f"{auth_registry.address}/private"
    wrong = publish(MATRIX, target, wheelhouse, tmp_path,
                    {"RIF_REGISTRY_USER": "alice", "RIF_REGISTRY_PASSWORD": "not-the-password"}, "--cell", RUNTIME)
    assert wrong.proc.returncode == 1
    # Rejected credentials stop the run before any build: one line naming registry and user, a full record.
    message = wrong.proc.stderr
    assert auth_registry.address in message and "'alice'" in message and "RIF_REGISTRY_USER" in message
    assert "==> build" not in wrong.proc.stdout and "Traceback" not in message
    assert wrong.record[RUNTIME]["state"] == "not-attempted"
    assert "not-the-password" not in wrong.proc.stdout + wrong.proc.stderr + json.dumps(wrong.record)

    good = publish(MATRIX, target, wheelhouse, tmp_path,
                   {"RIF_REGISTRY_USER": "alice", "RIF_REGISTRY_PASSWORD": SECRET}, "--cell", RUNTIME)
    assert good.proc.returncode == 0, good.proc.stdout + good.proc.stderr
    api = RegistryClient(auth_registry.address, Credentials("alice", SECRET, "test"))
    assert api.digest("private/pytorch", RUNTIME) == good.record[RUNTIME]["digest"]

    # The secret is in no log line, run record, label, history entry or layer of the image.
    logs = good.proc.stdout + good.proc.stderr + json.dumps(good.record)
    assert SECRET not in logs
    image = docker_client.images.get(f"rocm-image-factory/pytorch:{RUNTIME}")
    assert SECRET not in json.dumps(image.attrs) + json.dumps(image.history())
    saved = tmp_path / "image.tar"
    with saved.open("wb") as fh:
        for chunk in image.save(named=True):
            fh.write(chunk)
    with tarfile.open(saved) as outer:
        for member in outer.getmembers():
            data = outer.extractfile(member) if member.isfile() else None
            if data is None:
                continue
            if member.name.endswith("layer.tar"):
                with tarfile.open(fileobj=data) as layer:
                    for entry in layer.getmembers():
                        if entry.isfile():  # hard links point at files checked on their own
                            content = layer.extractfile(entry)
                            assert content is not None and SECRET.encode() not in content.read(), entry.name
            else:
                assert SECRET.encode() not in data.read(), member.name
