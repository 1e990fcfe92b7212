"""Rendering: golden Dockerfiles and bake file, content hashes per target, the drift check and hadolint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.core import facts
from builder.core.spec import CellSpec
from builder.core.tags import HASH_LABEL
from builder.matrix.expand import load_matrix
from builder.render import bakefile, imagetree
from builder.render.contenthash import stage_chains
from builder.render.dockerfile import RenderedCell, render_all, render_cell, render_images
from builder.render.installs import os_sdk_steps
from builder.render.sources import WheelSource, combination_pins, pinned_wheels
from testkit.matrices import FAMILIES, ONE_CPU, load_cells
from tests.fakes import checkout
from tests.fakes.checkout import DATA, ROOT, builder_cli

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("RIF_UPDATE_GOLDEN") == "1"


def golden_cells() -> list[CellSpec]:
    return load_matrix(DATA / "golden.yaml")


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), \
        "run RIF_UPDATE_GOLDEN=1 pytest tests/render/test_dockerfile.py and review the diff"


@pytest.mark.parametrize("group", sorted({r.group for r in render_all(golden_cells())}))
def test_rendering_matches_golden_file(group: str) -> None:
    [text] = {r.dockerfile for r in render_all(golden_cells()) if r.group == group}
    golden(f"{group}.Dockerfile", text)


def test_bake_file_matches_golden_file() -> None:
    golden("docker-bake.json", bakefile.dumps(bakefile.definition(render_all(golden_cells()), "images")).decode())


def test_local_wheelhouse_is_the_same_template_with_another_source(tmp_path: Path) -> None:
    cell = golden_cells()[1]
    (tmp_path / "torch-2.13.0-cp311-none-any.whl").write_bytes(b"wheel")
    index = render_cell(cell).dockerfile
    local = render_cell(cell, WheelSource(tmp_path)).dockerfile
    assert "--index-url https://mirror.example.org/whl/cpu" in index and "source=wheels" not in index
    folder = pinned_wheels(combination_pins([cell]))  # wheels/<its pins>: all but other versions of what it pins
    assert "--no-index --find-links /mnt" in local and f"--mount=type=bind,source={folder},target=/mnt" in local
    assert "COPY wheels" not in local and "COPY --from" not in local  # wheels never enter a layer
    differ = set(index.splitlines()) ^ set(local.splitlines())
    marks = ("Wheels:", "--mount=", "--index-url", "--find-links")
    assert all(any(k in line for k in marks) for line in differ), differ


def test_every_runtime_pins_its_torch_for_pip_and_uv() -> None:
    """The constraint file the smoke program writes is the one PIP_CONSTRAINT and UV_CONSTRAINT name (issue 51)."""
    from builder.smoke.torch_smoke import constraint

    for cell in golden_cells():
        text = render_cell(cell).dockerfile
        runtimes = text.count("\nFROM torch AS ")
        assert text.count(f"python -m torch_smoke.constraint {constraint.FILE}") == runtimes > 0
        assert text.count(f"ENV PIP_CONSTRAINT={constraint.FILE} \\\n    UV_CONSTRAINT={constraint.FILE}\n") == runtimes


def test_content_hash_is_stable_and_labelled() -> None:
    cell = golden_cells()[0]
    first, second = render_cell(cell), render_cell(cell)
    assert first.content_hash == second.content_hash
    assert first.content_hash.startswith("sha256:") and len(first.content_hash) == 71
    assert first.labels[HASH_LABEL] == first.content_hash
    assert HASH_LABEL not in first.dockerfile  # labels are the bake target's, not a layer's


def test_content_hash_changes_with_every_input(tmp_path: Path) -> None:
    cell = golden_cells()[1]
    base = render_cell(cell).content_hash
    assert render_cell(cell.model_copy(update={"torch": "2.12.0"})).content_hash != base
    assert render_cell(cell.model_copy(update={"expect_torch": "2.12.0"})).content_hash != base
    (tmp_path / "a-1.0-py3-none-any.whl").write_bytes(b"one")
    with_wheels = render_cell(cell, WheelSource(tmp_path)).content_hash
    assert with_wheels != base
    other = tmp_path / "other"
    other.mkdir()
    (other / "a-1.0-py3-none-any.whl").write_bytes(b"two")
    assert render_cell(cell, WheelSource(other)).content_hash != with_wheels


def _hashes(rendered: list[RenderedCell]) -> dict[str, str]:
    return {r.cell.tag: r.content_hash for r in rendered}


def test_an_image_hash_depends_on_its_own_stages_only(tmp_path: Path) -> None:
    """Rendered alone or beside its siblings (other families, its devel), every image keeps its hash."""
    cells = load_cells(tmp_path, FAMILIES)
    together = _hashes(render_images(cells))
    for cell in cells:
        assert _hashes(render_images([cell])) == {cell.tag: together[cell.tag]}
    assert len(set(together.values())) == len(cells)


def test_devel_is_built_from_its_runtime_and_families_from_one_torch_stage(tmp_path: Path) -> None:
    rendered = render_images(load_cells(tmp_path, FAMILIES))
    [text] = {r.dockerfile for r in rendered}
    chains = stage_chains(text)
    by_flavor = {(r.cell.gfx, r.cell.flavor): r for r in rendered}
    for (gfx, flavor), r in by_flavor.items():
        names = chains[r.stage].names
        assert names[:2] == ("base", "torch"), names
        if flavor == "devel":
            assert names[:-1] == chains[by_flavor[(gfx, "runtime")].stage].names
    # the full local version: one wheel of TheRock 7.14, never another release's 2.12.0
    assert "'torch[device-gfx942]==2.12.0+rocm7.14.0'" in text and "'torch[device-gfx1151]==2.12.0+rocm7.14.0'" in text
    # torch alone, then its dependencies: the big layer below the often-updated ones.
    runs = text.split("FROM base AS torch\n")[1].split("\nFROM ")[0].split("RUN ")[1:]
    assert len(runs) == 2 and "--no-deps torch==2.12.0+rocm7.14.0" in runs[0] and "--no-deps" not in runs[1], runs


def test_user_line_numbers_do_not_change_the_hash(tmp_path: Path) -> None:
    moved = tmp_path / "moved.yaml"
    moved.write_text("\n\n# a comment\n" + (DATA / "golden.yaml").read_text())
    assert [render_cell(c).content_hash for c in load_matrix(moved)] == \
        [render_cell(c).content_hash for c in golden_cells()]


def test_tree_holds_exactly_what_the_dockerfiles_copy_and_bind(tmp_path: Path) -> None:
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "x-1.0-py3-none-any.whl").write_bytes(b"x")
    source = WheelSource(wheels)
    rendered = render_all(golden_cells(), source)
    tree = tmp_path / "tree"
    imagetree.write(tree, rendered, prune=False, source=source)
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    bound = {m for r in rendered for m in re.findall(r"--mount=type=bind,source=(rif|cells/[^,]+),", r.dockerfile)}
    # each bind mount is a folder holding exactly the one file its step installs (no mount stub in any layer)
    copied = {"rif/torch-smoke.pyz" if b == "rif" else f"{b}/cell.json" for b in bound}
    assert "rif" in bound and {f"cells/{r.cell.tag}" for r in rendered} <= bound
    wheel = "x-1.0-py3-none-any.whl"  # pinned by no combination: in the folder of each
    folders = {pinned_wheels(r.pins) for r in rendered}
    assert len(folders) == len({r.group for r in rendered}) > 1  # the golden combinations pin other torches
    expected = {imagetree.MANIFEST, imagetree.BAKE_FILE, *(f"{f}/{wheel}" for f in folders), *copied,
                *(f"{r.group}/Dockerfile" for r in rendered)}
    assert files == sorted(expected)
    assert os.access(tree / "rif" / "torch-smoke.pyz", os.X_OK)
    for folder in folders:
        assert (tree / folder / wheel).stat().st_ino == (wheels / wheel).stat().st_ino  # a link, not a copy


def test_committed_images_match_the_production_matrix() -> None:
    """docker-library's verify-templating: images/ must be exactly what matrix.yaml renders."""
    proc = builder_cli("render", "--matrix", "matrix.yaml", "--out", "images", "--check")
    assert proc.returncode == 0, proc.stderr


def test_drift_check_names_changed_missing_and_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "images"
    shutil.copytree(ROOT / "images", out)
    first = sorted(p for p in out.iterdir() if p.is_dir() and (p / "Dockerfile").is_file())
    (first[0] / "Dockerfile").write_text("FROM scratch\n")
    shutil.rmtree(first[1])
    (out / "gone_combo").mkdir()  # a folder the factory rendered earlier (it is in the manifest)
    (out / "gone_combo" / "Dockerfile").write_text("FROM scratch\n")
    manifest = json.loads((out / imagetree.MANIFEST).read_text())
    (out / imagetree.MANIFEST).write_text(json.dumps({"files": [*manifest["files"], "gone_combo/Dockerfile"]}))
    (out / "hand_made").mkdir()  # not the factory's: never reported, never removed
    proc = builder_cli("render", "--matrix", str(ROOT / "matrix.yaml"), "--out", "images", "--check", cwd=tmp_path)
    assert proc.returncode == 1
    assert f"{first[0].name}/Dockerfile: differs" in proc.stderr
    assert f"{first[1].name}/Dockerfile: missing" in proc.stderr
    assert "gone_combo/Dockerfile: no cell of the matrix renders here" in proc.stderr
    assert "hand_made" not in proc.stderr


def test_hadolint_passes_every_rendered_dockerfile(tmp_path: Path) -> None:
    hadolint = checkout.hadolint()
    wheels = tmp_path / "wh"
    wheels.mkdir()
    local = []
    for r in render_all([*golden_cells(), *load_cells(tmp_path, FAMILIES)], WheelSource(wheels)):
        local.append(tmp_path / f"{r.group}.Dockerfile")
        local[-1].write_text(r.dockerfile)
    files = [*sorted((ROOT / "images").glob("*/Dockerfile")), *sorted(set(local))]
    proc = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), "--no-color", *map(str, files)],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("tags", "says"), [(("my.img", "my-img"), "bake target name 'my-img'"),
                                            (("Case", "case"), "Dockerfile stage 'tag-case'")])
def test_tags_that_would_share_a_buildkit_name_are_refused(tmp_path: Path, tags: tuple[str, str], says: str) -> None:
    includes = "".join(f"  - {{os: debian-12, platform: cpu, torch: '2.13.0', tag: {t}}}\n" for t in tags)
    matrix = tmp_path / "m.yaml"
    matrix.write_text(ONE_CPU + "include:\n" + includes)
    proc = builder_cli("render", "--matrix", str(matrix), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_therock_devel_image_adds_the_rocm_sdk_of_its_own_release(tmp_path: Path) -> None:
    rendered = {r.cell.tag: r for r in render_all(load_cells(tmp_path, FAMILIES))}
    devel = rendered["rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx1151_therock_devel"]
    stage = devel.dockerfile.split(f"AS {devel.stage}\n")[1].split("\nFROM ")[0]
    assert "'rocm[devel]==7.14.0'" in stage and "rocm-sdk init" in stage
    assert 'ln -s "$(rocm-sdk path --root)" /opt/rocm' in stage and "ROCM_HOME=/opt/rocm" in stage
    assert json.loads(devel.files[f"cells/{devel.cell.tag}/cell.json"])["rocm_sdk"] is True
    runtime = rendered["rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx1151_therock_runtime"]
    assert json.loads(runtime.files[f"cells/{runtime.cell.tag}/cell.json"])["rocm_sdk"] is False
    for r in render_all(golden_cells()):  # pytorch.org and cpu devel images promise no SDK (yet)
        if r.cell.channel != "therock":
            assert "rocm-sdk" not in r.dockerfile
            assert json.loads(r.files[f"cells/{r.cell.tag}/cell.json"])["rocm_sdk"] is False


def test_a_pytorch_devel_image_adds_the_sdk_from_amds_apt_repository_through_a_pinned_key(tmp_path: Path) -> None:
    cell = load_cells(tmp_path, "matrix:\n  os: [ubuntu-24.04, debian-12]\n  platform: [rocm7.2]\n  torch: ['2.13.0']\n"
                                "  gfx: [all]\n  flavor: [runtime, devel]\n")
    rendered = {r.cell.tag: r for r in render_all(cell)}
    noble = rendered["rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_devel"]
    # the patch release the rocm7.2 wheels were built on (pytorch's manywheel build.sh: 7.2 -> 7.2.1)
    assert "https://repo.radeon.com/rocm/apt/7.2.1 noble main" in noble.dockerfile
    assert "signed-by=/etc/apt/keyrings/rocm.gpg" in noble.dockerfile and "rocm-hip-sdk" in noble.dockerfile
    assert json.loads(noble.files[f"cells/{noble.cell.tag}/cell.json"])["rocm_sdk"] is True
    bookworm = rendered["rocm7.2_debian12_py3.11_torch2.13.0_all_devel"]  # AMD documents no Debian suite
    assert "repo.radeon.com" not in bookworm.dockerfile
    assert json.loads(bookworm.files[f"cells/{bookworm.cell.tag}/cell.json"])["rocm_sdk"] is False


@pytest.mark.skipif(shutil.which("gpg") is None, reason="needs gpg")
def test_the_key_check_accepts_the_pinned_fingerprint_only(tmp_path: Path) -> None:
    """The Dockerfile's own key steps, run against a throw-away key: the pinned fingerprint passes, another fails."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    try:
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "rif <t@example.org>", "ed25519",
                        "sign", "never"], env=env, check=True, capture_output=True)
        key = subprocess.run(["gpg", "--armor", "--export"], env=env, check=True, capture_output=True).stdout
        listing = subprocess.run(["gpg", "--with-colons", "--list-keys"], env=env, check=True, capture_output=True,
                                 text=True)
    finally:  # key generation starts a gpg-agent for this home: never leave it running
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False, capture_output=True)
    fingerprint = next(line.split(":")[9] for line in listing.stdout.splitlines() if line.startswith("fpr:"))
    [cell] = [c for c in load_cells(tmp_path, "matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2]\n"
                                    "  torch: ['2.13.0']\n  gfx: [all]\n  flavor: [devel]\n")]
    steps = os_sdk_steps(cell)
    pinned = facts.compat().amd_apt.key_fingerprint
    check = steps[:steps.index(next(s for s in steps if s.startswith("install -d -m 0755")))]
    script = "\n".join(s for s in check if not s.startswith("curl "))  # the key comes from the test, not AMD
    script = script.replace("/tmp/rif-", f"{tmp_path}/rif-")
    (tmp_path / "rif-rocm.asc").write_bytes(key)
    ours = subprocess.run(["bash", "-ec", script.replace(pinned, fingerprint)], check=False, capture_output=True,
                          text=True)
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run(["bash", "-ec", script], check=False, capture_output=True, text=True)
    assert theirs.returncode != 0, "a key with another fingerprint must stop the build"
