"""The closure of an apt step, resolved from a Packages index alone, as apt-get --no-install-recommends would."""

from __future__ import annotations

import pytest
from debian import deb822

from builder.core import aptindex
from builder.core.ospins import Source

PACKAGES = """\
Package: libc6
Version: 2.36-9
Architecture: amd64
Priority: required
SHA256: 1111111111111111111111111111111111111111111111111111111111111111

Package: python3
Version: 3.11.2-1
Architecture: amd64
Depends: libpython3 (>= 3.11), libc6, mime-support | media-types
Recommends: big-recommended
SHA256: 2222222222222222222222222222222222222222222222222222222222222222

Package: libpython3
Version: 3.10.0-1
Architecture: amd64
SHA256: 3333333333333333333333333333333333333333333333333333333333333333

Package: libpython3
Version: 3.11.4-1
Architecture: amd64
SHA256: 4444444444444444444444444444444444444444444444444444444444444444

Package: media-types
Version: 10.0.0
Architecture: all
Provides: mime-support

Package: ca-certificates
Version: 20230311
Architecture: all
Depends: openssl-virtual

Package: openssl
Version: 3.0.11-1
Architecture: amd64
Provides: openssl-virtual

Package: big-recommended
Version: 1
Architecture: amd64

Package: arm-only
Version: 1
Architecture: arm64
"""


def index() -> aptindex.Index:
    found = aptindex.Index()
    found.add(deb822.Packages.iter_paragraphs(PACKAGES.splitlines(keepends=True), use_apt_pkg=False))
    return found


def test_the_closure_is_every_dependency_at_its_newest_version_over_the_base() -> None:
    idx = index()
    pins = {p.name: (p.arch, p.version, p.sha256) for p in idx.closure(["python3", "ca-certificates"], idx.base_set())}
    # libc6 is in every base (required); the recommendation is not installed; a virtual name through its provider
    assert pins == {"python3": ("amd64", "3.11.2-1", "2" * 64), "libpython3": ("amd64", "3.11.4-1", "4" * 64),
                    "media-types": ("all", "10.0.0", ""), "ca-certificates": ("all", "20230311", ""),
                    "openssl": ("amd64", "3.0.11-1", "")}


def test_what_a_step_below_installed_is_not_installed_again() -> None:
    idx = index()
    below = {p.name for p in idx.closure(["python3"], idx.base_set())}
    assert {p.name for p in idx.closure(["ca-certificates", "python3"], idx.base_set() | below)} == {
        "ca-certificates", "openssl"}


@pytest.mark.parametrize(("wants", "message"), [(["arm-only"], "arm-only: not in the archive"),
                                                (["nothing"], "nothing: not in the archive")])
def test_a_package_the_archive_lacks_is_an_archive_error(wants: list[str], message: str) -> None:
    with pytest.raises(aptindex.ArchiveError, match=message):
        index().closure(wants, set())


def test_an_unmet_versioned_dependency_is_an_archive_error() -> None:
    idx = index()
    idx.add(deb822.Packages.iter_paragraphs(["Package: tool\n", "Version: 1\n", "Architecture: all\n",
                                             "Depends: libpython3 (>= 4)\n"], use_apt_pkg=False))
    with pytest.raises(aptindex.ArchiveError, match="tool 1 depends on libpython3"):
        idx.closure(["tool"], set())


def test_the_same_sources_are_read_once_per_process_and_forget_reads_them_again() -> None:
    """A lock refresh of every combination reads each OS's indexes once: its cost grows with the OSes. Each folder
    is read with the fetch the caller hands in (the lock's bounded aptfetch.fetch), here a recording one."""
    fetched: list[str] = []

    def fetch(folder: str) -> str:
        fetched.append(folder)
        return "Package: rif-a\nVersion: 1.0\nArchitecture: all\nSHA256: " + "a" * 64 + "\n"

    aptindex.forget()
    one = (Source("http://127.0.0.1:9/20261101T000000Z/", "bookworm", ("main",)),)
    other = (Source("http://127.0.0.1:9/20261102T000000Z/", "bookworm", ("main",)),)
    first = aptindex.load(one, fetch)
    assert aptindex.load(one, fetch) is first and aptindex.load(list(one), fetch) is first
    assert len(fetched) == 1
    aptindex.load(other, fetch)
    assert len(fetched) == 2, "another snapshot is read"
    for n in range(aptindex.KEPT_INDEXES):
        aptindex.load((Source(f"http://127.0.0.1:9/2026110{n}T120000Z/", "bookworm", ("main",)),), fetch)
    aptindex.load(one, fetch)
    assert len(fetched) == 3 + aptindex.KEPT_INDEXES, "the oldest was let go: at most KEPT_INDEXES are kept"
    aptindex.forget()
    aptindex.load(one, fetch)
    assert len(fetched) == 4 + aptindex.KEPT_INDEXES
