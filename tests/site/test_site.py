"""The catalog (`builder catalog`, builder/site.py): pages from a fake registry and records, escaping of hostile data,
and the real thing: two images published to the local registry, the site opened in a headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder import site
from builder.core import tags
from builder.registry import models
from builder.registry.client import Manifest
from builder.registry.models import ImageConfig
from builder.render.dockerfile import bake_target
from tests.fakes.checkout import DATA, ROOT, builder_cli
from tests.fakes.policy import unavailable

REGISTRY = "registry.example/rocm"
ROCM_TAG = "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_therock_runtime"
CPU_TAG = "cpu_debian12_py3.11_torch2.13.0_devel"
HASH_ROCM = "sha256:" + "a1" * 32
HASH_CPU = "sha256:" + "c3" * 32
HOSTILE = "<script>window.pwned=1</script>"
HOSTILE_IMG = '<img src=x onerror="window.pwned=2">'
CHROMIUM = "/usr/bin/chromium"


# -- a registry in memory ----------------------------------------------------------------------------------

def digest_of(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


class FakeRegistry:
    """tags/manifest/config as builder.registry.client.RegistryClient answers them, from a dict."""

    def __init__(self) -> None:
        self.tag_lists: dict[str, list[str]] = {}
        self.manifests: dict[tuple[str, str], Manifest] = {}
        self.blobs: dict[str, dict[str, Any]] = {}

    def push(self, repository: str, tag_names: list[str], labels: dict[str, str], layers: list[int],
             steps: list[str]) -> str:
        config = {"architecture": "amd64", "os": "linux", "created": "2026-11-20T03:17:00Z",
                  "config": {"Labels": labels},
                  "history": [{"created_by": "/bin/sh -c #(nop)  ENV X=1", "empty_layer": True},
                              *({"created_by": s} for s in steps)]}
        config_body = json.dumps(config).encode()
        self.blobs[digest_of(config_body)] = config
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                    "config": {"size": len(config_body), "digest": digest_of(config_body)},
                    "layers": [{"size": n, "digest": "sha256:" + f"{i:064x}"} for i, n in enumerate(layers)]}
        body = json.dumps(manifest).encode()
        found = Manifest(body, manifest["mediaType"], digest_of(body))
        for tag in tag_names:
            self.tag_lists.setdefault(repository, []).append(tag)
            self.manifests[(repository, tag)] = found
        self.manifests[(repository, found.digest)] = found
        return found.digest

    def tags(self, repository: str) -> list[str]:
        return list(self.tag_lists.get(repository, []))

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        return self.manifests.get((repository, reference))

    def config(self, repository: str, manifest: Manifest) -> ImageConfig:
        return models.parse_value(models.ImageConfig, self.blobs[json.loads(manifest.body)["config"]["digest"]],
                                  f"config of {manifest.digest}")


def labels(tag: str, content_hash: str, **extra: str) -> dict[str, str]:
    rocm = tag.startswith("rocm")
    own = {"image": "pytorch", "tag": tag, "platform": "rocm7.2" if rocm else "cpu", "channel": "therock" if rocm
           else "pytorch", "rocm": "7.2" if rocm else "none", "torch": "2.13.0", "torchvision": "0.28.0" if rocm
           else "none", "torchaudio": "none", "gfx-family": "gfx94X-dcgpu" if rocm else "none",
           "gfx-targets": "gfx942" if rocm else "none", "python": "3.12" if rocm else "3.11",
           "os": "ubuntu-24.04" if rocm else "debian-12", "flavor": "runtime" if rocm else "devel", "user": "root",
           "amdgpu-driver": "6.4.x-31.50.x" if rocm else "none"}
    found = {tags.LABEL_PREFIX + k: v for k, v in own.items()}
    found[tags.HASH_LABEL] = content_hash
    found.update(extra)
    return found


def check(name: str, status: str, detail: str = "", fix: str = "") -> dict[str, str]:
    return {"suite": "smoke", "name": name, "status": status, "detail": detail, "fix": fix}


def record_row(tag: str, content_hash: str, digest: str | None, **fields: Any) -> dict[str, Any]:
    row = {"tag": tag, "repository": "pytorch", "tags": [tag], "immutable_tag": tags.immutable_tag(tag, content_hash),
           "content_hash": content_hash, "state": "published", "failed_stage": None, "failure": None,
           "image_bytes": 3_210_000_000, "digest": digest, "validation": [], "moved": [tag]}
    row.update(fields)
    return row


def write_record(path: Path, rows: list[dict[str, Any]], finished: str = "2026-11-20T03:30:00Z") -> Path:
    path.write_text(json.dumps({"registry": REGISTRY, "complete": True, "finished": finished, "images": rows}))
    return path


@pytest.fixture
def published(tmp_path: Path) -> tuple[FakeRegistry, list[Path], Path]:
    """Two images (a ROCm one also tagged latest, a CPU one), an older ROCm build, a record of the run, a
    committed Dockerfile of the ROCm image, and a record row of a third image that failed."""
    fake = FakeRegistry()
    rocm_immutable = tags.immutable_tag(ROCM_TAG, HASH_ROCM)
    rocm_digest = fake.push("rocm/pytorch", [ROCM_TAG, rocm_immutable, "latest"], labels(ROCM_TAG, HASH_ROCM),
                            [30_000_000, 2_900_000_000, 15_000],
                            ["", "|1 DEBIAN_FRONTEND=noninteractive /bin/sh -c apt-get install -y python3",
                             "/bin/sh -c #(nop) COPY dir:abc in /opt/venv"])
    fake.push("rocm/pytorch", [tags.immutable_tag(ROCM_TAG, "sha256:" + "0" * 64)],
              labels(ROCM_TAG, "sha256:" + "0" * 64), [10], ["x"])
    cpu_digest = fake.push("rocm/pytorch", [CPU_TAG, tags.immutable_tag(CPU_TAG, HASH_CPU)],
                           labels(CPU_TAG, HASH_CPU), [50_000_000, 400_000_000], ["a", "b"])
    checks = [check("import", "pass", "torch 2.13.0 imported"), check("gpu", "skip", "no GPU visible",
                                                                      "run with --device=/dev/kfd")]
    record = write_record(tmp_path / "record.json", [
        record_row(ROCM_TAG, HASH_ROCM, rocm_digest, tags=[ROCM_TAG, "latest"], validation=checks),
        record_row(CPU_TAG, HASH_CPU, cpu_digest, image_bytes=1_510_000_000, packages=["torch==2.13.0+cpu"]),
        record_row("cpu_debian12_py3.11_torch2.13.0_broken", HASH_CPU, None, state="failed",
                   failed_stage="validate", failure="1 check failed",
                   validation=[check("torch_version", "fail",
                                     "torch 2.13.0+cpu is installed, the image promises 2.12.0")]),
    ])
    images = tmp_path / "images"
    (images / "rocm-combo").mkdir(parents=True)
    (images / "rocm-combo" / "Dockerfile").write_text("FROM ubuntu:24.04 AS base\nFROM base AS runtime-all\n")
    target = {"dockerfile": "rocm-combo/Dockerfile", "target": "runtime-all", "labels": {tags.HASH_LABEL: HASH_ROCM}}
    (images / "docker-bake.json").write_text(json.dumps({"target": {bake_target(ROCM_TAG): target}}))
    return fake, [record], images


def build(fake: FakeRegistry, records: list[Path], images: Path | None = None) -> site.Catalog:
    rows, warnings = site.load_records(records)
    catalog = site.collect(fake, REGISTRY, site.repositories_of(rows, None), rows, [images] if images else [],
                           now="2026-11-20 04:00 UTC")
    catalog.warnings[:0] = warnings
    return catalog


# -- pages from a fake registry and a record (pure) -----------------------------------------------------------

def test_one_page_per_readable_tag_joined_with_its_record(published: tuple[FakeRegistry, list[Path], Path]) -> None:
    fake, records, images = published
    catalog = build(fake, records, images)
    assert [i.tag for i in catalog.images] == [CPU_TAG, ROCM_TAG]  # not latest, not the immutable tags
    rocm = catalog.images[1]
    assert rocm.immutable_tag == tags.immutable_tag(ROCM_TAG, HASH_ROCM)
    assert rocm.also_tagged == ["latest"]
    assert rocm.earlier == [tags.immutable_tag(ROCM_TAG, "sha256:" + "0" * 64)]
    assert rocm.installed_bytes == 3_210_000_000 and [c.name for c in rocm.checks] == ["import", "gpu"]
    config_size = json.loads(fake.manifests[("rocm/pytorch", ROCM_TAG)].body)["config"]["size"]
    assert rocm.published.compressed_bytes == 30_000_000 + 2_900_000_000 + 15_000 + config_size
    assert [layer.step for layer in rocm.published.layers] == ["", "RUN apt-get install -y python3",
                                                               "COPY dir:abc in /opt/venv"]
    assert rocm.gpus == ["MI300A", "MI300X", "MI325X"] and rocm.rocm == "7.2" and rocm.os == "ubuntu-24.04"
    assert rocm.dockerfile_matches is True
    assert rocm.dockerfile_source == f"{images / 'rocm-combo' / 'Dockerfile'} (target runtime-all)"
    assert catalog.images[0].dockerfile is None and catalog.images[0].record is not None
    assert [r.tag for r in catalog.failed] == ["cpu_debian12_py3.11_torch2.13.0_broken"]
    assert catalog.rocms == ["7.2", "CPU"] and catalog.oses == ["debian-12", "ubuntu-24.04"]
    assert ("MI300X", "gfx942") in catalog.gpu_options


def test_image_page_says_what_users_ask(published: tuple[FakeRegistry, list[Path], Path]) -> None:
    fake, records, images = published
    files = site.render_pages(build(fake, records, images))
    assert set(files) == {"index.html", "index.md", "records.json", *(f"images/pytorch/{t}.{ext}" for t in
                                                                     (ROCM_TAG, CPU_TAG) for ext in ("html", "md"))}
    page = files[f"images/pytorch/{ROCM_TAG}.html"]
    ref = f"registry.example/rocm/pytorch:{ROCM_TAG}"
    assert f"docker pull {ref}" in page
    assert "docker run -it --rm --device=/dev/kfd --device=/dev/dri --group-add video" in page
    assert "MI300X" in page and "gfx942" in page and "ROCm" in page and "3.21 GB" in page and "2.93 GB" in page
    assert re.search(r"<td>import</td>|<code>import</code>", page) and "st-skip" in page
    assert "run with --device=/dev/kfd" in page  # the fix of a check
    assert "FROM ubuntu:24.04" in page and "exactly the one this image was built from" in page
    assert '<a href="../../index.html">' in page
    assert "AMD GPU Driver 6.4.x-31.50.x (amdgpu-dkms)" in page  # the host driver the image needs (issue 51)
    cpu = files[f"images/pytorch/{CPU_TAG}.html"]
    assert "none needed (CPU only)" in cpu
    assert "torch==2.13.0+cpu" in cpu and "No committed Dockerfile" in cpu and "--device" not in cpu
    assert "Not recorded" in cpu  # no smoke report in its record row
    md = files[f"images/pytorch/{ROCM_TAG}.md"]
    assert f"```bash\ndocker pull {ref}\n" in md and "| Installed size (on disk) | 3.21 GB |" in md
    assert "```dockerfile\nFROM ubuntu:24.04" in md
    sif = f"pytorch_{ROCM_TAG}.sif"  # the Apptainer lines beside docker run, in both pages
    assert f"apptainer pull {sif} docker://{ref}\napptainer exec --rocm {sif} python" in page
    assert f"```bash\napptainer pull {sif} docker://{ref}\napptainer exec --rocm {sif} python\n```" in md
    assert f"apptainer exec pytorch_{CPU_TAG}.sif python" in cpu  # a CPU image: no --rocm


def test_index_has_filters_rows_and_size_chart_beside_amds_sizes(
        published: tuple[FakeRegistry, list[Path], Path]) -> None:
    fake, records, images = published
    index = site.render_pages(build(fake, records, images))["index.html"]
    assert '<option value="MI300X">MI300X (gfx942)</option>' in index
    assert '<option value="7.2">ROCm 7.2</option>' in index and '<option value="CPU">CPU</option>' in index
    assert '<option value="debian-12">debian-12</option>' in index
    assert index.count("<tr data-item") == 2 and 'data-gpus="MI300A|MI300X|MI325X"' in index
    assert index.count('<div class="bar" data-item') == 4  # each image: compressed and installed
    for source in ("ROCm-docker#166", "ROCm-docker#104", "ROCm-docker#120"):
        assert source in index
    assert "54.00 GB" in index and "10.39 GB" in index
    assert "cpu_debian12_py3.11_torch2.13.0_broken" in index and "the image promises 2.12.0" in index
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", index.replace('href="https://github.com/ROCm/', ""))


def test_everything_is_inline_and_the_csp_allows_only_the_sites_own_script(
        published: tuple[FakeRegistry, list[Path], Path]) -> None:
    fake, records, images = published
    files = site.render_pages(build(fake, records, images))
    index = files["index.html"]
    script = re.search(r"<script>(.*?)</script>", index, re.S)
    style = re.search(r"<style>(.*?)</style>", index, re.S)
    assert script and style and index.count("<script") == 1
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', index)
    assert found is not None
    csp = html.unescape(found.group(1))
    for text in (script.group(1), style.group(1)):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp
    page = files[f"images/pytorch/{ROCM_TAG}.html"]
    assert "<script" not in page and "script-src &#39;none&#39;" in page


def test_hostile_labels_tags_and_records_are_escaped(tmp_path: Path) -> None:
    fake = FakeRegistry()
    digest = fake.push("rocm/pytorch", [CPU_TAG, "<script>", "../../escape", "a" * 200],
                       labels(CPU_TAG, HASH_CPU, **{tags.LABEL_PREFIX + "os": HOSTILE,
                                                    tags.LABEL_PREFIX + "torch": "2.13.0|`x`*y*[z](http://e)"}),
                       [1000], [f"/bin/sh -c echo {HOSTILE}"])
    record = write_record(tmp_path / "r.json", [
        record_row(CPU_TAG, HASH_CPU, digest, validation=[check("import", f"x{HOSTILE}", HOSTILE_IMG, HOSTILE)]),
        record_row("cpu_debian12_py3.11_torch2.13.0_broken", HASH_CPU, None, state="failed", failure=HOSTILE_IMG),
    ])
    catalog = build(fake, [record])
    assert [i.tag for i in catalog.images] == [CPU_TAG]  # invalid tags get no page (and no path outside --out)
    assert any("'<script>'" in w for w in catalog.warnings) and any("../../escape" in w for w in catalog.warnings)
    files = site.render_pages(catalog)
    assert all(".." not in name for name in files)
    for name, text in files.items():
        if name.endswith(".html"):
            assert "<script>window" not in text and "<img src=x" not in text, name
            assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in text, name
        if name.endswith(".md"):
            assert not re.search(r"(?<!\\)<(script|img)", text), name
            assert "\\<script\\>window.pwned=1\\</script\\>" in text, name
    md = files[f"images/pytorch/{CPU_TAG}.md"]
    assert "| PyTorch | 2.13.0\\|\\`x\\`\\*y\\*\\[z\\](http://e) |" in md
    assert "data-os=\"&lt;script&gt;" in files["index.html"]
    assert 'class="st st-other"' in files[f"images/pytorch/{CPU_TAG}.html"]  # an unknown status gets no class


def test_a_newer_record_without_sizes_keeps_the_older_ones(tmp_path: Path) -> None:
    fake = FakeRegistry()
    digest = fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU), [1000], ["x"])
    old = write_record(tmp_path / "old.json", [record_row(CPU_TAG, HASH_CPU, digest, image_bytes=123_000_000,
                                                          validation=[check("import", "pass")])], "2026-11-01")
    new = write_record(tmp_path / "new.json", [record_row(CPU_TAG, HASH_CPU, digest, state="skipped",
                                                          image_bytes=None)], "2026-11-02")
    other = write_record(tmp_path / "other.json", [record_row(CPU_TAG, HASH_CPU, "sha256:" + "9" * 64,
                                                              image_bytes=999)], "2026-11-03")
    (tmp_path / "junk.json").write_text("[1, 2")
    catalog = build(fake, [tmp_path])  # a directory: every record under it
    (image,) = catalog.images
    assert image.record is not None and image.record.state == "skipped"
    assert image.installed_bytes == 123_000_000 and [c.name for c in image.checks] == ["import"]
    assert any("junk.json: skipped" in w for w in catalog.warnings)
    # the catalog's own records.json reads back as a record: the next run keeps what this one knew
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "records.json").write_text(site.render_pages(catalog)["records.json"])
    for path in (old, new, other):
        path.unlink()
    (tmp_path / "junk.json").unlink()
    again = build(fake, [tmp_path / "site" / "records.json"])
    assert again.images[0].installed_bytes == 123_000_000


def test_a_build_that_was_not_pushed_is_matched_by_content_hash(tmp_path: Path) -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU), [1000], ["x"])
    record = write_record(tmp_path / "r.json", [record_row(CPU_TAG, HASH_CPU, None, state="validated")])
    assert build(fake, [record]).images[0].installed_bytes == 3_210_000_000


# -- a real browser -----------------------------------------------------------------------------------------

def chromium() -> str:
    """Debian's Chromium and the playwright package; missing, they skip locally and fail under CI."""
    if not Path(CHROMIUM).is_file():
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium; scripts/setup.sh does)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the playwright package is missing (pip install -e '.[test]')")
    return CHROMIUM


def artifacts_dir() -> Path:
    path = Path(os.environ.get("RIF_ARTIFACTS") or ROOT / ".rif" / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Browser:
    """One headless Chromium page that remembers every console error and uncaught exception."""

    def __init__(self, playwright: Any, executable: str) -> None:
        self.browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        self.page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def visible_rows(self) -> list[str]:
        rows = self.page.locator("#images tbody tr:visible td:first-child a")
        return [rows.nth(i).inner_text() for i in range(rows.count())]


def test_hostile_data_does_not_run_in_a_real_browser(tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    fake = FakeRegistry()
    fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU, **{tags.LABEL_PREFIX + "flavor": HOSTILE,
                                                                      tags.LABEL_PREFIX + "os": HOSTILE_IMG}),
              [1000], [HOSTILE])
    fake.push("rocm/pytorch", [ROCM_TAG], labels(ROCM_TAG, HASH_ROCM), [2000], ["x"])
    out = tmp_path / "site"
    site.write_site(out, site.render_pages(build(fake, [])))
    with sync_playwright() as p:
        browser = Browser(p, executable)
        try:
            browser.page.goto((out / "index.html").as_uri())
            assert browser.page.evaluate("typeof window.pwned") == "undefined"
            assert sorted(browser.visible_rows()) == sorted([CPU_TAG, ROCM_TAG])
            browser.page.select_option("#f-os", HOSTILE_IMG)  # the hostile value is an option's text, nothing more
            assert browser.visible_rows() == [CPU_TAG]
            browser.page.select_option("#f-gpu", "MI300X")
            assert browser.visible_rows() == []
            assert browser.page.inner_text("#count") == "0 of 2 images"
            browser.page.goto((out / "images" / "pytorch" / f"{CPU_TAG}.html").as_uri())
            assert browser.page.evaluate("typeof window.pwned") == "undefined"
            assert HOSTILE in browser.page.inner_text("body")  # shown as text
            assert browser.errors == []
        finally:
            browser.browser.close()


GOOD = ["cpu_debian12_py3.11_torch2.13.0_runtime", "cpu_debian12_py3.11_torch2.13.0_devel"]


@pytest.mark.docker
@pytest.mark.registry
def test_catalog_of_two_published_images_in_chromium(base_image: str, wheelhouse: Path, namespace: str,
                                                      tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    report = tmp_path / "records" / "build.json"
    proc = builder_cli("build", "-m", str(DATA / "e2e.yaml"), "--cell", GOOD[0], "--cell", GOOD[1],
                       "--wheelhouse", str(wheelhouse), "--push", "--registry", namespace, "--report", str(report),
                       "--progress", "plain")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out, tree = tmp_path / "site", tmp_path / "images"  # the e2e cells are not in the committed tree
    builder_cli("render", "--matrix", str(DATA / "e2e.yaml"), "--out", str(tree), check=True)
    proc = builder_cli("catalog", "--registry", namespace, "--records", str(report.parent), "--out", str(out),
                       "--images", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"catalog of 2 images: {out / 'index.html'}" in proc.stdout
    rows = {r["tag"]: r for r in json.loads(report.read_text())["images"]}
    md = (out / "images" / "pytorch" / f"{GOOD[0]}.md").read_text()
    assert f"docker pull {namespace}/pytorch:{GOOD[0]}" in md and str(rows[GOOD[0]]["digest"]) in md
    assert f"| Immutable tag | {rows[GOOD[0]]['immutable_tag']} |" in md and "| Also tagged | latest |" in md
    with sync_playwright() as p:
        browser = Browser(p, executable)
        try:
            page = browser.page
            page.goto((out / "index.html").as_uri())
            assert sorted(browser.visible_rows()) == sorted(GOOD)
            assert page.inner_text("#count") == "2 of 2 images"
            page.select_option("#f-flavor", "devel")
            assert browser.visible_rows() == [GOOD[1]]
            page.select_option("#f-flavor", "")
            page.fill("#f-q", "runtime")
            assert browser.visible_rows() == [GOOD[0]] and page.inner_text("#count") == "1 of 2 images"
            page.fill("#f-q", "")
            page.select_option("#f-os", "debian-12")
            assert sorted(browser.visible_rows()) == sorted(GOOD)
            page.select_option("#f-os", "")
            page.screenshot(path=str(artifacts_dir() / "catalog.png"), full_page=True)
            page.click(f'#images a[href$="/{GOOD[0]}.html"]')
            page.wait_for_load_state()
            assert page.url.endswith(f"images/pytorch/{GOOD[0]}.html")
            assert page.inner_text("h1") == GOOD[0]
            body = page.inner_text("body")
            assert f"docker pull {namespace}/pytorch:{GOOD[0]}" in body
            assert "passed" in body and "torch_version" in body  # the smoke report of this build, from the record
            assert "FROM debian:12" in body  # the committed Dockerfile of this tag
            page.screenshot(path=str(artifacts_dir() / "catalog-image.png"), full_page=True)
            assert browser.errors == []
        finally:
            browser.browser.close()


def test_example_script_builds_the_catalog() -> None:
    script = (ROOT / "scripts" / "example.sh").read_text()
    assert "--report .rif/records/example.json" in script
    assert 'builder catalog --registry "$RIF_TEST_REGISTRY/rocm" --records .rif/records --out .rif/site' in script
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "example.sh")], check=False).returncode == 0


def test_setup_installs_chromium_when_missing() -> None:
    script = (ROOT / "scripts" / "setup.sh").read_text()
    assert "command -v chromium" in script and "need+=(chromium)" in script


def test_playwright_is_a_pinned_test_dependency() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"playwright==\d+\.\d+\.\d+"', text)


def test_publish_workflow_builds_the_catalog_and_deploys_it_from_a_job_that_runs_no_code() -> None:
    import yaml

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())["jobs"]
    build_job, deploy = jobs["catalog"], jobs["pages"]
    assert set(build_job["needs"]) == {"plan", "publish", "retag"}
    assert "!cancelled()" in build_job["if"] and "inputs.dry_run" in build_job["if"]
    assert build_job["permissions"] == {"contents": "read", "packages": "read"}
    uses = [str(s.get("uses", "")).split("@")[0] for s in build_job["steps"]]
    assert uses.index("actions/download-artifact") < uses.index("actions/upload-pages-artifact")
    download = next(s for s in build_job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact"))
    assert download["with"] == {"pattern": "record-*", "path": "records", "merge-multiple": True}
    script = "\n".join(s.get("run", "") for s in build_job["steps"])
    assert 'builder catalog --registry "ghcr.io/${OWNER,,}" --records records --out site' in script
    assert deploy["needs"] == "catalog" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert [str(s.get("uses", "")).split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["environment"]["name"] == "github-pages"


def test_the_page_says_when_the_image_was_published_and_why_its_build_time_is_1970(tmp_path: Path) -> None:
    fake = FakeRegistry()
    digest = fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU), [1000], ["x"])
    config_digest = json.loads(fake.manifests[("rocm/pytorch", CPU_TAG)].body)["config"]["digest"]
    fake.blobs[config_digest]["created"] = "1970-01-01T00:00:00Z"  # what SOURCE_DATE_EPOCH=0 writes
    first = write_record(tmp_path / "a.json", [record_row(CPU_TAG, HASH_CPU, digest)], "2026-11-01T10:00:00Z")
    again = write_record(tmp_path / "b.json", [record_row(CPU_TAG, HASH_CPU, digest, state="skipped")],
                         "2026-11-05T10:00:00Z")
    other = write_record(tmp_path / "c.json", [record_row(CPU_TAG, HASH_CPU, "sha256:" + "9" * 64)],
                         "2026-10-01T10:00:00Z")  # another build of the tag, pushed earlier: not this one's date
    (image,) = build(fake, [first, again, other]).images
    facts = dict(image.facts)
    assert facts["Published"] == "2026-11-01T10:00:00Z"  # its first push, not the later run that found it there
    assert facts["Built"].startswith("1970-01-01T00:00:00Z (fixed for reproducible builds: SOURCE_DATE_EPOCH=0")
    page = site.render_pages(build(fake, [first, again]))
    assert any("2026-11-01T10:00:00Z" in text and "SOURCE_DATE_EPOCH=0" in text for text in page.values())
    # The catalog's own records.json keeps the date for the next catalog.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "records.json").write_text(page["records.json"])
    assert dict(build(fake, [tmp_path / "site" / "records.json"]).images[0].facts)["Published"] == \
        "2026-11-01T10:00:00Z"


def test_without_a_record_of_its_push_the_page_says_so_and_keeps_a_real_build_time(tmp_path: Path) -> None:
    fake = FakeRegistry()
    fake.push("rocm/pytorch", [CPU_TAG], labels(CPU_TAG, HASH_CPU), [1000], ["x"])
    facts = dict(build(fake, []).images[0].facts)
    assert facts["Published"] == "not recorded (no run record of its push)"
    assert facts["Built"] == "2026-11-20T03:17:00Z"
