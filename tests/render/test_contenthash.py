"""The content hash changes with each of its inputs, one at a time, and with nothing else.

It decides whether publish rebuilds an image, so an input it misses would let a changed image keep an
immutable tag that names other content.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from builder.core import wheels
from builder.core.spec import CellSpec
from builder.render import contenthash, dockerfile, labels
from builder.render.dockerfile import render_cell
from builder.render.sources import WheelSource
from testkit.matrices import ONE_CPU, load_cells

MATRIX = ONE_CPU


@pytest.fixture
def cell(tmp_path: Path) -> CellSpec:
    [only] = load_cells(tmp_path, MATRIX)
    return only


@pytest.fixture
def wheelhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a private digest cache
    contenthash.wheel_sha256s.cache_clear()
    house = tmp_path / "wheels"
    house.mkdir()
    (house / "torch-2.13.0-py3-none-any.whl").write_bytes(b"torch bytes")
    return house


def digest(cell: CellSpec, source: WheelSource | None = None) -> str:
    contenthash.wheel_sha256s.cache_clear()
    return render_cell(cell, source or WheelSource()).content_hash


def test_the_same_inputs_give_the_same_hash(cell: CellSpec, wheelhouse: Path) -> None:
    assert digest(cell) == digest(cell)
    assert digest(cell, WheelSource(wheelhouse)) == digest(cell, WheelSource(wheelhouse))
    assert digest(cell.model_copy(update={"line": 99})) == digest(cell)  # where it came from is no input


@pytest.mark.parametrize("change", [{"user": "ml"}, {"index_url": "https://mirror.example/simple"},
                                    {"expect_torch": "2.12.0"}, {"flavor": "devel"}, {"tag": "other"}])
def test_each_cell_field_that_reaches_the_image_changes_the_hash(cell: CellSpec, change: dict[str, str]) -> None:
    assert digest(cell.model_copy(update=change)) != digest(cell)


def test_the_template_changes_the_hash(cell: CellSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    before = digest(cell)
    original = dockerfile._template()
    source = Path(dockerfile.template_dir() / "Dockerfile.j2").read_text()
    env = original.environment
    changed = env.from_string(source.replace("CMD [\"bash\"]", "CMD [\"sh\"]"))
    assert isinstance(changed, jinja2.Template)
    monkeypatch.setattr(dockerfile, "_template", lambda: changed)
    assert digest(cell) != before


def test_each_baked_file_changes_the_hash(cell: CellSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke program and the image's cell.json: one byte more in either is another image."""
    before = digest(cell)
    real_json, real_bundle = labels.cell_json, dockerfile.smoke.bundle
    monkeypatch.setattr(labels, "cell_json", lambda c: real_json(c) + b"\n")
    after_json = digest(cell)
    monkeypatch.setattr(labels, "cell_json", real_json)
    monkeypatch.setattr(dockerfile.smoke, "bundle", lambda: real_bundle() + b"\n")
    assert len({before, after_json, digest(cell)}) == 3


def test_each_wheelhouse_change_changes_the_hash(cell: CellSpec, wheelhouse: Path) -> None:
    seen = {digest(cell, WheelSource(wheelhouse))}
    wheel = wheelhouse / "torch-2.13.0-py3-none-any.whl"
    wheel.write_bytes(b"torch bytes, rebuilt")  # same name and size class, new content
    os.utime(wheel, ns=(1, 1))
    seen.add(digest(cell, WheelSource(wheelhouse)))
    (wheelhouse / "numpy-2.4.6-py3-none-any.whl").write_bytes(b"numpy")  # a new wheel
    seen.add(digest(cell, WheelSource(wheelhouse)))
    wheel.rename(wheelhouse / "torch-2.13.1-py3-none-any.whl")  # a renamed wheel
    seen.add(digest(cell, WheelSource(wheelhouse)))
    assert len(seen) == 4
    assert digest(cell) not in seen  # the index source and the wheelhouse source differ too


def test_a_run_lists_and_hashes_its_wheelhouse_once_for_every_combination(wheelhouse: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The production matrix renders 37 combinations from one wheelhouse: each filters one listing by its pins."""
    (wheelhouse / "torch-2.12.0-py3-none-any.whl").write_bytes(b"older torch")
    listed: list[Path] = []
    real = wheels.wheels

    def listing(folder: Path) -> list[wheels.Wheel]:
        listed.append(folder)
        return real(folder)

    monkeypatch.setattr(wheels, "wheels", listing)
    new, old = (("torch", ("2.13.0",)),), (("torch", ("2.12.0",)),)
    digests = {contenthash.wheelhouse_digest(wheelhouse, pins) for pins in (new, old, new, ())}
    assert len(listed) == 1 and len(digests) == 3  # one listing; each pin set its own wheels
    assert contenthash.wheelhouse_digest(wheelhouse, new) != contenthash.wheelhouse_digest(wheelhouse, ())
