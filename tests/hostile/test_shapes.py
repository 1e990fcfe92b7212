"""Issue 31: JSON from outside has the shape its kind has, or it is one clear error; what one answer costs is
bounded; a fault costs its unit (a row, a tag's page, an SBOM entry), never the command's whole output."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder import site
from builder.audit import diff, layers, reproduce
from builder.registry import models
from builder.registry.client import Manifest, RegistryClient, RegistryError
from builder.render import lockfile
from builder.site.records import parse_record
from builder.validate import sbom
from testkit.scripted_registry import Reply, Scripted, Seen
from tests.hostile.test_registry import ONCE, cli
from tests.site.test_site import HASH_ROCM, REGISTRY, ROCM_TAG, FakeRegistry, labels, record_row, write_record


def sha(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def image(config: bytes, layers: int = 1) -> tuple[bytes, dict[str, bytes]]:
    """A manifest naming config, and the blobs a registry serves for it."""
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": sha(config), "size": len(config)},
                           "layers": [{"digest": sha(b"%d" % i), "size": 1} for i in range(layers)]}).encode()
    return manifest, {sha(config): config}


def registry(server: Callable[[Callable[[Seen], Reply]], Scripted], manifest: bytes, blobs: dict[str, bytes],
             referrers: bytes = b'{"manifests": []}') -> Scripted:
    def answer(seen: Seen) -> Reply:
        if seen.path.endswith("/tags/list"):
            return 200, {}, b'{"tags": ["tag"]}'
        if "/referrers/" in seen.path:
            return 200, {"Content-Type": "application/vnd.oci.image.index.v1+json"}, referrers
        if "/manifests/" in seen.path:
            return 200, {}, manifest
        digest = seen.path.rsplit("/", 1)[-1]
        return (200, {}, blobs[digest]) if digest in blobs else (404, {}, b"")
    return server(answer)


# -- 1. shapes -------------------------------------------------------------------------------------------------

def test_an_sbom_listing_a_package_with_and_without_an_arch_diffs() -> None:
    """sorted() compared None with a string: a TypeError and a traceback file."""
    doc = {"bomFormat": "CycloneDX", "components": [
        {"name": "libc6", "version": "2.39", "purl": "pkg:deb/ubuntu/libc6@2.39?arch=amd64"},
        {"name": "libc6", "version": "2.39", "purl": "pkg:deb/ubuntu/libc6@2.39"}]}
    packages = sbom.parse(json.dumps(doc).encode())
    assert [p.arch for p in packages] == [None, "amd64"]
    assert diff.diff(packages, packages[:1]).of("removed") == []  # libc6 (amd64 is no arch of its own) stays


def test_an_odd_sbom_entry_costs_that_entry_and_is_counted() -> None:
    doc = {"bomFormat": "CycloneDX", "components": [
        {"name": "a", "version": "1", "purl": "pkg:pypi/a@1"}, {"name": ["x"], "version": 2, "purl": "pkg:pypi/b"}]}
    found = sbom.read(json.dumps(doc).encode())
    assert [p.name for p in found.packages] == ["a"] and found.skipped == 1


def test_a_referrers_answer_whose_manifests_is_a_number_is_one_registry_error(
        server: Callable[[Callable[[Seen], Reply]], Scripted], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`{"manifests": 5}`: 'int' object is not iterable."""
    for name in ("RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    manifest, blobs = image(b"{}")
    reg = registry(server, manifest, blobs, referrers=b'{"manifests": 5}')
    with pytest.raises(RegistryError, match=r"referrers .* manifests: Input should be a valid array"):
        diff.fetch(diff.parse_ref(f"{reg.address}/ns/r:tag", "A"))
    proc = cli(tmp_path, "diff", f"{reg.address}/ns/r:tag", f"{reg.address}/ns/r:tag")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "rif-crash" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:")


@pytest.mark.parametrize("config", [{"config": "x"}, {"config": {"Labels": ["a", "b"]}},
                                    {"config": {"Labels": {"a": 5}}}, {"history": {"a": 1}}, [1]],
                         ids=["config-str", "labels-list", "label-int", "history-dict", "no-object"])
def test_reproduce_refuses_a_config_of_another_shape_before_any_rebuild(
        server: Callable[[Callable[[Seen], Reply]], Scripted], config: object) -> None:
    """`.get` on a str or a list, before any rebuild."""
    manifest, blobs = image(json.dumps(config).encode())
    reg = registry(server, manifest, blobs)

    def rebuild(published: reproduce.Published, out: Path) -> str:
        raise AssertionError("no rebuild of an image whose config cannot be read")

    with pytest.raises(reproduce.ReproduceError, match=r"config sha256:[0-9a-f]{64}: "):
        reproduce.check("ref", "ns/r", "tag", RegistryClient(reg.address, policy=ONCE), rebuild)


@pytest.mark.parametrize("repository", ["../../x<script>", "PyTorch", 5, "a" * 300])
def test_a_record_row_of_no_repository_costs_that_row_not_the_catalog(tmp_path: Path, repository: object) -> None:
    """It stopped the catalog with exit 2 and a message about a --repository option nobody gave."""
    fake = FakeRegistry()
    digest = fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10], ["/bin/sh -c true"])
    record = write_record(tmp_path / "r.json", [record_row(ROCM_TAG, HASH_ROCM, digest),
                                                record_row("other", HASH_ROCM, None, repository=repository)])
    catalog, written = site.build_catalog(REGISTRY, tmp_path / "site", [record], reader=fake)
    assert [i.tag for i in catalog.images] == [ROCM_TAG] and catalog.images[0].record is not None
    assert len(catalog.warnings) == 1 and "r.json: images[1]: repository" in catalog.warnings[0]
    assert "row skipped" in catalog.warnings[0]
    assert (tmp_path / "site" / "images" / "pytorch" / f"{ROCM_TAG}.html") in written


# -- 3. cost ---------------------------------------------------------------------------------------------------

def test_a_50000_layer_image_costs_its_page_only_and_little_output() -> None:
    """It wrote a 24 MB page per tag; each tag on the same manifest another copy."""
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10], ["/bin/sh -c true"])
    fake.push("rocm/pytorch", ["huge", "huge2"], labels("huge", HASH_ROCM), [1] * 50_000,
              [f"/bin/sh -c echo {i} " + "x" * 300 for i in range(50_000)])
    catalog = site.collect(fake, REGISTRY, ["pytorch"], [], [])
    pages = site.render_pages(catalog)
    assert f"images/pytorch/{ROCM_TAG}.html" in pages and "images/pytorch/huge.html" not in pages
    assert sum(len(text) for text in pages.values()) < 1 << 20
    lost = [w for w in catalog.warnings if ":huge" in w]
    assert len(lost) == 2 and all("at most 500" in w or "history" in w for w in lost), lost


def test_a_page_lists_at_most_200_layers_and_says_so() -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [1] * 300,
              [f"/bin/sh -c step-{i}" for i in range(300)])
    pages = site.render_pages(site.collect(fake, REGISTRY, ["pytorch"], [], []))
    html, md = pages[f"images/pytorch/{ROCM_TAG}.html"], pages[f"images/pytorch/{ROCM_TAG}.md"]
    assert "step-199" in html and "step-200" not in html and "layers: first 200 of 300 shown" in html
    assert "step-200" not in md and "layers: first 200 of 300 shown" in md


def test_a_manifest_shared_by_tags_is_rendered_once() -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG, "alias"], labels(ROCM_TAG, HASH_ROCM), [1] * 50,
              [f"/bin/sh -c step-{i}" for i in range(50)])
    pages = site.render_pages(site.collect(fake, REGISTRY, ["pytorch"], [], []))
    full, alias = pages[f"images/pytorch/{ROCM_TAG}.html"], pages["images/pytorch/alias.html"]
    assert "step-49" in full and "step-" not in alias and f'href="{ROCM_TAG}.html"' in alias
    assert "same image" in pages["images/pytorch/alias.md"] and len(alias) < len(full) / 2


def test_a_config_over_its_cap_is_refused_before_it_is_parsed(
        server: Callable[[Callable[[Seen], Reply]], Scripted]) -> None:
    """A 60 MiB config of tiny objects peaked at 1.7 GB of memory: a config is read up to 4 MiB, no more."""
    config = b"[" + b"{}," * ((models.MAX_CONFIG_BYTES // 3) + 1) + b"{}]"
    manifest, blobs = image(config)
    reg = registry(server, manifest, blobs)
    client = RegistryClient(reg.address, policy=ONCE)
    with pytest.raises(RegistryError, match=f"more than the {models.MAX_CONFIG_BYTES} read"):
        client.config("ns/r", Manifest(manifest, "", sha(manifest)))


def test_a_memory_error_costs_its_tag_only(tmp_path: Path) -> None:
    class Greedy(FakeRegistry):
        greedy = ""

        def config(self, repository: str, manifest: Manifest) -> models.ImageConfig:
            if manifest.digest == self.greedy:
                raise MemoryError
            return super().config(repository, manifest)

    fake = Greedy()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10], ["/bin/sh -c true"])
    fake.greedy = fake.push("rocm/pytorch", ["greedy"], labels("greedy", HASH_ROCM), [11], ["/bin/sh -c false"])
    catalog, written = site.build_catalog(REGISTRY, tmp_path / "site", reader=fake)
    assert [i.tag for i in catalog.images] == [ROCM_TAG] and (tmp_path / "site" / "index.html") in written
    assert catalog.warnings == [f"{REGISTRY}/pytorch:greedy: too big to read in memory: no page"]


def test_pages_past_the_commands_deadline_are_left_out_with_a_warning() -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10], ["/bin/sh -c true"])
    catalog = site.collect(fake, REGISTRY, ["pytorch"], [], [])
    pages = site.render_pages(catalog, ends=time.monotonic() - 1)
    assert sorted(pages) == ["index.html", "index.md", "records.json"]
    assert catalog.warnings == [f"{REGISTRY}/pytorch:{ROCM_TAG}: page not rendered (the command's deadline "
                                "passed): no page"]


def test_the_catalog_exits_1_and_says_what_it_left_out(server: Callable[[Callable[[Seen], Reply]], Scripted],
                                                        tmp_path: Path) -> None:
    manifest, blobs = image(b'{"config": "x"}')
    reg = registry(server, manifest, blobs)
    proc = cli(tmp_path, "catalog", "--registry", f"{reg.address}/ns", "--repository", "r", "--out",
               str(tmp_path / "site"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "unexpected" not in proc.stderr
    assert "config: Input should be an object" in proc.stderr and "left out of the catalog" in proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()


# -- 5. every parser, random shapes ---------------------------------------------------------------------------

KEYS = st.sampled_from(["config", "Labels", "layers", "manifests", "history", "digest", "mediaType", "tags", "token",
                        "access_token", "expires_in", "components", "purl", "name", "version", "platform", "os",
                        "architecture", "created_by", "empty_layer", "size", "images", "repository", "tag",
                        "properties", "bomFormat", "value", "validation", "packages", "finished"]) | st.text(max_size=6)
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
           | st.sampled_from(["CycloneDX", "pkg:pypi/a@1", "pkg:deb/d/x@1?arch=amd64", "sha256:" + "0" * 64]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6),
                    max_leaves=25)
PARSERS: list[Callable[[bytes], Any]] = [
    *(lambda body, m=m: models.parse(m, body, "doc") for m in (models.ManifestDoc, models.ImageConfig,
                                                                   models.Referrers, models.TagList,
                                                                   models.TokenAnswer)),
    sbom.read, reproduce.compression_of, lambda body: reproduce._blobs_of(body, "published"),
    lambda body: parse_record(json.loads(body), "r.json", []),
    lambda body: lockfile.inputs_of("# rif-lock " + body.decode("utf-8", "replace")),
]
CLEAR = (models.ShapeError, sbom.SbomError, layers.LayerError, reproduce.ReproduceError,
         ValueError)  # ValueError: "not a run record"


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON, raw=st.booleans(), noise=st.binary(max_size=40))
def test_every_parser_answers_a_value_or_a_clear_error(value: object, raw: bool, noise: bytes) -> None:
    body = noise if raw else json.dumps(value).encode()
    for parse in PARSERS:
        try:
            parse(body)
        except CLEAR as exc:
            assert str(exc), parse


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=JSON, layers=JSON)
def test_the_catalog_costs_a_random_config_its_page_at_most(config: object, layers: object) -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10], ["/bin/sh -c true"])
    odd = fake.push("rocm/pytorch", ["odd"], labels("odd", HASH_ROCM), [11], ["/bin/sh -c false"])
    found = fake.manifests[("rocm/pytorch", odd)]
    body = json.loads(found.body)
    body["layers"] = layers
    odd_body = json.dumps(body).encode()
    fake.manifests[("rocm/pytorch", "odd")] = Manifest(odd_body, "", sha(odd_body))
    fake.blobs[body["config"]["digest"]] = config  # type: ignore[assignment]
    catalog = site.collect(fake, REGISTRY, ["pytorch"], [], [])
    pages = site.render_pages(catalog)
    assert f"images/pytorch/{ROCM_TAG}.html" in pages
    assert ("images/pytorch/odd.html" in pages) != any(":odd:" in w or ":odd " in w for w in catalog.warnings)


@pytest.mark.parametrize("index", [b"[1]", b'{"manifests": 5}', b'{"manifests": [5]}', b'{"manifests": [{}]}'])
def test_a_referrers_tag_of_another_shape_fails_the_attach_and_is_never_rewritten(index: bytes) -> None:
    """The referrers tag's index is read to add the SBOM to it: `.get` on a list or an int was an AttributeError."""
    from builder.publish.promote import Target

    class Api:
        address = "reg.test"

        def __init__(self) -> None:
            self.put: list[str] = []

        def push_blob(self, repository: str, data: bytes) -> str:
            return sha(data)

        def put_manifest(self, repository: str, reference: str, body: bytes, media_type: str) -> tuple[Manifest, None]:
            self.put.append(reference)
            return Manifest(body, media_type, sha(body)), None  # no OCI-Subject: the fallback tag is kept

        def manifest(self, repository: str, reference: str) -> Manifest:
            return Manifest(index, "", sha(index))

    api = Api()
    image_manifest = Manifest(b"{}", "m", sha(b"{}"))
    document = sbom.Sbom(b"{}", [])
    with pytest.raises(RegistryError, match="referrers index"):
        Target("reg.test/ns", api, None).attach_sbom("pytorch", image_manifest, document)  # type: ignore[arg-type]
    assert all(ref.startswith("sha256:") for ref in api.put)  # the artifact went up; the tag was not rewritten
