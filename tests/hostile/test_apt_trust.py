"""Whom apt trusts unsigned is the person running the command's to say, never a lock's or a lock record's.

A lock (os-*.txt in a checkout, or one inside a lock record a registry serves) that says `trusted: yes` for an archive
off this machine's loopback is refused (exit 2, file and line); where it says so for a loopback archive, the render
trusts it only with RIF_APT_SNAPSHOT_TRUSTED=yes; RIF_APT_SNAPSHOT_TRUSTED=yes with a mirror off the loopback is
refused. Security properties are asserted on the rendered Dockerfile's apt sources.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import ospins
from builder.core.errors import InputError
from builder.core.osfamilies import apt
from builder.render import lockrecord, oslock
from testkit.matrices import load_cells, write_matrix
from tests.fakes.aptarchive import T1, served
from tests.render.test_oslock import MATRIX, fake_wheel_locks, lock_all

PUBLIC = "http://203.0.113.7/debian"  # TEST-NET-3: an address off the loopback, never contacted
GROUP = "cpu_debian12_py3.11_torch2.14.1"
__all__ = ["served"]  # the archive fixture, used by name


@pytest.fixture
def tree(tmp_path: Path, served: str) -> Path:
    """A locked tree whose OS locks say `trusted: yes` for the loopback archive they were made from."""
    cells, out = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    fake_wheel_locks(out, cells)
    lock_all(out, cells, oslock.Snapshot(served, T1, trusted=True), update=False)
    return out


def render(tmp_path: Path, tree: Path, trusted: str | None = None) -> tuple[int, str]:
    env = {"RIF_APT_SNAPSHOT_TRUSTED": trusted} if trusted is not None else {}
    run = CliRunner().invoke(app, ["render", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out", str(tree),
                                   "--locked"], env=env)
    return run.exit_code, run.output


def sources(tree: Path) -> list[str]:
    """The apt source lines of the debian-12 combination's Dockerfile (each `deb [...] URL SUITE COMPONENT`)."""
    return re.findall(r"'deb \[[^]]*\] \S+ \S+ \S+'", (tree / GROUP / "Dockerfile").read_text())


def test_a_loopback_lock_is_trusted_only_when_the_command_says_so(tmp_path: Path, tree: Path, served: str) -> None:
    code, output = render(tmp_path, tree)
    assert code == 0, output
    assert sources(tree) and all("trusted=yes" not in s for s in sources(tree)), sources(tree)
    code, output = render(tmp_path, tree, "yes")
    assert code == 0, output
    assert sources(tree) and all(f"trusted=yes] {served}/" in s for s in sources(tree)), sources(tree)


def test_a_lock_that_says_untrusted_stays_untrusted_whatever_the_command_allows(tmp_path: Path, tree: Path) -> None:
    for lock in (tree / GROUP / "lock").glob("os-*.txt"):
        lock.write_text(lock.read_text().replace("trusted: yes", "trusted: no"))
    code, output = render(tmp_path, tree, "yes")
    assert code == 0, output
    assert sources(tree) and all("trusted=yes" not in s for s in sources(tree)), sources(tree)


def test_a_checkout_lock_trusting_an_archive_off_the_loopback_is_refused_naming_file_and_line(
        tmp_path: Path, tree: Path, served: str) -> None:
    path = tree / GROUP / "lock" / "os-base.txt"
    path.write_text(path.read_text().replace(served, PUBLIC))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("source:"))
    before = (tree / GROUP / "Dockerfile").read_bytes() if (tree / GROUP / "Dockerfile").exists() else None
    code, output = render(tmp_path, tree, "yes")
    assert code == 2, output
    assert f"os-base.txt:{line}: source:" in output and "203.0.113.7" in output and "loopback" in output
    after = (tree / GROUP / "Dockerfile").read_bytes() if (tree / GROUP / "Dockerfile").exists() else None
    assert after == before  # nothing written on a refusal


def test_the_same_archive_untrusted_renders_with_apts_own_signature_check(tmp_path: Path, tree: Path,
                                                                          served: str) -> None:
    for lock in (tree / GROUP / "lock").glob("os-*.txt"):
        lock.write_text(lock.read_text().replace(served, PUBLIC).replace("trusted: yes", "trusted: no"))
    code, output = render(tmp_path, tree, "yes")
    assert code == 0, output
    assert any(f"] {PUBLIC}/{T1}/ bookworm main" in s for s in sources(tree))
    assert all("trusted=yes" not in s for s in sources(tree)), sources(tree)


def test_a_lock_record_trusting_an_archive_off_the_loopback_is_a_bad_lock_not_a_rebuild(tree: Path,
                                                                                        served: str) -> None:
    files = {name.name: name.read_text() for name in (tree / GROUP / "lock").iterdir()}
    files["os-base.txt"] = files["os-base.txt"].replace(served, PUBLIC)
    body = json.dumps({"schemaVersion": 1, "files": files}, sort_keys=True, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    with pytest.raises(InputError) as caught:  # exit 2 in every command (handles_errors), never RecordError's 1
        lockrecord.parse(body, digest, "127.0.0.1:5000/rocm/pytorch:x: its lock record")
    assert isinstance(caught.value, ospins.TrustError)
    [problem] = caught.value.problems
    assert "its lock record: os-base.txt" in str(problem.file) and problem.line == 7 and "loopback" in problem.message


def test_a_lock_record_trusting_a_loopback_archive_is_read_and_narrowed_by_the_render(served: str) -> None:
    lock = ospins.OsLock("debian-12", ("python3",), T1, (ospins.Source(f"{served}/{T1}/", "bookworm", ("main",)),),
                         (ospins.Package("python3", "all", "3.11.2-1", "a" * 64),), trusted=True)
    [narrow] = oslock.narrowed({"os-base.txt": lock}, trusted=False).values()
    assert not any("trusted=yes" in c for c in apt.pinned_install_commands(narrow))
    [kept] = oslock.narrowed({"os-base.txt": lock}, trusted=True).values()
    assert any("trusted=yes" in c for c in apt.pinned_install_commands(kept))


@pytest.mark.parametrize("mirror", [PUBLIC, None, "http://127.0.0.1.nip.io:8127", "http://[::2]:8127",
                                    "http://2130706433:8127"])
def test_trusted_yes_with_a_mirror_off_the_loopback_is_refused(tmp_path: Path, mirror: str | None) -> None:
    """None: the OS's own snapshot service (no --apt-snapshot, no RIF_APT_SNAPSHOT)."""
    args = ["lock", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out", str(tmp_path / "tree")]
    run = CliRunner().invoke(app, args + (["--apt-snapshot", mirror] if mirror else []),
                             env={"RIF_APT_SNAPSHOT_TRUSTED": "yes", "RIF_APT_SNAPSHOT": None})
    assert run.exit_code == 2, run.output
    assert "RIF_APT_SNAPSHOT_TRUSTED" in run.output and "loopback" in run.output
    assert not (tmp_path / "tree").exists()


@pytest.mark.parametrize("value", ["true", "1", "YES", "yes please"])
def test_a_trust_setting_other_than_yes_or_no_is_a_usage_error(tmp_path: Path, tree: Path, value: str) -> None:
    code, output = render(tmp_path, tree, value)
    assert code == 2 and "RIF_APT_SNAPSHOT_TRUSTED" in output, output


def test_no_lock_object_trusts_an_archive_off_the_loopback() -> None:
    source = ospins.Source(f"{PUBLIC}/{T1}/", "bookworm", ("main",))
    with pytest.raises(ValueError, match="loopback"):
        ospins.OsLock("debian-12", ("python3",), T1, (source,), (), trusted=True)
    signed = ospins.Source("https://repo.radeon.com/rocm/apt/7.2.1/", "noble", ("main",), apt.KEYRING)
    assert ospins.OsLock("ubuntu-24.04", ("curl",), T1, (signed,), (), trusted=True).trusted  # a key checks it


def test_the_unpinned_check_stops_the_step(tmp_path: Path) -> None:
    """The step that refuses a package the lock does not pin is fatal: run as the Dockerfile runs it (sh -e,
    joined by &&), it exits non-zero when apt planned an unpinned package and zero when it did not."""
    lock = ospins.OsLock("debian-12", ("python3",), T1, (ospins.Source(f"http://127.0.0.1:9/{T1}/", "bookworm",
                                                                       ("main",)),),
                         (ospins.Package("python3", "all", "3.11.2-1", "a" * 64),))
    commands = apt.pinned_install_commands(lock)
    [check] = [c for c in commands if "unpinned ]" in c]
    assert commands.index(check) < next(i for i, c in enumerate(commands) if c.endswith("install -y "
                                                                                      "--no-install-recommends "
                                                                                      "python3=3.11.2-1"))
    script = check.replace("/var/cache/apt/rif-snapshot", str(tmp_path)) + " && echo installed"
    (tmp_path / "unpinned").write_text("libevil=1.0\n")
    refused = subprocess.run(["sh", "-ec", script], capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and "installed" not in refused.stdout
    assert "apt would install packages the lock does not pin" in refused.stderr and "libevil=1.0" in refused.stderr
    (tmp_path / "unpinned").write_text("")
    passed = subprocess.run(["sh", "-ec", script], capture_output=True, text=True, check=False)
    assert passed.returncode == 0 and "installed" in passed.stdout


def test_the_rendered_step_runs_the_check_between_the_simulation_and_the_install(tmp_path: Path,
                                                                                 tree: Path) -> None:
    code, output = render(tmp_path, tree, "yes")
    assert code == 0, output
    text = (tree / GROUP / "Dockerfile").read_text().replace(" \\\n && ", " && ")
    check = ("if [ -s /var/cache/apt/rif-snapshot/unpinned ]; then echo 'apt would install packages the lock does "
             f"not pin (snapshot {T1}):' >&2; cat /var/cache/apt/rif-snapshot/unpinned >&2; exit 1; fi && ")
    assert text.count(check) == 2, "the base and devel steps each check before they install"
    assert "|| true" not in text and "; exit 0" not in text
