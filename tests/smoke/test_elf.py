"""torch_smoke.elf's reader on real files: libraries and executables compiled here with `cc` (their dynamic
sections checked against `readelf -d`), the system's libc.so.6, files cut short, files that are not ELF64 LE, and
the read caps (256 program headers, 1 MiB of dynamic section, 4096 bytes of a name) on files laid out as the System V
gABI's ELF64 (64-byte header, 56-byte program headers, 16-byte dynamic entries). Whole wheels' libraries are
compared in tests/smoke/test_libs_real_shape.py.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import elf

LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("readelf") is None,
                              reason="no C compiler or readelf")


def compile_c(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / name
    subprocess.run(["cc", "-o", str(out), str(src), *flags], check=True, capture_output=True)
    return out


def readelf(path: Path, tag: str) -> list[str]:
    """The bracketed values `readelf -d` prints for one tag (NEEDED, SONAME, RPATH, RUNPATH)."""
    out = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True, text=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if f"({tag})" in line]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return compile_c(tmp_path, "librif.so.1", "#include <math.h>\ndouble rif(double x) { return sqrt(x); }\n",
                     "-shared", "-fPIC", "-Wl,-soname,librif.so.1", "-Wl,--no-as-needed", "-lm",
                     "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib:/opt/rocm/lib")


@needs_cc
def test_a_compiled_library_reads_as_readelf_shows_it(library: Path) -> None:
    found = elf.dynamic(library)
    assert found is not None
    assert list(found.needed) == readelf(library, "NEEDED") and "libm.so.6" in found.needed
    assert found.soname == "librif.so.1" == readelf(library, "SONAME")[0]
    assert found.runpath == "$ORIGIN/../lib:/opt/rocm/lib" and found.rpath is None  # new dtags: DT_RUNPATH


@needs_cc
def test_the_old_rpath_is_read_as_rpath(tmp_path: Path) -> None:
    lib = compile_c(tmp_path, "libold.so", "int old(void) { return 1; }\n", "-shared", "-fPIC",
                    "-Wl,--disable-new-dtags", "-Wl,-rpath,/opt/rocm/lib")
    found = elf.dynamic(lib)
    assert found == elf.Dynamic(tuple(readelf(lib, "NEEDED")), None, "/opt/rocm/lib", None)


@needs_cc
def test_an_open_file_reads_the_same_as_the_path(library: Path) -> None:
    assert elf.read_dynamic(io.BytesIO(library.read_bytes())) == elf.dynamic(library) is not None


@needs_cc
def test_an_executable_names_its_loader_and_a_library_none(tmp_path: Path, library: Path) -> None:
    exe = compile_c(tmp_path, "main", "int main(void) { return 0; }\n")
    assert elf.interpreter(exe) == "/lib64/ld-linux-x86-64.so.2"
    assert elf.interpreter(library) is None


@needs_cc
def test_a_static_file_has_no_dynamic_section_and_no_loader(tmp_path: Path) -> None:
    static = compile_c(tmp_path, "static", "void _start(void) { for (;;) {} }\n", "-nostdlib", "-static")
    assert elf.dynamic(static) == elf.Dynamic((), None)
    assert elf.interpreter(static) is None


@pytest.mark.skipif(not LIBC.is_file(), reason="not a Debian/Ubuntu x86-64 system")
def test_the_systems_libc() -> None:
    found = elf.dynamic(LIBC)
    assert found is not None and found.soname == "libc.so.6" and "ld-linux-x86-64.so.2" in found.needed


def program_headers(data: bytes) -> list[tuple[int, int, int]]:
    """(p_type, p_offset, p_filesz) of each program header, read independently of the module."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    size, count = struct.unpack_from("<HH", data, 0x36)
    return [(t, o, n) for t, _, o, _, _, n in (struct.unpack_from("<IIQQQQ", data, phoff + i * size)
                                                for i in range(count))]


@needs_cc
def test_a_file_cut_short_is_none_never_an_error(tmp_path: Path, library: Path) -> None:
    data = library.read_bytes()
    dynamic_at = next(o for t, o, _ in program_headers(data) if t == 2)
    # no whole header; cut inside the program headers (read as static before: "no dependencies"); cut before or
    # inside PT_DYNAMIC
    for length in (0, 4, 63, 64, 64 + 56 + 8, dynamic_at, dynamic_at + 8):
        cut = tmp_path / f"cut{length}.so"
        cut.write_bytes(data[:length])
        assert elf.dynamic(cut) is None, length
        assert elf.interpreter(cut) is None


def test_files_that_are_not_elf64_little_endian_are_none(tmp_path: Path) -> None:
    header = bytearray(b"\x7fELF\x02\x01\x01" + b"\0" * 57)
    cases = {"text": b"Package: rif-a\n" * 10, "elf32": b"\x7fELF\x01" + bytes(header[5:]),
             "big-endian": b"\x7fELF\x02\x02" + bytes(header[6:]), "zip": b"PK\x03\x04" + bytes(60)}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert elf.dynamic(tmp_path / name) is None, name
        assert elf.interpreter(tmp_path / name) is None, name
    assert elf.dynamic(tmp_path / "missing") is None
    assert elf.dynamic(tmp_path) is None  # a folder


# -- the read caps, on hand-laid ELF64 files ---------------------------------------------------------------------------

VADDR = 0x400000


def laid_out(*, filler_headers: int = 0, filler_entries: int = 0, soname: bytes = b"librif.so.1",
             after_null: tuple[tuple[int, int], ...] = ()) -> bytes:
    """An ELF64 LE file: header, `filler_headers` PT_NOTE headers before PT_LOAD and PT_DYNAMIC, a string table, then
    a dynamic section of `filler_entries` DT_DEBUG entries before DT_NEEDED, DT_SONAME, DT_STRTAB and DT_NULL (and
    `after_null` entries past its end)."""
    phnum = filler_headers + 2
    strtab_at = 64 + 56 * phnum
    strings = b"\0libm.so.6\0" + soname + b"\0"
    dynamic_at = strtab_at + len(strings)
    entries = [(21, 0)] * filler_entries + [(1, 1), (14, 11), (5, VADDR + strtab_at), (0, 0), *after_null]
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)
    total = dynamic_at + len(dynamic)
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, phnum,
                                                             64, 0, 0)
    headers = [struct.pack("<IIQQQQQQ", 4, 4, 0, 0, 0, 0, 0, 8)] * filler_headers
    headers += [struct.pack("<IIQQQQQQ", 1, 4, 0, VADDR, VADDR, total, total, 0x1000),
                struct.pack("<IIQQQQQQ", 2, 4, dynamic_at, VADDR + dynamic_at, VADDR + dynamic_at, len(dynamic),
                            len(dynamic), 8)]
    return header + b"".join(headers) + strings + dynamic


def read(data: bytes) -> elf.Dynamic | None:
    return elf.read_dynamic(io.BytesIO(data))


def test_the_hand_laid_file_reads() -> None:
    assert read(laid_out()) == elf.Dynamic(("libm.so.6",), "librif.so.1")


def test_the_dynamic_section_ends_at_dt_null() -> None:
    """Entries past DT_NULL (padding, or planted) are not the file's: a DT_NEEDED there is not read."""
    assert read(laid_out(after_null=((1, 1), (14, 1)))) == elf.Dynamic(("libm.so.6",), "librif.so.1")


def test_program_headers_past_the_256th_are_not_read() -> None:
    assert read(laid_out(filler_headers=254)) == elf.Dynamic(("libm.so.6",), "librif.so.1")  # 256 in all
    assert read(laid_out(filler_headers=255)) == elf.Dynamic((), None)  # PT_DYNAMIC is the 257th: unseen


def test_a_dynamic_section_is_read_to_1_mib() -> None:
    """1 MiB is 65536 entries of 16 bytes; DT_STRTAB is the third of the four closing entries."""
    assert read(laid_out(filler_entries=65533)) == elf.Dynamic(("libm.so.6",), "librif.so.1")  # at 1048560
    assert read(laid_out(filler_entries=65534)) is None  # DT_STRTAB at byte 1048576: past the cap, no strings


def test_a_name_is_read_to_4096_bytes() -> None:
    assert read(laid_out(soname=b"l" * 4095)) == elf.Dynamic(("libm.so.6",), "l" * 4095)
    assert read(laid_out(soname=b"l" * 5000)) == elf.Dynamic(("libm.so.6",), "l" * 4096)


def test_a_name_that_is_not_utf8_is_none() -> None:
    assert read(laid_out(soname=b"lib\xff.so")) is None
