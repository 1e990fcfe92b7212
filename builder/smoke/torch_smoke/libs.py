"""Do torch's shared libraries load: every dependency of every .so resolves as torch's own process loads it.

The wheels rely on the process: torchvision's and torchaudio's extensions name libc10.so with no RUNPATH, and
TheRock's torch preloads its ROCm libraries from the rocm_sdk packages (loaded.py says how the process is
reproduced). The loader is asked, not guessed: the dynamic loader of this Python, in trace mode (what ldd runs),
with the libraries of a process that imported torch preloaded. It prints `soname => path` per dependency and
`soname => not found` for one it cannot find, and runs nothing. A missing soname is blamed on the libraries that
name it in their own DT_NEEDED, not on every library that depends on them; a file the loader refuses (another
architecture, not a shared object, a symbol version missing) is reported with the loader's words.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import apptainer, elf, loaded
from .core import Fail, Outcome, Skip
from .loaded import VERSION, missing_sonames, refusal
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
# A dependency the loader takes from the host's libraries that apptainer --rocm binds (first on LD_LIBRARY_PATH).
HOST_BOUND = re.compile(r"^\s*(\S+)\s+=>\s+(" + re.escape(apptainer.HOST_LIBS) + r"/\S+)", re.MULTILINE)
SHOWN = 3  # libraries named per missing soname before "and N more"
CHILD_TIMEOUT_S = 60.0  # the child's imports, out of BUDGET_S
SHIPPED_DEPTH = ("*/{}", "*/lib/{}", "*/lib/*/lib/{}", "*.libs/{}")  # where site-packages may hold a soname

Runner = Callable[[Sequence[str], float], tuple[int, str]]  # (argv, timeout) -> (exit code, stdout + stderr)
EnvRunner = Callable[[Sequence[str], float, Mapping[str, str]], tuple[int, str]]
ContextLoader = Callable[[float], loaded.Context]


def run_tool(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                          env=dict(env) if env is not None else {**os.environ, "LC_ALL": "C"},
                          errors="replace")
    return proc.returncode, proc.stdout + proc.stderr


def list_command(interp: str | None = None, exists: Callable[[str], bool] = os.path.exists) -> list[str] | None:
    """The dynamic loader that runs this Python (its PT_INTERP), else the first of LOADERS; None if neither.
    Never ldd: it is a shell script, and the preloads would load into the shell for real."""
    interp = interp if interp is not None else elf.interpreter(Path(os.path.realpath(sys.executable)))
    loader = interp if interp and exists(interp) else next((p for p in LOADERS if exists(p)), None)
    return [loader] if loader else None


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
    found = elf.dynamic(path)
    return list(found.needed) if found is not None else None


def preloads(mapped: Iterable[str]) -> list[str]:
    """The mapped files a DT_NEEDED can match: libraries with a soname (extension modules have none)."""
    return [p for p in mapped if (d := elf.dynamic(Path(p))) is not None and d.soname]


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
    refused: dict[Path, str] = field(default_factory=dict)  # the loader would not load them: its words
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
            gone = missing_sonames(out, path)
            if (code != 0 and not gone) or VERSION.search(out):
                result.refused[path] = refusal(out)
            for soname in gone:
                result.missing.setdefault(soname, []).append(path)
            result.host_bound.update(HOST_BOUND.findall(out))
    return result


def blamed(soname: str, needers: list[Path]) -> list[Path]:
    """The libraries that need the soname themselves; the others only load one of them."""
    direct = [p for p in needers if soname in (elf_needed(p) or [soname])]
    return direct or needers


def shipped(soname: str, site: Path) -> Path | None:
    """A file of that name in another installed package (TheRock's _rocm_sdk_core/lib): shipped, not loaded."""
    for pattern in SHIPPED_DEPTH:
        found = next((p for p in site.glob(pattern.format(soname)) if p.is_file()), None)
        if found is not None:
            return found
    return None


def shown(paths: Sequence[Path], base: Path) -> str:
    names = [str(p.relative_to(base)) if p.is_relative_to(base) else str(p) for p in paths]
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def describe(missing: dict[str, list[Path]], base: Path) -> tuple[str, str]:
    """(detail, fix) of a failure: each missing soname, who needs it, and the package that provides it (or the
    installed package that ships it without anything loading it first)."""
    parts, packages, unknown, unloaded = [], [], [], []
    for soname, needers in missing.items():
        package, there = SONAME_PACKAGES.get(soname), shipped(soname, base)
        where = (f"shipped in {shown([there], base)} but not loaded: nothing preloads it and no RUNPATH leads "
                 "there" if there else f"package {package}" if package else "package unknown")
        parts.append(f"{soname} (needed by {shown(blamed(soname, needers), base)}; {where})")
        if there:
            unloaded.append(soname)
        elif package:
            packages.append(package)
        else:
            unknown.append(soname)
    fixes = ([f"apt-get install -y --no-install-recommends {' '.join(dict.fromkeys(packages))} in a derived image"]
             if packages else [])
    if unknown:
        fixes.append(f"find the package that ships {', '.join(unknown)} (`apt-file search SONAME`) and install it "
                     "in a derived image")
    if unloaded:
        fixes.append(f"{', '.join(unloaded)}: install the ROCm packages (rocm_sdk) the torch wheel was built for, "
                     "whose preload list (torch/_rocm_init.py) names it")
    fixes.append("or report the image: its wheels should bundle what they need")
    return "not found by the loader: " + "; ".join(parts), "; ".join(fixes)


def refused_text(refused: dict[Path, str], base: Path) -> str:
    items = sorted(refused.items())
    text = "; ".join(f"{shown([p], base)} ({why})" for p, why in items[:SHOWN])
    return f"{len(refused)} librar{'y' if len(refused) == 1 else 'ies'} the loader will not load: {text}" + (
        f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def tool_text(command: Sequence[str]) -> str:
    return "ldd" if Path(command[0]).name == "ldd" else f"{command[0]} in trace mode"


def libs(s: Smoke, run: EnvRunner = run_tool, command: Sequence[str] | None = None,
         context: ContextLoader = loaded.load_context, budget: float = BUDGET_S) -> str | Outcome:
    """Every shared object in torch's lib/ (and torchvision's, torchaudio's folders) resolves its dependencies
    in a process that imported torch, then its companions."""
    deadline = time.monotonic() + budget
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
        raise Skip("no dynamic loader (" + ", ".join(LOADERS) + ") is in this image")
    ctx = context(min(CHILD_TIMEOUT_S, budget))
    if ctx.timed_out:
        raise Fail(f"importing torch in a child process did not finish within {min(CHILD_TIMEOUT_S, budget):g} s: "
                   f"none of the {len(files)} shared objects was checked",
                   "rerun torch-smoke on a less loaded machine; if it persists, `python -c 'import torch'` hangs")
    env = loaded.loader_env(preloads(ctx.mapped), os.environ, Path(command[0]).name != "ldd")
    result = scan(files, command, lambda argv, timeout: run(argv, timeout, env), deadline - time.monotonic())
    where, base = ", ".join(folders), folders["torch"].parent
    after = f"import torch failed ({ctx.failure()})" if ctx.failure() else ""
    # After a failed import, torch's own libraries are not loaded: the companions' need of them follows from it.
    unloaded = [n for n in result.missing if after and (lib / n).is_file()]
    result.missing = {n: p for n, p in result.missing.items() if n not in unloaded}
    after += (f" in that process, so {len(unloaded)} soname(s) torch/lib ships were not loaded for its companions"
              f" ({shown([Path(n) for n in unloaded], base)})" if unloaded else " in that process" if after else "")
    problems, fixes = [], []
    if result.missing:
        detail, fix = describe(result.missing, base)
        problems.append(f"{len(result.missing)} soname(s) {detail}")
        fixes.append(fix)
    if result.refused:
        problems.append(refused_text(result.refused, base))
        fixes.append("reinstall the wheels: a file in them is not a shared object for this machine")
    if result.timed_out:
        problems.append(f"only {result.checked} of {len(files)} shared objects were checked within {budget:g} s")
        fixes.append("rerun torch-smoke on a less loaded machine")
    if problems:
        raise Fail("; ".join(problems + ([after] if after else [])), "; ".join(fixes))
    if unloaded:
        return Outcome("warn", f"{result.checked} shared objects checked, none lacks a soname of its own; {after}",
                       "see the import check: torch must import before its companions can load")
    if result.host_bound:
        found = ", ".join(f"{name} from {path}" for name, path in sorted(result.host_bound.items())[:SHOWN])
        more = len(result.host_bound) - SHOWN
        return Outcome("warn", f"{len(result.host_bound)} of torch's libraries resolve from the host's "
                       f"{apptainer.HOST_LIBS} (apptainer --rocm), not from this image: {found}"
                       + (f" and {more} more" if more > 0 else ""), apptainer.LIBS_FIX)
    process = "after import " + ", ".join(ctx.imported) if ctx.imported else "where " + after
    return f"{result.checked} shared objects ({where}) resolve every dependency {process} ({tool_text(command)})"


CHECKS: dict[str, Check] = {"libs": libs}
