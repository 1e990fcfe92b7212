"""torch_smoke.wsl on fake /dev trees and /proc/version texts: WSL named by its device (/dev/dxg without /dev/kfd)
or by its kernel. The texts are real kernels' /proc/version lines: WSL 2's "microsoft-standard-WSL2" kernel, WSL 1's
"-Microsoft" one, and Ubuntu's and Debian's own. How diagnose() words it is in tests/smoke/test_diagnostics_host.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.smoke.torch_smoke import wsl

WSL2 = "Linux version 6.6.87.2-microsoft-standard-WSL2 (root@439a258ad544) (gcc (GCC) 11.2.0) #1 SMP PREEMPT_DYNAMIC"
WSL1 = "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) #1237-Microsoft"
UBUNTU = "Linux version 6.8.0-60-generic (buildd@lcy02-amd64-054) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.3.0)) #63-Ubuntu"
DEBIAN = "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14)) #1 SMP Debian"


@pytest.mark.parametrize(("text", "says"), [(WSL2, True), (WSL1, True), (WSL2.upper(), True), (UBUNTU, False),
                                            (DEBIAN, False), ("", False), (None, False)],
                         ids=["wsl2", "wsl1", "upper", "ubuntu", "debian", "empty", "unread"])
def test_the_kernel_names_itself(text: str | None, says: bool) -> None:
    assert wsl.kernel_says_wsl(text) is says


def devices(root: Path, *names: str) -> Path:
    dev = root / "dev"
    dev.mkdir()
    for name in names:
        (dev / name).touch()
    return dev


@pytest.mark.parametrize(("present", "kernel", "found"), [
    (("dxg",), UBUNTU, True),  # the device alone decides, whatever the kernel says
    (("dxg",), None, True),
    (("dxg", "kfd"), UBUNTU, False),  # a /dev/kfd: ROCm's own way in, not WSL's
    (("kfd",), UBUNTU, False),
    ((), UBUNTU, False),  # no GPU passed in: a Linux host, not WSL
    ((), WSL2, True),  # the kernel alone decides (dxg not passed into the container)
    (("dxg", "kfd"), WSL2, True),
    (("renderD128", "kfd"), DEBIAN, False),
])
def test_wsl_is_dxg_without_kfd_or_a_wsl_kernel(tmp_path: Path, present: tuple[str, ...], kernel: str | None,
                                                 found: bool) -> None:
    assert wsl.detect(devices(tmp_path, *present), kernel) is found


def test_a_dev_folder_that_is_not_there_is_not_wsl(tmp_path: Path) -> None:
    assert wsl.detect(tmp_path / "no-such-dev", UBUNTU) is False
    assert wsl.detect(tmp_path / "no-such-dev", WSL2) is True


def test_the_words_name_the_way_out() -> None:
    assert "/dev/dxg" in wsl.DETAIL and "/dev/kfd" in wsl.DETAIL
    assert "librocdxg" in wsl.WORKS and "--device=/dev/kfd" in wsl.WORKS
    assert "docs/hosts.md" in wsl.FIX and (Path(__file__).parents[2] / "docs" / "hosts.md").is_file()
