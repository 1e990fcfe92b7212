"""`builder catalog` (builder.cli.catalog): bad input refused before anything is read, warnings and their exit code."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder import site
from builder.cli.app import app
from builder.site.model import Catalog
from testkit.scripted_registry import Reply, Scripted, Seen
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


# -- error paths and hostile answers (issue 39) ----------------------------------------
# `builder catalog`'s error paths: a refused credential or a passed deadline stops the whole catalog with one
# clear error (exit 1), and the site written before is kept as it was; never a warning and a rewritten site.

Start = Callable[[Callable[[Seen], Reply]], Scripted]


class Switch:
    """An empty registry until refuse is set: then every request is a 401, whatever credentials it carries."""

    def __init__(self) -> None:
        self.refuse = ""  # "": answer; "all": refuse every request; "tags": list a tag, refuse reading it

    def answer(self, seen: Seen) -> Reply:
        listing = seen.path.startswith("/v2/rocm/pytorch/tags/list")
        if self.refuse == "all" or (self.refuse == "tags" and not listing):
            return 401, {"WWW-Authenticate": 'Basic realm="r"'}, b""
        if listing:
            listed = ["rocm7.2_torch2.13.0_gfx942"] if self.refuse else []
            return 200, {"Content-Type": "application/json"}, json.dumps({"name": "rocm/pytorch",
                                                                          "tags": listed}).encode()
        return 200, {}, b"{}"


def catalog(address: str, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.setenv("RIF_REGISTRY_USER", "alice")
    monkeypatch.setenv("RIF_REGISTRY_PASSWORD", "wrong")
    result = CliRunner().invoke(app, ["catalog", "--out", str(out), "--registry", f"{address}/rocm"],
                                env={"COLUMNS": "300", "NO_COLOR": "1"})
    return result.exit_code, " ".join(result.output.split())


def old_site(server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Switch, Scripted, Path,
                                                                                         dict[str, bytes]]:
    switch = Switch()
    scripted = server(switch.answer)
    out = tmp_path / "site"
    code, output = catalog(scripted.address, out, monkeypatch)
    assert code == 0 and (out / "index.html").is_file(), output
    return switch, scripted, out, {p.name: p.read_bytes() for p in out.iterdir()}


@pytest.mark.parametrize("refuse", ["all", "tags"])
def test_a_refused_credential_stops_the_catalog_and_keeps_the_old_site(server: Start, tmp_path: Path, refuse: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    switch, scripted, out, before = old_site(server, tmp_path, monkeypatch)
    switch.refuse = refuse
    code, output = catalog(scripted.address, out, monkeypatch)
    assert code == 1, output
    assert "error: registry:" in output and "warning" not in output and "unexpected" not in output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_passed_deadline_stops_the_catalog_and_keeps_the_old_site(server: Start, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _, scripted, out, before = old_site(server, tmp_path, monkeypatch)
    monkeypatch.setattr(site, "DEADLINE_S", 0.0)
    code, output = catalog(scripted.address, out, monkeypatch)
    assert code == 1, output
    assert "error: registry:" in output and "warning" not in output and "unexpected" not in output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
