"""Where a bake exports: the registry cache's keys per target (the layout's own keys: test_bake_driver)."""

from __future__ import annotations

from pathlib import Path

from builder.build.export import Cache, Export


def test_the_registry_cache_is_per_target_every_stage_and_read_only_on_a_rehearsal(tmp_path: Path) -> None:
    cache = Cache("127.0.0.1:5000/ns/buildcache", insecure=True)
    keys = Export(tmp_path, "zstd", cache=cache).target("t1", "n")
    assert keys["cache-from"] == ["type=registry,ref=127.0.0.1:5000/ns/buildcache:t1,registry.insecure=true"]
    [to] = keys["cache-to"]
    assert to.startswith("type=registry,ref=127.0.0.1:5000/ns/buildcache:t1,registry.insecure=true,mode=max,")
    assert "compression=zstd" in to and "ignore-error=true" in to
    read_only = Export(tmp_path, cache=Cache("ghcr.io/o/buildcache", write=False)).target("t1", "n")
    assert "cache-to" not in read_only and "insecure" not in read_only["cache-from"][0]
