"""Where a bake exports: the registry cache's keys per target (the layout's own keys: test_bake_driver)."""

from __future__ import annotations

from pathlib import Path

from builder.buildkit.export import Cache, Export, store_direct


def test_the_registry_cache_is_per_target_every_stage_and_read_only_on_a_rehearsal(tmp_path: Path) -> None:
    cache = Cache("127.0.0.1:5000/ns/buildcache", insecure=True)
    keys = Export(tmp_path, "zstd", cache=cache).target("t1", "n")
    assert keys["cache-from"] == ["type=registry,ref=127.0.0.1:5000/ns/buildcache:t1,registry.insecure=true"]
    [to] = keys["cache-to"]
    assert to.startswith("type=registry,ref=127.0.0.1:5000/ns/buildcache:t1,registry.insecure=true,mode=max,")
    assert "compression=zstd" in to and "ignore-error=true" in to
    read_only = Export(tmp_path, cache=Cache("ghcr.io/o/buildcache", write=False)).target("t1", "n")
    assert "cache-to" not in read_only and "insecure" not in read_only["cache-from"][0]


def test_a_target_imports_the_shared_stages_a_first_wave_exported_after_its_own_cache(tmp_path: Path) -> None:
    cache = Cache("ghcr.io/o/buildcache", stages={"t1": ("stage-aaa", "stage-bbb")})
    keys = Export(tmp_path, cache=cache).target("t1", "n")
    assert keys["cache-from"] == ["type=registry,ref=ghcr.io/o/buildcache:t1",
                                  "type=registry,ref=ghcr.io/o/buildcache:stage-aaa",
                                  "type=registry,ref=ghcr.io/o/buildcache:stage-bbb"]
    assert keys["cache-to"] == [cache.attributes("t1", True, "gzip")]  # a job exports its own images only
    other = Export(tmp_path, cache=cache).target("t2", "n")
    assert other["cache-from"] == ["type=registry,ref=ghcr.io/o/buildcache:t2"]


def test_every_target_also_imports_an_earlier_wave_s_cache_once(tmp_path: Path) -> None:
    cache = Cache("ghcr.io/o/buildcache", stages={"t1": ("stage-aaa",)}, earlier=("t0", "stage-aaa"))
    keys = Export(tmp_path, cache=cache).target("t1", "n")
    assert keys["cache-from"] == [f"type=registry,ref=ghcr.io/o/buildcache:{tag}" for tag in ("t1", "stage-aaa", "t0")]
    assert keys["cache-to"] == [cache.attributes("t1", True, "gzip")]  # exported under its own tag only


def test_an_export_straight_into_the_engine_writes_no_layout_and_wraps_no_attestation(tmp_path: Path) -> None:
    direct = Export(tmp_path / "layout", "zstd", cache=Cache("ghcr.io/o/buildcache"), direct=True)
    keys = direct.target("t1", "rif-local/x:b-2")
    assert keys["output"] == ["type=image,oci-mediatypes=true,compression=zstd"]  # named by the bake file's tags
    assert keys["attest"] == ["type=provenance,disabled=true"]  # else the image is an index, its ID not the manifest
    assert keys["cache-to"] == [Cache("ghcr.io/o/buildcache").attributes("t1", True, "zstd")]
    assert not direct.writes_layout and Export(tmp_path).writes_layout
    assert "attest" not in Export(tmp_path).target("t1", "n")


class Info:
    def __init__(self, status: object) -> None:
        self.status = status

    def info(self) -> dict[str, object]:
        return {"DriverStatus": self.status}


def test_only_a_containerd_image_store_takes_a_bake_straight() -> None:
    assert store_direct(Info([["driver-type", "io.containerd.snapshotter.v1"]]))  # type: ignore[arg-type]
    for status in ([["Backing Filesystem", "extfs"], ["Supports d_type", "true"]], None, "driver-type", [[1, 2]]):
        assert not store_direct(Info(status)), status  # type: ignore[arg-type]
