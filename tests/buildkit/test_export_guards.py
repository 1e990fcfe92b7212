"""builder.buildkit.export's guard on an image exported straight into the engine (issue 53, "Validation"): the
engine must hold it under the manifest digest the bake reported, else the image is not taken (an image another
bake put under that name, or one a graph-driver store names by its config, is never validated and pushed).

The engine is a stand-in with the docker SDK's shape: `images.get(ref).id` is the image ID, which the containerd
image store sets to the manifest digest (docker-py 7.1 docker/models/images.py, Image.id = attrs["Id"])."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from docker.errors import ImageNotFound

from builder.buildkit import export
from builder.buildkit.export import Cache, Export, ExportError

BUILT = "sha256:" + "b" * 64
OTHER = "sha256:" + "0" * 64


def engine_holding(monkeypatch: pytest.MonkeyPatch, held: dict[str, str]) -> None:
    def get(ref: str) -> SimpleNamespace:
        if ref not in held:
            raise ImageNotFound(f"No such image: {ref}")
        return SimpleNamespace(id=held[ref])

    monkeypatch.setattr(export, "connect", lambda: SimpleNamespace(images=SimpleNamespace(get=get)))


def test_an_image_the_engine_holds_as_the_built_manifest_is_taken(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    engine_holding(monkeypatch, {"rif-local/x:b-2": BUILT})
    taken = Export(tmp_path / "layout", direct=True).take(["rif-local/x:a", "rif-local/x:b-2"], BUILT)
    assert (taken.image_id, taken.manifest_digest, taken.streamed) == (BUILT, BUILT, 0)
    assert not (tmp_path / "layout").exists()


def test_an_image_held_under_another_digest_is_refused_naming_both(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    engine_holding(monkeypatch, {"rif-local/x:b-2": OTHER})
    with pytest.raises(ExportError) as info:
        Export(tmp_path, direct=True).take(["rif-local/x:b-2"], BUILT)
    assert str(info.value) == f"the engine holds rif-local/x:b-2 as {OTHER}, not the built manifest {BUILT}"


def test_an_image_the_engine_lacks_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_holding(monkeypatch, {})
    with pytest.raises(ExportError, match=r"^the engine does not hold rif-local/x:b-2: "):
        Export(tmp_path, direct=True).take(["rif-local/x:b-2"], BUILT)


def test_caches_that_differ_only_in_what_they_import_are_one_cache() -> None:
    """A cache is its registry ref (and how it is reached and written): the shared stages and earlier waves it
    imports do not make it another cache, as a key or in a set (hashing follows equality)."""
    plain = Cache("127.0.0.1:5000/rocm/cache")
    importing = Cache("127.0.0.1:5000/rocm/cache", stages={"t": ("base-abc",)}, earlier=("w1",))
    assert plain == importing and hash(plain) == hash(importing) and len({plain, importing}) == 1
    assert Cache("127.0.0.1:5000/rocm/cache", write=False) != plain
