"""dnf (builder/core/osfamilies/dnf.py): a Rocky Linux 9 combination renders with dnf steps only, and lints."""

from __future__ import annotations

import subprocess
from pathlib import Path

from builder.core.osfamilies import dnf
from builder.matrix.expand import expand_matrix
from builder.render.dockerfile import render_all
from tests.fakes import checkout
from tests.fakes.checkout import ROOT

ROCKY = """\
image: pytorch
matrix:
  os: [rocky-9]
  platform: [cpu]
  torch:
    - {version: "2.8.0", torchvision: null, torchaudio: null}
  flavor: [runtime, devel]
"""


def rocky_dockerfile(tmp_path: Path) -> str:
    matrix = tmp_path / "rocky.yaml"
    matrix.write_text(ROCKY)
    [first, second] = render_all(expand_matrix(matrix).cells)
    assert first.dockerfile == second.dockerfile  # one combination: runtime and devel are targets of one file
    return first.dockerfile


def test_a_rocky_9_combination_renders_with_dnf_and_no_apt(tmp_path: Path) -> None:
    text = rocky_dockerfile(tmp_path)
    assert "FROM rockylinux:9 AS base" in text
    assert "dnf install -y --setopt=install_weak_deps=False --setopt=keepcache=True --nodocs python3 ca-certificates" \
        in text
    assert "--mount=type=cache,id=rif-dnf-rocky-9,target=/var/cache/dnf,sharing=locked" in text
    assert "python3-devel git" in text  # the devel stage's toolchain, from dnf's own names
    assert "apt-get" not in text and "/var/lib/apt" not in text
    assert "dnf remove" not in text  # python3-libs needs the wheels ensurepip uses: nothing to remove


def test_the_rocky_9_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    hadolint = checkout.hadolint()
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(rocky_dockerfile(tmp_path))
    proc = subprocess.run([hadolint, "--config", str(ROOT / ".hadolint.yaml"), "--no-color", str(dockerfile)],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dnf_steps_and_inventory() -> None:
    assert dnf.install_commands(["a", "b"]) == ["dnf install -y --setopt=install_weak_deps=False "
                                                "--setopt=keepcache=True --nodocs a b"]
    assert dnf.remove_command(["a"]) == "dnf remove -y a"
    assert dnf.cleanup_command().startswith(f"rm -rf {dnf.LISTS_DIR} ")
    assert dnf.INVENTORY[:2] == ("rpm", "-qa") and dnf.PURL_TYPE == "rpm"
    assert dnf.BASE_TOOL is None and dnf.SDK is None and dnf.PINNED_INSTALL is None and dnf.PACKAGE_INDEX is None
    assert dnf.install_fix(["numactl"]) == "dnf install -y numactl"
