"""What every image must be, checked from inside a running container of it."""

from __future__ import annotations

from typing import Any

import pytest

from builder.core import osfamilies
from builder.core.tags import LABEL_PREFIX

PY = "/opt/venv/bin/python3"
VERSION_OF = PY + " -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' {}"


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def test_python_is_the_expected_version(host: Any, expect: dict[str, Any]) -> None:
    out = host.check_output("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert out == expect["python"], f"python {out} in the image, the cell expects {expect['python']}"


def test_venv_is_first_on_path(host: Any) -> None:
    assert host.check_output("command -v python3") == PY
    assert host.check_output("command -v pip") == "/opt/venv/bin/pip"
    assert host.check_output("printenv VIRTUAL_ENV") == "/opt/venv"


def test_torch_is_the_expected_version(host: Any, expect: dict[str, Any]) -> None:
    installed = host.check_output(VERSION_OF.format("torch"))
    assert _public(installed) == expect["torch"], f"torch {installed} is installed, the cell expects {expect['torch']}"


def test_companions_are_the_expected_versions(host: Any, expect: dict[str, Any]) -> None:
    for package in ("torchvision", "torchaudio"):
        result = host.run(VERSION_OF.format(package))
        if expect.get(package):
            assert result.rc == 0, f"{package} is missing"
            installed = result.stdout.strip()
            want = expect[package]
            assert _public(installed) == want, f"{package} {installed} is installed, the cell expects {want}"
        else:
            assert result.rc != 0, f"{package} is installed but the cell does not promise it"


def test_numpy_is_installed(host: Any) -> None:
    assert host.run(VERSION_OF.format("numpy")).rc == 0


def test_labels_match_the_cell(image_labels: dict[str, str], spec: dict[str, Any], expect: dict[str, Any]) -> None:
    expected = spec.get("labels")
    if expected is not None:
        assert image_labels == {**image_labels, **expected}
        return
    # Without the matrix, hold the labels to the expectations baked into the image.
    for key in ("tag", "platform", "os", "flavor", "python", "user"):
        assert image_labels.get(LABEL_PREFIX + key) == expect[key], key
    assert image_labels.get(LABEL_PREFIX + "gfx-family") == (expect["gfx_family"] or "none")
    assert image_labels.get(LABEL_PREFIX + "content-hash", "").startswith("sha256:")


def test_no_pip_cache(host: Any) -> None:
    found = host.run("find / -xdev -type d -path '*/.cache/pip' -print -quit").stdout.strip()
    assert found == "", f"pip cache left in the image: {found}"


def test_no_wheel_files(host: Any) -> None:
    found = host.run("find / -xdev -name '*.whl' -print -quit").stdout.strip()
    assert found == "", f"wheel file left in the image: {found}"


@pytest.mark.parametrize("family", sorted(osfamilies.FAMILIES))
def test_no_package_lists(host: Any, family: str) -> None:
    """No OS family's package index stays in a layer (a folder the image lacks holds none)."""
    where = osfamilies.of(family).LISTS_DIR
    lists = host.run(f"find {where} -type f ! -name lock -print -quit 2>/dev/null").stdout.strip()
    assert lists == "", f"{family} package lists left in the image: {lists}"


def test_gpu_groups_exist(host: Any) -> None:
    assert host.group("video").exists
    assert host.group("render").exists


def test_default_user(host: Any, expect: dict[str, Any]) -> None:
    user = host.user()
    assert user.name == expect["user"]
    if expect["user"] != "root":
        assert {"video", "render"} <= set(user.groups), "a non-root user must reach /dev/kfd and /dev/dri"


def test_smoke_program_is_on_path(host: Any) -> None:
    assert host.run("torch-smoke --help").rc == 0


def test_toolchain_matches_flavor(host: Any, expect: dict[str, Any]) -> None:
    has_gcc = host.run("command -v gcc").rc == 0
    headers = host.file(f"/usr/include/python{expect['python']}/Python.h").exists
    if expect["flavor"] == "devel":
        assert has_gcc and headers, "devel images carry a compiler and Python headers for extensions"
    else:
        assert not has_gcc, "runtime images stay lean: no compiler"
