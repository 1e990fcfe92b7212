"""Do torch's shared libraries load: every dependency of every .so resolves in the loader's view (no GPU needed).

The loader is asked, not guessed: `ldd FILE`, or where the image lacks ldd, the dynamic loader itself
(`/lib64/ld-linux-x86-64.so.2 --list FILE`); both print one `soname => path` line per dependency and
`soname => not found` for one the loader cannot find. A missing soname is blamed on the libraries that
name it in their own DT_NEEDED (read from the ELF file), not on every library that depends on them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import apptainer
from .core import Fail, Outcome, Skip
from .smoke import Check, Smoke

PACKAGES = ("torch", "torchvision", "torchaudio")
# The dynamic loader, where `ldd` (a script from libc-bin) is not installed.
LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-x86-64.so.2")
BUDGET_S = 90.0  # all the libraries together, under the runner's 120 s limit for a check
CALL_TIMEOUT_S = 20.0  # one ldd call
WORKERS = 4
# soname -> the Debian/Ubuntu package that ships it (same name in both). Sources, one page per package:
# https://packages.debian.org/bookworm/libgomp1, https://packages.debian.org/bookworm/libnuma1,
# https://packages.debian.org/bookworm/libdrm2, https://packages.debian.org/bookworm/libelf1,
# https://packages.debian.org/bookworm/libstdc++6, https://packages.debian.org/bookworm/libgfortran5,
# https://packages.debian.org/bookworm/libtinfo6, https://packages.debian.org/bookworm/libatomic1,
# https://packages.debian.org/bookworm/libdrm-amdgpu1, https://packages.debian.org/bookworm/zlib1g,
# https://packages.ubuntu.com/noble/libgomp1 (and the same names on packages.ubuntu.com for jammy/noble;
# trixie renames libelf1 to libelf1t64 and libtinfo6 keeps its name: https://packages.debian.org/trixie/libelf1t64).
SONAME_PACKAGES = {
    "libgomp.so.1": "libgomp1",
    "libnuma.so.1": "libnuma1",
    "libdrm.so.2": "libdrm2",
    "libdrm_amdgpu.so.1": "libdrm-amdgpu1",
    "libelf.so.1": "libelf1",
    "libstdc++.so.6": "libstdc++6",
    "libgfortran.so.5": "libgfortran5",
    "libtinfo.so.6": "libtinfo6",
    "libatomic.so.1": "libatomic1",
    "libz.so.1": "zlib1g",
}
NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")
# A dependency the loader takes from the host's libraries that apptainer --rocm binds (first on LD_LIBRARY_PATH).
HOST_BOUND = re.compile(r"^\s*(\S+)\s+=>\s+(" + re.escape(apptainer.HOST_LIBS) + r"/\S+)", re.MULTILINE)
SHOWN = 3  # libraries named per missing soname before "and N more"

Runner = Callable[[Sequence[str], float], tuple[int, str]]  # (argv, timeout) -> (exit code, stdout + stderr)


def run_tool(argv: Sequence[str], timeout: float) -> tuple[int, str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "LC_ALL": "C"})
    return proc.returncode, proc.stdout + proc.stderr


def missing_sonames(output: str) -> list[str]:
    """`ldd`/`ld.so --list` output -> the sonames it reports as `not found`, once each, in order."""
    found = (m.group(1) for m in map(NOT_FOUND.match, output.splitlines()) if m)
    return list(dict.fromkeys(found))


def list_command(which: Callable[[str], str | None] = shutil.which,
                 exists: Callable[[str], bool] = os.path.exists) -> list[str] | None:
    """How to ask the loader: ['ldd'] where present, else [LOADER, '--list']; None when neither exists."""
    ldd = which("ldd")
    if ldd:
        return [ldd]
    loader = next((p for p in LOADERS if exists(p)), None)
    return [loader, "--list"] if loader else None


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def shared_objects(folder: Path) -> list[Path]:
    """Every ELF shared object under folder (`libx.so`, `libx.so.1`, `_C.cpython-311-x86_64-linux-gnu.so`)."""
    found = (p for p in folder.rglob("*.so*") if p.is_file() and not p.is_symlink() and is_elf(p)
             and (p.name.endswith(".so") or ".so." in p.name))
    return sorted(found)


def elf_needed(path: Path) -> list[str] | None:
    """The file's own DT_NEEDED sonames (64-bit little-endian ELF), or None when it cannot be read."""
    try:
        data = path.read_bytes()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return None
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads, dynamic = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:  # PT_LOAD
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:  # PT_DYNAMIC
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return []
        needed, strtab = [], None
        for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                needed.append(value)
            elif tag == 5:  # DT_STRTAB, a virtual address
                strtab = next((value - v + o for v, o, size in loads if v <= value < v + size), None)
        if strtab is None:
            return None
        return [data[strtab + n:data.index(b"\0", strtab + n)].decode() for n in needed]
    except (OSError, ValueError, struct.error, IndexError, UnicodeDecodeError):
        return None


def package_folders() -> dict[str, Path]:
    """name -> installed package folder, found without importing (a library that does not load is the point)."""
    folders = {}
    for name in PACKAGES:
        module = sys.modules.get(name)
        location = getattr(module, "__file__", None) if module is not None else None
        if location is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            location = spec.origin if spec is not None else None
        if location:
            folders[name] = Path(location).parent
    return folders


@dataclass
class Scan:
    """What the loader said about a set of libraries."""

    checked: int = 0
    unlisted: list[Path] = field(default_factory=list)  # the loader refused them (static, other arch)
    missing: dict[str, list[Path]] = field(default_factory=dict)  # soname -> libraries that need it
    host_bound: dict[str, str] = field(default_factory=dict)  # soname -> the host's copy it resolved to
    timed_out: bool = False


def scan(files: Iterable[Path], command: Sequence[str], run: Runner = run_tool, budget: float = BUDGET_S) -> Scan:
    """Ask the loader about each file, WORKERS at a time, until the time budget is spent."""
    result, deadline = Scan(), time.monotonic() + budget

    def one(path: Path) -> tuple[Path, int, str] | None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            code, out = run([*command, str(path)], min(CALL_TIMEOUT_S, left))
        except subprocess.TimeoutExpired:
            return None
        return path, code, out

    with ThreadPoolExecutor(WORKERS) as pool:
        for answer in pool.map(one, list(files)):
            if answer is None:
                result.timed_out = True
                continue
            path, code, out = answer
            result.checked += 1
            gone = missing_sonames(out)
            if code != 0 and not gone:
                result.unlisted.append(path)
            for soname in gone:
                result.missing.setdefault(soname, []).append(path)
            result.host_bound.update(HOST_BOUND.findall(out))
    return result


def blamed(soname: str, needers: list[Path]) -> list[Path]:
    """The libraries that need the soname themselves; the others only load one of them."""
    direct = [p for p in needers if soname in (elf_needed(p) or [soname])]
    return direct or needers


def describe(missing: dict[str, list[Path]], base: Path) -> tuple[str, str]:
    """(detail, fix) of a failure: each missing soname, who needs it, and the package that provides it."""
    parts, packages, unknown = [], [], []
    for soname, needers in missing.items():
        names = [str(p.relative_to(base)) if p.is_relative_to(base) else str(p) for p in blamed(soname, needers)]
        shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
        package = SONAME_PACKAGES.get(soname)
        parts.append(f"{soname} (needed by {shown}; " + (f"package {package})" if package else "package unknown)"))
        if package:
            packages.append(package)
        else:
            unknown.append(soname)
    fix = (f"apt-get install -y --no-install-recommends {' '.join(dict.fromkeys(packages))} in a derived image"
           if packages else "")
    if unknown:
        fix += ("; " if fix else "") + (f"find the package that ships {', '.join(unknown)} "
                                        "(`apt-file search SONAME`) and install it in a derived image")
    fix += "; or report the image: its wheels should bundle what they need"
    return "not found by the loader: " + "; ".join(parts), fix


def libs(s: Smoke, run: Runner = run_tool, command: Sequence[str] | None = None) -> str | Outcome:
    """Every shared object in torch's lib/ (and torchvision's, torchaudio's folders) resolves its dependencies."""
    folders = package_folders()
    if "torch" not in folders:
        raise Fail("torch is not installed: no libraries to check",
                   "the image's /opt/venv is broken or was built from the wrong wheels: rebuild the image")
    lib = folders["torch"] / "lib"
    if not lib.is_dir():
        raise Fail(f"torch at {folders['torch']} has no lib/ folder",
                   "the image's /opt/venv is broken or was built from the wrong wheels: rebuild the image")
    files = [*shared_objects(lib), *(f for n in PACKAGES[1:] if n in folders for f in shared_objects(folders[n]))]
    if not files:
        raise Fail(f"no shared objects under {lib}", "the torch install is incomplete: rebuild the image")
    command = command or list_command()
    if command is None:
        raise Skip("neither ldd nor the dynamic loader (" + ", ".join(LOADERS) + ") is in this image")
    result = scan(files, command, run)
    where = ", ".join(f"{n}" for n in folders)
    if result.missing:
        detail, fix = describe(result.missing, folders["torch"].parent)
        raise Fail(f"{len(result.missing)} soname(s) {detail}", fix)
    if result.host_bound:
        found = ", ".join(f"{name} from {where}" for name, where in sorted(result.host_bound.items())[:SHOWN])
        more = len(result.host_bound) - SHOWN
        return Outcome("warn", f"{len(result.host_bound)} of torch's libraries resolve from the host's "
                       f"{apptainer.HOST_LIBS} (apptainer --rocm), not from this image: {found}"
                       + (f" and {more} more" if more > 0 else ""), apptainer.LIBS_FIX)
    tool = "ldd" if Path(command[0]).name == "ldd" else f"{command[0]} --list"
    done = f"{result.checked} of {len(files)} shared objects ({where}) resolve every dependency ({tool})"
    if result.timed_out:
        return Outcome("warn", f"{done}; the rest were not checked within {BUDGET_S:g} s",
                       "rerun torch-smoke on a less loaded machine")
    return done.replace(f"{result.checked} of {len(files)}", str(result.checked), 1)


CHECKS: dict[str, Check] = {"libs": libs}
