"""The few fields of an ELF file that `libs` reads itself: DT_NEEDED, DT_SONAME, PT_INTERP.

Read with seeks, never the whole file (libtorch_hip.so is over a gigabyte); 64-bit little-endian files only,
the others are None (the loader still judges them).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_HEADERS = 256  # program headers read
MAX_DYNAMIC = 1 << 20  # bytes of the dynamic segment read
MAX_NAME = 4096  # bytes of one string


@dataclass(frozen=True)
class Dynamic:
    needed: tuple[str, ...]
    soname: str | None
    rpath: str | None = None  # DT_RPATH (the old kind, also searched for the libraries it loads)
    runpath: str | None = None  # DT_RUNPATH (searched for its own NEEDED only)


def _segments(fh: BinaryIO) -> tuple[list[tuple[int, int, int]], dict[int, tuple[int, int]]] | None:
    """(PT_LOAD (vaddr, offset, size) list, other segments by type -> (offset, size)), or None if not ELF64 LE."""
    head = fh.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    if phentsize < 56:
        return None
    fh.seek(phoff)
    table = fh.read(phentsize * min(phnum, MAX_HEADERS))
    if len(table) < phentsize * min(phnum, MAX_HEADERS):
        return None  # a file cut short, not a static one: its program headers are missing
    loads: list[tuple[int, int, int]] = []
    others: dict[int, tuple[int, int]] = {}
    for at in range(0, len(table) - 55, phentsize):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", table, at)
        if p_type == 1:  # PT_LOAD
            loads.append((p_vaddr, p_offset, p_filesz))
        else:
            others.setdefault(p_type, (p_offset, p_filesz))
    return loads, others


def _string(fh: BinaryIO, offset: int) -> str:
    fh.seek(offset)
    raw = fh.read(MAX_NAME)
    return raw.split(b"\0", 1)[0].decode()


def dynamic(path: Path) -> Dynamic | None:
    """The file's own DT_NEEDED sonames and its DT_SONAME, or None when it cannot be read."""
    try:
        with path.open("rb") as fh:
            return read_dynamic(fh)
    except OSError:
        return None


def read_dynamic(fh: BinaryIO) -> Dynamic | None:
    """dynamic() of an open file (a wheel's member, in the tests that compare fixtures with real wheels)."""
    try:
        found = _segments(fh)
        if found is None:
            return None
        loads, others = found
        if 2 not in others:  # PT_DYNAMIC
            return Dynamic((), None)
        offset, size = others[2]
        fh.seek(offset)
        data = fh.read(min(size, MAX_DYNAMIC))
        needed: list[int] = []
        names: dict[int, int] = {}  # DT_SONAME, DT_RPATH, DT_RUNPATH -> string offset
        strtab = None
        for at in range(0, len(data) - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                needed.append(value)
            elif tag in (14, 15, 29):  # DT_SONAME, DT_RPATH, DT_RUNPATH
                names[tag] = value
            elif tag == 5:  # DT_STRTAB, a virtual address
                strtab = next((value - v + o for v, o, n in loads if v <= value < v + n), None)
        if strtab is None:
            return None
        text = {tag: _string(fh, strtab + n) for tag, n in names.items()}
        return Dynamic(tuple(_string(fh, strtab + n) for n in needed), text.get(14), text.get(15), text.get(29))
    except (OSError, ValueError, struct.error, UnicodeDecodeError):
        return None


def interpreter(path: Path) -> str | None:
    """PT_INTERP: the dynamic loader this executable runs under (the one that loads torch)."""
    try:
        with path.open("rb") as fh:
            found = _segments(fh)
            if found is None or 3 not in found[1]:
                return None
            offset, size = found[1][3]
            fh.seek(offset)
            return fh.read(min(size, MAX_NAME)).split(b"\0", 1)[0].decode() or None
    except (OSError, ValueError, struct.error, UnicodeDecodeError):
        return None
