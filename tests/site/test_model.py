"""builder.site.model: what a page says about one image, from its labels and its record, and sizes for people."""

from __future__ import annotations

import pytest

from builder.core import facts, tags
from builder.site.model import MAX_PAGE_LAYERS, Catalog, ImageEntry, Layer, Published, built_time, human_size
from builder.site.records import RecordRow

DIGEST = "sha256:" + "a" * 64


def entry(tag: str = "t1", record: RecordRow | None = None, **labels: str) -> ImageEntry:
    published = Published(DIGEST, {tags.LABEL_PREFIX + k.replace("_", "-"): v for k, v in labels.items()}, 10,
                          None, "linux/amd64", [])
    return ImageEntry(tag, "pytorch", "r.io/ns/pytorch", published, record=record)


@pytest.mark.parametrize(("n", "said"), [
    (None, "unknown"), (0, "0 B"), (999, "999 B"), (1500, "2 kB"), (456_000_000, "456 MB"),
    (54_000_000_000, "54.00 GB"),
])
def test_human_size_in_decimal_units(n: int | None, said: str) -> None:
    assert human_size(n) == said


def test_a_fixed_build_time_says_why() -> None:
    assert built_time(None) == "unknown" and built_time("2026-11-02T10:00:00Z") == "2026-11-02T10:00:00Z"
    for fixed in ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000000Z"):
        assert built_time(fixed).startswith("1970-01-01T00:00:00Z (fixed for reproducible builds")


def test_a_page_lists_at_most_its_cap_of_layers_and_says_so() -> None:
    few = Published(DIGEST, {}, None, None, "linux/amd64", [Layer("RUN x", 1)] * 3)
    assert few.layers_left_out is None and len(few.shown_layers) == 3
    many = Published(DIGEST, {}, None, None, "linux/amd64", [Layer("RUN x", 1)] * (MAX_PAGE_LAYERS + 1))
    assert len(many.shown_layers) == MAX_PAGE_LAYERS
    assert many.layers_left_out == f"layers: first {MAX_PAGE_LAYERS} of {MAX_PAGE_LAYERS + 1:,} shown"


def test_labels_none_and_empty_are_no_value_and_a_cpu_image_says_cpu() -> None:
    cpu = entry(platform="cpu", rocm="none", os="")
    assert (cpu.rocm, cpu.os, cpu.gfx_targets) == ("CPU", "unknown", ())
    assert cpu.run == "docker run -it --rm r.io/ns/pytorch:t1"
    assert cpu.smoke_line == "docker run -it --rm r.io/ns/pytorch:t1 torch-smoke"


def test_a_gpu_image_runs_with_the_devices_and_names_its_complete_families_gpus() -> None:
    family = facts.gfx_families()["gfx94X-dcgpu"]
    gpu = entry(rocm="7.2", gfx_targets=",".join(family.targets) + ",gfx1100")
    assert "--device=/dev/kfd" in gpu.run and gpu.smoke_line.endswith("r.io/ns/pytorch:t1 torch-smoke")
    assert "\\\n" not in gpu.smoke_line
    assert set(family.gpus) <= set(gpu.gpus)
    partial = [f for f in gpu.gpu_families if not f.complete]
    assert all("gfx1100" in f.present for f in partial) and not set(partial[0].gpus) & set(gpu.gpus)


def test_the_dockerfile_matches_when_the_bake_files_hash_is_the_images() -> None:
    image = entry()
    image.published.labels[tags.HASH_LABEL] = "sha256:1"
    assert image.dockerfile_matches is None
    image.dockerfile, image.dockerfile_hash = "FROM x", "sha256:1"
    assert image.dockerfile_matches is True
    image.dockerfile_hash = "sha256:2"
    assert image.dockerfile_matches is False


def test_facts_say_what_is_not_recorded() -> None:
    facts_of = dict(entry().facts)
    assert facts_of["Installed size (on disk)"].startswith("not recorded")
    assert facts_of["Published"].startswith("not recorded") and "Run record" not in facts_of
    recorded = dict(entry(record=RecordRow("t1", "pytorch", (), "published", "2026-11-02", image_bytes=5000)).facts)
    assert recorded["Installed size (on disk)"] == "5 kB" and recorded["Published"] == "2026-11-02"
    assert recorded["Run record"] == "published, 2026-11-02"


def test_an_image_page_shows_the_driver_range_it_needs() -> None:
    gpu = entry(rocm="7.2")
    gpu.published.labels[tags.LABEL_PREFIX + "amdgpu-driver"] = "6.4.x-31.50.x"
    assert dict(gpu.facts)["Host driver (amdgpu)"].startswith("AMD GPU Driver 6.4.x-31.50.x (amdgpu-dkms)")
    gpu.published.labels[tags.LABEL_PREFIX + "amdgpu-driver"] = "not stated"
    assert dict(gpu.facts)["Host driver (amdgpu)"] == "not stated by AMD for this ROCm line"
    assert dict(entry(rocm="7.2").facts)["Host driver (amdgpu)"].startswith("not recorded")
    assert dict(entry(platform="cpu", rocm="none").facts)["Host driver (amdgpu)"] == "none needed (CPU only)"


def test_the_catalogs_filters_order_rocm_lines_as_versions() -> None:
    catalog = Catalog("r.io/ns", [entry(rocm="7.2"), entry(rocm="7.14"), entry(platform="cpu"), entry(os="b"),
                                  entry(os="a")], [], "now")
    assert catalog.rocms[:2] == ["7.14", "7.2"] and set(catalog.rocms[2:]) == {"unknown", "CPU"}
    assert catalog.oses == ["a", "b", "unknown"]
