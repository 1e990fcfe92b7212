"""`builder catalog` (builder.cli.catalog): bad input refused before anything is read, warnings and their exit code."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.site.model import Catalog
from tests.fakes.checkout import builder_cli


def test_cli_refuses_bad_input_before_reading_anything(tmp_path: Path) -> None:
    proc = builder_cli("catalog", "--out", str(tmp_path / "s"), "--registry", "HTTP://Bad")
    assert proc.returncode == 2 and "--registry" in proc.stderr
    proc = builder_cli("catalog", "--out", str(tmp_path / "s"), "--registry", "127.0.0.1:5000/x",
                       "--repository", "../x")
    assert proc.returncode == 2 and "not a repository name" in proc.stderr
    assert not (tmp_path / "s").exists()
    assert builder_cli("catalog", "--help").returncode == 0


def test_a_catalog_with_warnings_is_written_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from builder import site

    def build_catalog(registry: str, out: Path, *args: object, **kwargs: object) -> tuple[Catalog, list[Path]]:
        assert (registry, kwargs["insecure"]) == ("reg.lan:5000/ns", frozenset({"reg.lan:5000"}))
        return Catalog(registry, [], [], "now", ["pytorch:x left out\n"]), []

    monkeypatch.setattr(site, "build_catalog", build_catalog)
    result = CliRunner().invoke(app, ["catalog", "--out", str(tmp_path), "--registry", "reg.lan:5000/ns",
                                      "--insecure-registry", "reg.lan:5000"])
    assert result.exit_code == 1
    assert "warning: pytorch:x left out\\x0a" in result.output and "1 thing(s) left out" in result.output


def test_without_a_registry_it_asks_for_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIF_REGISTRY", raising=False)
    result = CliRunner().invoke(app, ["catalog", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "needs REGISTRY/NAMESPACE" in result.output
