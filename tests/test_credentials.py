"""Where registry credentials come from: the environment first, then the Docker config and its helpers."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from builder import credentials


def test_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RIF_REGISTRY_USER", "ci")
    monkeypatch.setenv("RIF_REGISTRY_PASSWORD", "tok")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    found = credentials.lookup("ghcr.io/org")
    assert found is not None and (found.username, found.password) == ("ci", "tok")
    assert "tok" not in repr(found) and "tok" not in found.describe()


def test_docker_config_auths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    auth = base64.b64encode(b"alice:p:ss").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"127.0.0.1:5000": {"auth": auth}}}))
    found = credentials.lookup("127.0.0.1:5000/rocm")
    assert found is not None and (found.username, found.password) == ("alice", "p:ss")
    assert credentials.lookup("ghcr.io/other") is None


def test_docker_credential_helper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    helper.write_text('#!/bin/sh\nread host\necho "{\\"Username\\": \\"bob\\", \\"Secret\\": \\"s-$host\\"}"\n')
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "config.json").write_text(json.dumps({"credHelpers": {"ghcr.io": "fake"}}))
    found = credentials.lookup("ghcr.io/org")
    assert found is not None and (found.username, found.password) == ("bob", "s-ghcr.io")
    assert "credential helper 'fake'" in found.source
