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
from builder.core import tags
from builder.registry.client import Manifest
from builder.registry.errors import AuthError
from builder.site.collect import _best_row  # the module's own function (builder.site's `collect` is another)
from builder.site.records import RecordRow
from builder.validate.runner import Check
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


# -- one build's record rows merged (collect._best_row): the newest row wins, gaps filled from older rows ---------

DIGEST, OTHER = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def record_row(finished: str, **fields: Any) -> RecordRow:
    fields.setdefault("digest", DIGEST)
    return RecordRow("t1", "pytorch", ("t1",), fields.pop("state", "published"), finished,
                     content_hash="sha256:c", **fields)


def test_the_newest_row_keeps_its_own_size_packages_and_checks_over_older_ones() -> None:
    newest = record_row("3", image_bytes=7, packages=("torch==2.13.0",), validation=(Check("smoke", "new", "pass"),))
    older = record_row("2", image_bytes=5, packages=("torch==2.12.0",), validation=(Check("smoke", "old", "fail"),))
    best = _best_row([older, newest], "t1", DIGEST, "sha256:c")
    assert best is not None and best.finished == "3"
    assert (best.image_bytes, best.packages, [c.name for c in best.validation]) == (7, ("torch==2.13.0",), ["new"])


def test_what_the_newest_row_lacks_comes_from_the_newest_older_row_that_has_it() -> None:
    rows = [record_row("1", image_bytes=5, packages=("torch==2.11.0",), validation=(Check("smoke", "one", "pass"),)),
            record_row("2", image_bytes=6, packages=("torch==2.12.0",)),
            record_row("3", state="skipped")]
    best = _best_row(rows, "t1", DIGEST, "sha256:c")
    assert best is not None and (best.finished, best.state) == ("3", "skipped")
    assert (best.image_bytes, best.packages, [c.name for c in best.validation]) == (6, ("torch==2.12.0",), ["one"])


def test_no_older_row_of_the_build_leaves_the_gaps_empty() -> None:
    rows = [record_row("1", digest=OTHER, image_bytes=9, packages=("torch==2.10.0",)), record_row("2", state="skipped")]
    best = _best_row(rows, "t1", DIGEST, "sha256:c")
    assert best is not None and (best.image_bytes, best.packages, best.validation) == (None, (), ())


def test_the_first_push_of_the_manifest_is_its_published_time() -> None:
    rows = [record_row("1"), record_row("2"), record_row("3", state="skipped")]
    best = _best_row(rows, "t1", DIGEST, "sha256:c")
    assert best is not None and best.published_time == "1"


def test_an_image_with_a_tag_label_and_no_content_hash_label_keeps_its_page() -> None:
    """An image pushed by another tool (or an older factory) carries our tag label but no content hash: no
    immutable tag can be derived from it, and its page is still made, without a warning."""
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10, 20], ["RUN a", "RUN b"])
    unhashed = {k: v for k, v in labels(CPU_TAG, HASH_CPU).items() if k != tags.HASH_LABEL}
    fake.push("rocm/pytorch", [CPU_TAG], unhashed, [30], ["RUN c"])
    catalog = site.collect(fake, REGISTRY, ["pytorch"], [], [])
    assert sorted(i.tag for i in catalog.images) == sorted([ROCM_TAG, CPU_TAG]) and catalog.warnings == []
    [cpu] = [i for i in catalog.images if i.tag == CPU_TAG]
    assert cpu.immutable_tag is None and cpu.record is None


def test_a_layer_s_step_is_its_history_command_else_its_comment_else_empty() -> None:
    """Images exported by some tools record a layer's origin as a history comment, with no command: the page shows
    the comment; a history entry with neither shows an empty step, never the word None."""
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU), [30, 40, 50], ["RUN c", "RUN d", "RUN e"])
    [config] = fake.blobs.values()
    config["history"][1] = {"comment": "buildkit.exporter.image.v0"}
    config["history"][3] = {"created_by": "", "comment": ""}
    [image] = site.collect(fake, REGISTRY, ["pytorch"], [], []).images
    assert [(layer.step, layer.size) for layer in image.published.layers] == [
        ("buildkit.exporter.image.v0", 30), ("RUN d", 40), ("", 50)]
