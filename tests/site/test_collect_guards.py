"""The catalog's guards (issue 53, "the catalog"): a registry that refuses the credentials stops the whole catalog
(exit 1, nothing written: every page would be missing), while one image whose record cannot be joined costs its own
page only, with a warning naming it.

The registry is tests/site/test_site.py's FakeRegistry (the RegistryClient's tags/manifest/config in memory) and,
for the command, the scripted loopback registry (testkit/scripted_registry.py) answering 401 as
distribution does without credentials (`{"errors": [{"code": "UNAUTHORIZED", ...}]}`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builder import site
from builder.cli.app import app
from builder.registry.client import Manifest
from builder.registry.errors import AuthError
from testkit.scripted_registry import Reply, Scripted, Seen, oci_error
from tests.site.test_site import CPU_TAG, HASH_CPU, HASH_ROCM, REGISTRY, ROCM_TAG, FakeRegistry, labels

collect_module = sys.modules["builder.site.collect"]  # builder.site's `collect` is the function, not the module


def two_images() -> FakeRegistry:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10, 20], ["RUN a", "RUN b"])
    fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU), [30], ["RUN c"])
    return fake


class Refusing(FakeRegistry):
    """Refuses the credentials for the tag list, or for one tag's manifest."""

    def __init__(self, fake: FakeRegistry, on: str) -> None:
        super().__init__()
        self.__dict__.update(fake.__dict__)
        self.on = on

    def tags(self, repository: str) -> list[str]:
        if self.on == "tags":
            raise AuthError(f"{REGISTRY}: 401 Unauthorized: the credentials were refused")
        return super().tags(repository)

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        if reference == self.on:
            raise AuthError(f"{REGISTRY}: 403 Forbidden: the credentials were refused")
        return super().manifest(repository, reference)


@pytest.mark.parametrize("on", ["tags", CPU_TAG])
def test_refused_credentials_stop_the_catalog_and_write_nothing(on: str, tmp_path: Path) -> None:
    with pytest.raises(AuthError, match="the credentials were refused"):
        site.build_catalog(REGISTRY, tmp_path / "site", repositories=["pytorch"], reader=Refusing(two_images(), on))
    assert not (tmp_path / "site").exists()


def test_one_image_whose_join_fails_costs_its_page_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    join = collect_module._join

    def failing(entry: Any, *args: object) -> None:
        if entry.tag == CPU_TAG:
            raise ValueError("a record row of no known shape")
        join(entry, *args)

    monkeypatch.setattr(collect_module, "_join", failing)
    catalog = site.collect(two_images(), REGISTRY, ["pytorch"], [], [])
    assert [i.tag for i in catalog.images] == [ROCM_TAG]
    assert catalog.warnings == [f"{REGISTRY}/pytorch:{CPU_TAG}: unreadable data (ValueError): no page"]


Start = Callable[[Callable[[Seen], Reply]], Scripted]


def test_the_catalog_command_exits_1_when_the_registry_refuses_the_credentials(tmp_path: Path, server: Start) -> None:
    scripted = server(lambda seen: oci_error(401, "UNAUTHORIZED", "authentication required"))
    out = tmp_path / "site"
    result = CliRunner().invoke(app, ["catalog", "--out", str(out), "--registry", f"{scripted.address}/rocm",
                                      "--repository", "pytorch"])
    assert result.exit_code == 1, result.output
    assert f"registry {scripted.address} refused GET rocm/pytorch/tags/list (401 UNAUTHORIZED: authentication " \
           "required) with no credentials" in result.output, result.output
    assert "catalog of" not in result.output
    assert not (out / "index.html").exists()
