"""A command run in process (typer's CliRunner) where no engine can be reached and no retry waits: the default
--record lands in the test's folder, DOCKER_HOST names a socket that does not exist (a command that asked the
engine fails loudly instead of finding the shared one), RIF_REGISTRY is unset (each test names its registry) and
retries back off in no time. Used by `builder plan`, its guards and the old spellings routed to it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes.checkout import ROOT

EXAMPLE = ROOT / "examples" / "local.yaml"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/rif-plan/docker.sock")
    monkeypatch.delenv("RIF_REGISTRY", raising=False)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
