"""Options and fixtures of the in-image suite; `builder test` passes them, testinfra provides `host`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--rif-image", required=True, help="image reference under test")
    parser.addoption("--rif-expect", required=True, help="JSON file: {expect: {...}, labels: {...} | null}")


@pytest.fixture(scope="session")
def spec(request: pytest.FixtureRequest) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(request.config.getoption("--rif-expect")).read_text())
    return data


@pytest.fixture(scope="session")
def expect(spec: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = spec["expect"]
    return value


@pytest.fixture(scope="session")
def image_labels(request: pytest.FixtureRequest) -> dict[str, str]:
    image = docker.from_env().images.get(request.config.getoption("--rif-image"))
    return dict(image.labels or {})


@pytest.fixture(scope="session")
def image_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The image config's Config (Env, Entrypoint, Cmd): what Apptainer takes from a docker:// image."""
    image = docker.from_env().images.get(request.config.getoption("--rif-image"))
    config: dict[str, Any] = image.attrs.get("Config") or {}
    return config
