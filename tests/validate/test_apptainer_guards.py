"""builder.validate.apptainer's guards, each held by a test that fails without it (issue 53, "Validation"): a SIF
that fails to convert fails the image (and nothing runs from it), and torch-smoke runs in it as uid 1000, never
as root.

The engine is a stand-in here with the shape of the docker SDK calls the module makes (images.get -> an Image with
`attrs["RepoDigests"]` and `save()`; a container's `exec_run(cmd, user=, environment=, demux=True)` -> an ExecResult
whose `output` is (stdout, stderr) bytes; `put_archive` -> bool): docker-py 7.1 docker/models/containers.py. The
real conversion is tests/validate/test_apptainer.py's engine tier.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import docker
import pytest

from builder.validate import apptainer

SMOKE = json.dumps({"results": [{"name": "import", "status": "pass", "detail": "torch 2.13.0+cpu"}]})


@dataclass
class Box:
    """The runner container: each exec recorded with its user; `apptainer build` exits `build_code`."""

    build_code: int = 0
    execs: list[tuple[list[str], str, dict[str, str]]] = field(default_factory=list)

    def exec_run(self, command: list[str], user: str = "", environment: dict[str, str] | None = None,
                 demux: bool = False) -> Any:
        self.execs.append((command, user, dict(environment or {})))
        if "build" in command and "apptainer" in command:
            if self.build_code:
                return SimpleNamespace(exit_code=self.build_code, output=(b"", b"FATAL: while making image.sif\n"))
            return SimpleNamespace(exit_code=0, output=(b"INFO: Build complete\n", b""))
        if "torch-smoke" in command:
            return SimpleNamespace(exit_code=0, output=(SMOKE.encode(), b""))
        return SimpleNamespace(exit_code=0, output=(b"", b""))

    def put_archive(self, path: str, data: Any) -> bool:
        return True


def engine(box: Box, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A client whose image lives only in the engine (no RepoDigests: converted from `docker save`)."""
    image = SimpleNamespace(attrs={"RepoDigests": []}, save=lambda chunk_size: iter([b"tar"]))
    monkeypatch.setattr(apptainer.sifrunner, "ensure", lambda client: "rif-apptainer-runner:test")

    @contextlib.contextmanager
    def started(client: Any, image_ref: str, command: list[str], **options: Any) -> Iterator[Box]:
        assert options["privileged"] and options["network_mode"] == "host"
        yield box

    monkeypatch.setattr(apptainer, "started", started)
    return SimpleNamespace(images=SimpleNamespace(get=lambda ref: image))


def test_a_failed_conversion_fails_the_image_and_runs_nothing_from_the_sif(monkeypatch: pytest.MonkeyPatch) -> None:
    box = Box(build_code=255)
    checks = apptainer.run_apptainer(engine(box, monkeypatch), "rocm-image-factory/pytorch:x")
    assert [(c.suite, c.name, c.status) for c in checks] == [("apptainer", "convert", "fail")]
    assert checks[0].detail == ("apptainer build from the engine's archive (docker save) exited 255: "
                                "FATAL: while making image.sif")
    assert not any("torch-smoke" in command for command, _, _ in box.execs)
    assert not any("useradd" in " ".join(command) for command, _, _ in box.execs)


def test_a_conversion_that_exits_non_zero_is_a_fail_whatever_it_printed() -> None:
    box = Box(build_code=1)
    image = SimpleNamespace(save=lambda chunk_size: iter([b"tar"]))
    check = apptainer.convert(box, image, None)
    assert (check.name, check.status) == ("convert", "fail")
    assert check.detail.startswith("apptainer build from the engine's archive (docker save) exited 1: ")
    passed = apptainer.convert(Box(), image, None)
    assert (passed.name, passed.status) == ("convert", "pass")


def test_torch_smoke_runs_as_uid_1000_never_root(monkeypatch: pytest.MonkeyPatch) -> None:
    box = Box()
    checks = apptainer.run_apptainer(engine(box, monkeypatch), "rocm-image-factory/pytorch:x")
    assert [(c.suite, c.name, c.status) for c in checks] == [("apptainer", "convert", "pass"),
                                                            ("apptainer", "import", "pass")]
    [(command, user, _)] = [e for e in box.execs if "torch-smoke" in e[0]]
    assert user == "rif" and user != "root"
    assert command[:6] == ["timeout", "900", "apptainer", "--quiet", "exec", "--containall"]
    [setup] = [" ".join(c) for c, _, _ in box.execs if "useradd" in " ".join(c)]
    assert "useradd --create-home --uid 1000 rif" in setup and "chmod 0444 /work/image.sif" in setup
    assert "torch-smoke runs as uid 1000 with --containall" in checks[0].detail


class Refused(Box):
    """The engine refuses a command in the runner (the container died under it): a DockerException, as docker-py
    raises APIError for a 409 on exec."""

    def exec_run(self, command: list[str], user: str = "", environment: dict[str, str] | None = None,
                 demux: bool = False) -> Any:
        if "torch-smoke" in command:
            raise docker.errors.APIError("409 Client Error: Conflict (container is not running)")
        return super().exec_run(command, user, environment, demux)


def test_an_engine_that_refuses_the_runner_fails_this_image_with_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = apptainer.run_apptainer(engine(Refused(), monkeypatch), "rocm-image-factory/pytorch:x")
    assert [(c.suite, c.name, c.status) for c in checks] == [("apptainer", "run", "fail")]
    assert checks[0].detail == ("the Apptainer runner failed: 409 Client Error: Conflict (container is not "
                                "running)")


def test_no_runner_image_fails_this_image_naming_why(monkeypatch: pytest.MonkeyPatch) -> None:
    client = engine(Box(), monkeypatch)

    def missing(client: Any) -> str:
        raise RuntimeError("cannot build the Apptainer runner image: no base")

    monkeypatch.setattr(apptainer.sifrunner, "ensure", missing)
    checks = apptainer.run_apptainer(client, "rocm-image-factory/pytorch:x")
    assert [(c.suite, c.name, c.status, c.detail) for c in checks] == [
        ("apptainer", "runner", "fail", "no Apptainer runner: cannot build the Apptainer runner image: no base")]
