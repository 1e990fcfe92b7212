"""What every image must be, checked from inside a running container of it."""

from __future__ import annotations

from typing import Any

import pytest

from builder.core import osfamilies
from builder.core.tags import CELL_FILE, labels_against_cell

VENV = "/opt/venv"
PY = VENV + "/bin/python3"
ROCM = "/opt/rocm"
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
    wrong = labels_against_cell(image_labels, expect)
    assert not wrong, f"labels that disagree with the image's {CELL_FILE}: {', '.join(wrong)}"


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


# -- Apptainer-proof: clusters run the image read-only, as any uid, with no /root and the config's environment ----

def _private(value: str) -> bool:
    """A path under a home folder: Apptainer binds the user's own home there, or an empty one (--containall)."""
    return any(part == "/root" or part.startswith(("/root/", "/home/")) for part in value.split(":"))


def test_environment_comes_from_the_image_config(image_config: dict[str, Any]) -> None:
    env = dict(item.split("=", 1) for item in image_config.get("Env") or [])
    assert env.get("VIRTUAL_ENV") == VENV, "Apptainer (docker://) takes VIRTUAL_ENV from the image config"
    path = env.get("PATH", "").split(":")
    assert VENV + "/bin" in path, f"the venv is not on the config's PATH: {env.get('PATH')}"
    private = sorted(f"{key}={value}" for key, value in env.items() if _private(value))
    assert not private, f"the config's environment needs a home folder, which Apptainer replaces: {private}"
    command = [*(image_config.get("Entrypoint") or []), *(image_config.get("Cmd") or [])]
    assert not any(_private(word) for word in command), f"the entrypoint or command lives under a home: {command}"


def test_rocm_variables_come_from_the_image_config(host: Any, image_config: dict[str, Any]) -> None:
    env = dict(item.split("=", 1) for item in image_config.get("Env") or [])
    if not host.file(ROCM).is_directory:
        assert "ROCM_HOME" not in env, f"ROCM_HOME={env['ROCM_HOME']} names no ROCm in the image"
        return
    assert env.get("ROCM_HOME") == ROCM and env.get("ROCM_PATH") == ROCM, "the image's ROCm is not in its config"
    assert ROCM + "/bin" in env.get("PATH", "").split(":"), "the image's ROCm tools are not on the config's PATH"


def test_nothing_needed_lives_under_a_home_folder(host: Any) -> None:
    program = host.check_output("readlink -f \"$(command -v torch-smoke)\"")
    python = host.check_output(f"readlink -f {PY}")
    paths = host.check_output(PY + " -c 'import sys; print(\":\".join(p for p in sys.path if p))'")
    private = [p for p in (program, python, *paths.split(":")) if _private(p)]
    assert not private, f"needed at run time but under /root or /home (Apptainer replaces them): {private}"
