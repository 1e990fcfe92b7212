"""build --push, push and publish run one lifecycle: a failing validation blocks the push in every one of them."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from builder.publish import jobs
from builder.publish import lifecycle as pipeline
from builder.registry.client import RegistryClient
from tests.conftest import DATA, builder_cli

pytestmark = [pytest.mark.docker, pytest.mark.registry]

BROKEN = "cpu_debian12_py3.11_torch2.13.0_broken"  # promises torch 2.12.0, installs 2.13.0


def commands(namespace: str, wheelhouse: Path, report: Path) -> dict[str, list[str]]:
    matrix = ["--matrix", str(DATA / "e2e.yaml"), "--cell", BROKEN, "--wheelhouse", str(wheelhouse)]
    return {
        "build": ["build", *matrix, "--push", "--registry", namespace, "--report", str(report), "--quiet"],
        "push": ["push", f"rocm-image-factory/pytorch:{BROKEN}", "--registry", namespace, "--report", str(report)],
        "publish": ["publish", *matrix, "--registry", namespace, "--record", str(report), "--quiet"],
    }


@pytest.mark.parametrize("command", ["build", "push", "publish"])
def test_a_failing_validation_blocks_the_push(command: str, namespace: str, base_image: str, wheelhouse: Path,
                                              tmp_path: Path, docker_client: docker.DockerClient) -> None:
    report = tmp_path / "record.json"
    if command == "push":  # the image to push must exist: build it without pushing
        built = builder_cli(*commands(namespace, wheelhouse, report)["build"][:7], "--no-validate", "--quiet")
        assert built.returncode == 0, built.stdout + built.stderr
    proc = builder_cli(*commands(namespace, wheelhouse, report)[command])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [row] = json.loads(report.read_text())["images"]
    assert (row["tag"], row["state"], row["failed_stage"], row["pushed"]) == (BROKEN, "failed", "validate", False)
    assert {c["name"] for c in row["validation"] if c["status"] == "fail"} >= {"torch_version"}
    assert "==> validate" in proc.stdout and "==> push" not in proc.stdout
    address, ns = namespace.split("/", 1)
    assert RegistryClient(address).tags(f"{ns}/pytorch") == []


def test_every_command_goes_through_run_image(monkeypatch: pytest.MonkeyPatch, namespace: str, base_image: str,
                                              wheelhouse: Path, tmp_path: Path) -> None:
    """Structural: the CLI commands reach images only through pipeline.run_image (spied in-process)."""
    from typer.testing import CliRunner

    from builder.cli.app import app

    report = tmp_path / "r.json"
    argv = commands(namespace, wheelhouse, report)
    built = builder_cli(*argv["build"][:7], "--no-validate", "--quiet")  # `push` needs the image to exist
    assert built.returncode == 0, built.stdout + built.stderr
    calls: list[str] = []

    def spy(client: object, job: jobs.Job, *args: object, **kwargs: object) -> object:
        calls.append(job.tag)
        failed = job.report()
        failed.fail("validate", "validation")
        return failed

    monkeypatch.setattr(pipeline, "run_image", spy)
    runner = CliRunner()
    for name, args in [*argv.items(), ("test", ["test", f"rocm-image-factory/pytorch:{BROKEN}"])]:
        calls.clear()
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (name, result.output)
        assert calls == [BROKEN], name
