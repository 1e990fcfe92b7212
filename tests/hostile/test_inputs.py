"""Hostile records, trees, registries' data and sysfs folders (issue 23): nothing read outside what was meant,
nothing written outside --out, no hang, no crash; a bad tag or record costs only its page."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import tracemalloc
import zlib
from pathlib import Path

import pytest

from builder import site
from builder.audit import layers, reproduce
from builder.core import safefs, tags, text
from builder.core.text import safe
from builder.registry import models
from builder.registry.client import Manifest, RegistryError
from builder.registry.models import ImageConfig
from builder.render import imagetree
from builder.render.dockerfile import bake_target, render_all
from builder.site.records import MARKER, load_records
from testkit.matrices import ONE_CPU, load_cells
from tests.fakes.checkout import ROOT
from tests.site.test_site import (
    HASH_ROCM,
    REGISTRY,
    ROCM_TAG,
    FakeRegistry,
    digest_of,
    labels,
    record_row,
    write_record,
)

SECRET = "sekrit-4ee1c0de"


def run_bounded(code: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """code in a fresh interpreter with the worktree's builder, killed at timeout (a hang fails, not blocks)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)


def one_image() -> FakeRegistry:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10, 20], ["/bin/sh -c true"])
    return fake


def bake_tree(images: Path, dockerfile: str = "g/Dockerfile") -> None:
    images.mkdir(parents=True, exist_ok=True)
    target = {"dockerfile": dockerfile, "target": "runtime", "labels": {}}
    (images / imagetree.BAKE_FILE).write_text(json.dumps({"target": {bake_target(ROCM_TAG): target}}))


# -- trees ----------------------------------------------------------------------------------------------------

def test_a_dockerfile_linked_to_the_environment_never_reaches_a_page(tmp_path: Path) -> None:
    """A link to a file holding a secret (not /proc/self/environ: it never shows a variable a test sets)."""
    environ = tmp_path / "environ"
    environ.write_text(f"FROM scratch\nENV RIF_REGISTRY_PASSWORD={SECRET}\n")
    images = tmp_path / "images"
    bake_tree(images)
    (images / "g").mkdir()
    (images / "g" / "Dockerfile").symlink_to(environ)
    catalog = site.collect(one_image(), REGISTRY, ["pytorch"], [], [images])
    assert catalog.images and catalog.images[0].dockerfile is None, "the linked file was read"  # no dump of it
    assert not any(SECRET in text for text in site.render_pages(catalog).values())


def test_a_dockerfile_in_a_folder_linked_outside_the_tree_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Dockerfile").write_text(f"FROM scratch\n# {SECRET}\n")
    images = tmp_path / "images"
    bake_tree(images)
    (images / "g").symlink_to(outside)
    catalog = site.collect(one_image(), REGISTRY, ["pytorch"], [], [images])
    assert catalog.images[0].dockerfile is None


def test_catalog_out_never_deletes_or_overwrites_outside_through_its_marker_or_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "site"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"files": [str(victim), "../victim.txt", "x/../../victim.txt"]}))
    site.write_site(out, {"index.html": "new"})
    assert victim.read_text() == "keep"
    (out / "index.html").unlink()
    (out / "index.html").symlink_to(victim)  # a link where a page goes: replaced, not written through
    site.write_site(out, {"index.html": "new"})
    assert victim.read_text() == "keep" and not (out / "index.html").is_symlink()
    (out / "images").symlink_to(tmp_path)  # a folder that is a link: nothing written through it
    with pytest.raises(site.InputError, match="symbolic link"):
        site.write_site(out, {"images/victim.txt": "overwritten"})
    assert victim.read_text() == "keep"


def test_a_forged_catalog_marker_removes_only_what_a_catalog_writes(tmp_path: Path) -> None:
    """The marker is data from disk (a gh-pages checkout anyone may push to): it named `.git/config`, and the
    rerun deleted it. Only names render_pages gives a file are removed; a stale page still goes."""
    out = tmp_path / "site"
    keep = [".git/config", "CNAME", ".nojekyll", "images/logo.png", "docs/index.html"]
    for name in [*keep, "images/pytorch/old-tag.html"]:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("keep")
    (out / MARKER).write_text(json.dumps({"files": [*keep, "images/pytorch/old-tag.html", "index.html"]}))
    site.write_site(out, {"index.html": "new"})
    assert all((out / name).read_text() == "keep" for name in keep)
    assert not (out / "images/pytorch/old-tag.html").exists()
    pages = site.render_pages(site.collect(one_image(), REGISTRY, ["pytorch"], [], []))
    assert all(site.is_site_file(name) for name in pages)  # every file a catalog writes, a rerun may replace


def test_render_out_replaces_linked_files_and_leaves_their_targets_alone(tmp_path: Path) -> None:
    out = tmp_path / "images"
    rendered = render_all(load_cells(tmp_path, ONE_CPU))
    imagetree.write(out, rendered, prune=True)
    victims = []
    for rel in [imagetree.BAKE_FILE, *sorted(p.relative_to(out).as_posix() for p in (out / "cells").glob("*.json"))]:
        victim = tmp_path / f"victim-{len(victims)}"
        victim.write_text("keep")
        victim.chmod(0o600)
        (out / rel).unlink()
        (out / rel).symlink_to(victim)
        victims.append(victim)
    imagetree.write(out, rendered, prune=True)
    for victim in victims:
        assert victim.read_text() == "keep" and victim.stat().st_mode & 0o777 == 0o600
    assert not (out / imagetree.BAKE_FILE).is_symlink() and imagetree.drift(out, rendered) == []
    victim_dir = tmp_path / "victim-dir"
    victim_dir.mkdir()
    (out / "cells").rename(tmp_path / "cells-moved")
    (out / "cells").symlink_to(victim_dir)  # a folder that is a link: nothing is made or written through it
    with pytest.raises(imagetree.TreeError, match="leads out of"):
        imagetree.write(out, rendered, prune=True)
    assert list(victim_dir.iterdir()) == []


# -- records --------------------------------------------------------------------------------------------------

def test_records_that_are_a_fifo_a_device_or_too_large_are_skipped_in_time(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate((64 << 20) + 1)
    proc = run_bounded(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # /dev/zero read whole would die here
        from pathlib import Path
        from builder.site.records import load_records
        rows, warnings = load_records([Path({str(fifo)!r}), Path("/dev/zero"), Path({str(big)!r})])
        print(len(rows), len(warnings))
        """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["0", "3"]


def test_a_record_digest_that_is_no_digest_never_reaches_a_page(tmp_path: Path) -> None:
    row = record_row(ROCM_TAG, HASH_ROCM, "sha256:$(touch /tmp/pwned)")
    rows, _ = load_records([write_record(tmp_path / "r.json", [row])])
    assert rows[0].digest is None


def test_a_record_nested_too_deeply_costs_only_itself(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    good = write_record(tmp_path / "good.json", [record_row(ROCM_TAG, HASH_ROCM, None)])
    rows, warnings = load_records([deep, good])
    assert len(rows) == 1 and len(warnings) == 1


# -- what a registry serves -------------------------------------------------------------------------------------

def hostile_registry() -> FakeRegistry:
    """One good image, and tags whose manifests or configs break one assumption each."""
    fake = one_image()

    def add(tag: str, manifest: object, config: object = None) -> None:
        body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        if config is not None:
            fake.blobs[digest_of(json.dumps(config).encode())] = config  # type: ignore[assignment]
        fake.tag_lists["rocm/pytorch"].append(tag)
        fake.manifests[("rocm/pytorch", tag)] = Manifest(body, "x", digest_of(body))

    config = {"history": 5, "config": {"Labels": ["x"]}}
    config_digest = digest_of(json.dumps(config).encode())
    add("no-config", {"layers": []})  # KeyError in the reader
    add("odd-types", {"config": {"digest": config_digest}, "layers": {"size": "x"}}, config)  # TypeError-prone
    add("odd-index", {"manifests": [{"platform": "linux"}, 5]})
    add("deep", b"[" * 100_000 + b"]" * 100_000)  # RecursionError
    add("huge", {"config": {"digest": config_digest, "size": 10**400}, "layers": [{"size": 10**400}]}, config)
    add("float", b'{"config": {"digest": "%s", "size": 1e400}, "layers": [{"size": 1e400}]}'
        % config_digest.encode(), config)
    return fake


def test_a_hostile_tag_costs_only_its_page() -> None:
    catalog = site.collect(hostile_registry(), REGISTRY, ["pytorch"], [], [])
    pages = site.render_pages(catalog)  # OverflowError on a size of 10**400 would end here
    assert f"images/pytorch/{ROCM_TAG}.html" in pages
    warned = " ".join(catalog.warnings)
    for tag in ("no-config", "deep"):
        assert f":{tag}:" in warned


class LyingReader(FakeRegistry):
    """A reader that believes whatever digest header it is sent (as the client did before issue 23)."""

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        found = super().manifest(repository, reference)
        return Manifest(found.body, found.media_type, "sha256:$(touch /tmp/pwned)") if found else None


def test_a_digest_that_is_no_digest_never_reaches_a_pull_line() -> None:
    reader = LyingReader()
    reader.__dict__.update(one_image().__dict__)
    catalog = site.collect(reader, REGISTRY, ["pytorch"], [], [])
    assert catalog.images == [] and "not a sha256 digest" in " ".join(catalog.warnings)
    assert not any("$(touch" in text for text in site.render_pages(catalog).values())


def test_the_history_regex_is_linear() -> None:
    proc = run_bounded("""
        from builder.site.collect import _step
        print(_step("|1 " + "a=a=a= " * 30 + "x"), _step("|2 A=1 B=2 /bin/sh -c make"))
        """, timeout=10)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("RUN make")


# -- sysfs under --root, and the terminal -------------------------------------------------------------------------

def test_which_root_survives_odd_node_names_and_fifos(tmp_path: Path) -> None:
    nodes = tmp_path / "sys/class/kfd/kfd/topology/nodes"
    for name in ("²", "9" * 200, "1"):
        (nodes / name).mkdir(parents=True)
    (nodes / "²" / "properties").write_text("gfx_target_version ²\n")
    os.mkfifo(nodes / "1" / "properties")
    pci = tmp_path / "sys/bus/pci/devices/0000:03:00.0"
    pci.mkdir(parents=True)
    os.mkfifo(pci / "vendor")
    proc = run_bounded(f"""
        from pathlib import Path
        from builder.which.host import read_kfd, read_pci
        print(read_kfd(Path({str(tmp_path)!r})), read_pci(Path({str(tmp_path)!r})))
        """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["[]", "[]"]


def test_safe_keeps_text_on_one_line_and_in_order() -> None:
    shown = safe("tag\nerror: forged line \u202eexe.txt \u200b")
    assert "\n" not in shown and "\u202e" not in shown and "\u200b" not in shown
    assert "\\x0a" in shown and "\\u202e" in shown


def test_read_regular_refuses_links_fifos_and_oversize(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    os.mkfifo(tmp_path / "fifo")
    assert safefs.read_regular(tmp_path / "f", 3) == b"abc"
    assert safefs.read_regular(tmp_path / "f", 2, cut=True) == b"ab"
    for path, limit in ((tmp_path / "link", 10), (tmp_path / "fifo", 10), (tmp_path / "f", 2)):
        with pytest.raises(safefs.UnsafePath):
            safefs.read_regular(path, limit)
    assert [safefs.relative_parts(n) for n in ("/etc/x", "../x", "a//b", "a/./b", "")] == [None] * 5



class BrokenTagList(FakeRegistry):
    def tags(self, repository: str) -> list[str]:
        if repository.endswith("/broken"):
            raise RegistryError("the registry's tag list is not JSON")
        return super().tags(repository)


def test_a_repository_whose_tag_list_is_unreadable_costs_only_its_pages() -> None:
    reader = BrokenTagList()
    reader.__dict__.update(one_image().__dict__)
    catalog = site.collect(reader, REGISTRY, ["broken", "pytorch"], [], [])
    assert [i.tag for i in catalog.images] == [ROCM_TAG] and "broken: tags unreadable" in " ".join(catalog.warnings)


@pytest.mark.parametrize(("body", "names"), [
    (b"[" * 100_000, None),
    (b'{"bomFormat": "CycloneDX", "components": 5}', None),  # no list: no SBOM (else "all removed")
    (b'{"bomFormat": "CycloneDX", "components": [5, {"purl": "pkg:pypi/a", "name": "a", "version": "1",'
     b' "properties": [{"name": {"x": 1}}]}]}', ["a"])], ids=["deep", "components", "entries"])
def test_a_hostile_sbom_is_an_sbom_error_or_loses_only_odd_entries(body: bytes, names: list[str] | None) -> None:
    from builder.validate import sbom

    if names is None:
        with pytest.raises(sbom.SbomError):
            sbom.parse(body)
    else:
        assert [p.name for p in sbom.parse(body)] == names


def test_hostile_labels_cost_nothing_but_their_own_text() -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [10], ["x"])
    odd = labels(ROCM_TAG, HASH_ROCM, **{"org.rocm-image-factory.rocm": "9" * 5000,
                                         "org.rocm-image-factory.gfx-targets": "," * 10_000 + "gfx942"})
    fake.push("rocm/pytorch", ["other"], odd, [10], ["x"])
    catalog = site.collect(fake, REGISTRY, ["pytorch"], [], [])
    pages = site.render_pages(catalog)
    assert "images/pytorch/other.html" in pages and f"images/pytorch/{ROCM_TAG}.html" in pages


def test_a_lone_surrogate_in_a_label_or_record_costs_nothing_but_its_own_text(tmp_path: Path) -> None:
    """JSON's "\\udcff" parses to a str no UTF-8 encodes: written as it was, it broke the whole site."""
    fake = one_image()
    fake.push("rocm/pytorch", ["other"], labels(ROCM_TAG, HASH_ROCM, **{"org.opencontainers.image.title": "a\udcffb"}),
              [10], ["RUN echo \ud800"])
    failed = record_row("failed-tag", HASH_ROCM, None, state="failed", failure="boom \udcff", failed_stage="build")
    record = tmp_path / "r.json"
    record.write_text(json.dumps({"registry": "x", "finished": "2026", "images": [failed]}))  # ASCII: \\udcff
    rows, _ = load_records([record])
    catalog = site.collect(fake, REGISTRY, ["pytorch"], rows, [])
    written = site.write_site(tmp_path / "site", site.render_pages(catalog))
    pages = {p.relative_to(tmp_path / "site").as_posix(): p.read_text(encoding="utf-8") for p in written}
    assert "\\ud800" in pages["images/pytorch/other.html"]  # the step, with its escape shown
    assert "\\udcff" in pages["index.html"]  # the failed record's failure


def test_a_page_that_cannot_be_rendered_costs_only_itself() -> None:
    from builder.site.model import Layer

    fake = one_image()
    fake.push("rocm/pytorch", ["other"], labels(ROCM_TAG, HASH_ROCM), [10], ["x"])
    catalog = site.collect(fake, REGISTRY, ["pytorch"], [], [])
    broken = next(i for i in catalog.images if i.tag == "other")
    broken.published = type(broken.published)(**{**broken.published.__dict__,
                                                  "layers": [Layer("x", "not a size")]})  # type: ignore[arg-type]
    pages = site.render_pages(catalog)
    assert f"images/pytorch/{ROCM_TAG}.html" in pages and "images/pytorch/other.html" not in pages
    assert "other: page not rendered (TypeError)" in " ".join(catalog.warnings)
    assert "pytorch/other" not in pages["index.html"]


# -- layers and manifests compared by `builder reproduce` -------------------------------------------------------

def raw_tar(*headers: tuple[str, bytes, int], body: bytes = b"") -> bytes:
    """Hand-made tar headers (name, type, declared size), then body: what no honest tar writer emits."""
    out = b""
    for name, kind, size in headers:
        out += tarfile.TarInfo._create_header(  # type: ignore[attr-defined]
            {"name": name, "mode": 0o644, "uid": 0, "gid": 0, "size": size, "mtime": 0, "chksum": 0, "type": kind,
             "linkname": "", "uname": "", "gname": "", "devmajor": 0, "devminor": 0, "prefix": ""},
            tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    return out + body


def gzipped(*parts: bytes, repeat: int = 1) -> bytes:
    """parts, the last one repeated: a few KB that unpack to repeat times its size."""
    zipper = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = b"".join(zipper.compress(p) for p in parts[:-1])
    out += b"".join(zipper.compress(parts[-1]) for _ in range(repeat))
    return out + zipper.flush()


BIG = 64 << 20


@pytest.mark.parametrize("layer", [
    gzipped(raw_tar(("././@LongLink", tarfile.GNUTYPE_LONGNAME, BIG)), b"A" * (1 << 20), repeat=BIG >> 20),
    gzipped(raw_tar(("pax", tarfile.XHDTYPE, BIG)), b"A" * (1 << 20), repeat=BIG >> 20),
    gzipped(raw_tar(("pax", tarfile.XHDTYPE, 512)), (b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n").ljust(512)
            + raw_tar(("f", tarfile.REGTYPE, 0)) + b"99999999\n", b"1\n" * (1 << 19), repeat=BIG >> 20),
    gzipped(raw_tar(("s", tarfile.GNUTYPE_SPARSE, 0)), b"\0" * (1 << 20), repeat=1),
], ids=["gnu-longname", "pax", "gnu-sparse-1.0", "gnu-sparse"])
def test_a_layer_that_unpacks_a_header_into_memory_is_refused_in_bounded_memory(layer: bytes) -> None:
    """A few KB of gzip declaring a 64 MB header (or a sparse map without end): tarfile would read it whole."""
    tracemalloc.start()
    try:
        with pytest.raises(layers.LayerError, match="not compared"):
            layers.entries(io.BytesIO(layer))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_a_layer_past_its_limits_is_a_one_line_layer_error(monkeypatch: pytest.MonkeyPatch) -> None:
    names = raw_tar(*((f"f{i}", tarfile.REGTYPE, 0) for i in range(20)))
    monkeypatch.setattr(layers, "MAX_ENTRIES", 10)
    with pytest.raises(layers.LayerError, match="more than 10 paths"):
        layers.entries(io.BytesIO(names))
    monkeypatch.setattr(layers, "MAX_ENTRIES", 100)
    monkeypatch.setattr(layers, "MAX_TAR_BYTES", 4096)
    with pytest.raises(layers.LayerError, match="more than 4096 bytes unpacked"):
        layers.entries(io.BytesIO(gzipped(names)))
    with pytest.raises(layers.LayerError, match="within 0 s"):
        layers.entries(io.BytesIO(names), deadline_s=0)
    for junk in (b"\x1f\x8b" + b"junk" * 200, b"\x28\xb5\x2f\xfd" + b"junk" * 200, b"x" * 513):
        with pytest.raises(layers.LayerError, match="not a readable tar"):
            layers.entries(io.BytesIO(junk))


def test_file_names_from_a_published_layer_reach_the_terminal_printable() -> None:
    def layer(*infos: tarfile.TarInfo) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for info in infos:
                tar.addfile(info, io.BytesIO(b""))
        return out.getvalue()

    evil = tarfile.TarInfo("x\x1b]0;owned\x07\n    - forged line \udcff")
    nan = tarfile.TarInfo("nan")
    nan.pax_headers = {"mtime": "nan"}
    published, rebuilt = layer(evil, nan), layer(tarfile.TarInfo("nan"))
    manifests = [json.dumps({"config": {"digest": digest_of(b"{}")}, "layers": [{"digest": digest_of(body)}]}).encode()
                 for body in (published, rebuilt)]
    verdict = reproduce.compare("r", (digest_of(manifests[0]), manifests[0]), (digest_of(manifests[1]), manifests[1]),
                                lambda d: io.BytesIO(published), lambda d: io.BytesIO(rebuilt))
    lines = verdict.lines()
    assert len(lines) == 4 and lines[2] == "    ~ nan (mtime)"
    assert not any(text.CONTROL.search(line) for line in lines)
    "\n".join(lines).encode("utf-8")  # printable by a plain print(): no lone surrogate


def test_a_published_manifest_that_names_a_local_file_as_a_layer_is_not_read(tmp_path: Path) -> None:
    """The registry's manifest names its layer `/path/to/some.tar`: the scratch path built from it was that file."""
    victim = tmp_path / "backup.tar"
    with tarfile.open(victim, "w") as tar:
        info = tarfile.TarInfo(f"home/{SECRET}")
        tar.addfile(info, io.BytesIO(b""))
    config = json.dumps({"config": {"Labels": {tags.TAG_LABEL: "t", tags.HASH_LABEL: "h"}}}).encode()
    body = json.dumps({"config": {"digest": digest_of(config)}, "layers": [{"digest": str(victim)}]}).encode()
    empty = b"\0" * 1024  # the rebuild's layer: an empty tar
    rebuilt = json.dumps({"config": {"digest": digest_of(config)}, "layers": [{"digest": digest_of(empty)}]}).encode()

    class Api:
        def manifest(self, repository: str, reference: str) -> Manifest:
            return Manifest(body, "m", digest_of(body))

        def config(self, repository: str, manifest: Manifest) -> ImageConfig:
            return models.parse(models.ImageConfig, config, "config")

        def blob_to(self, repository: str, digest: str, path: Path) -> None:
            raise AssertionError("nothing is downloaded for a layer named by a path")

        def referrers(self, repository: str, digest: str, artifact_type: str | None = None) -> list[object]:
            return []  # no lock recorded with it

    def rebuild(published: reproduce.Published, out: Path) -> str:
        (out / "blobs" / "sha256").mkdir(parents=True)
        for blob in (rebuilt, empty):
            (out / "blobs" / "sha256" / digest_of(blob).removeprefix("sha256:")).write_bytes(blob)
        return digest_of(rebuilt)

    with pytest.raises(reproduce.ReproduceError, match="no sha256 digest") as refused:
        reproduce.check("r", "ns/r", "t", Api(), rebuild)  # type: ignore[arg-type]
    assert SECRET not in str(refused.value)  # after the block: inside it, nothing runs past the raise
