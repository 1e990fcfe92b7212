"""What a process that imported torch has loaded: the context in which `libs` asks the loader about each library.

The wheels do not resolve their libraries alone: torchvision's and torchaudio's extensions name libc10.so and
libtorch.so with no RPATH or RUNPATH (PyPI's torchvision 0.26.0 and torchaudio 2.11.0, `readelf -d`), and
TheRock's torch preloads its ROCm libraries from the rocm_sdk packages with RTLD_GLOBAL (`torch/_rocm_init.py`,
`rocm_sdk.initialize_process`). They resolve because the process already holds a library of that soname.
So a child imports torch, then torchvision and torchaudio as users do, and reports the libraries it has mapped;
the loader is then asked about each file with those libraries preloaded (LD_PRELOAD, in trace mode: nothing
runs, every missing soname is listed). The child's imports are bounded by a timeout, its report by MAX_REPORT.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .core import first_line

COMPANIONS = ("torchvision", "torchaudio")
MAX_MAPPED = 4096  # libraries reported by the child
MAX_REPORT = 4 << 20  # bytes of the child's report
PRELOAD_LIMIT = 100_000  # characters of LD_PRELOAD (one environment string may hold 128 KiB)
NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")
# The loader's words when it stops at a library (outside trace mode, or the file itself cannot be opened).
STOPPED = re.compile(r"error while loading shared libraries: (\S+?): (.*)$")
VERSION = re.compile(r"version `[^']+' not found \(required by [^)]+\)")
# The child: its own stdout goes to /dev/null so that nothing an import prints can spoil the report.
CHILD = r"""
import importlib.util, json, os, sys, warnings
out = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
warnings.simplefilter("ignore")
errors, imported = {}, []
def attempt(name):
    try:
        __import__(name)
    except BaseException as exc:
        lines = str(exc).strip().splitlines()
        errors[name] = (type(exc).__name__ + ": " + (lines[0] if lines else ""))[:400]
        return False
    imported.append(name)
    return True
if attempt("torch"):
    for name in COMPANIONS:
        if importlib.util.find_spec(name) is not None:
            attempt(name)
mapped = []
with open("/proc/self/maps") as fh:
    for line in fh:
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        if path.startswith("/") and ".so" in os.path.basename(path) and path not in mapped:
            mapped.append(path)
json.dump({"imported": imported, "errors": errors, "mapped": mapped[:MAX_MAPPED]}, out)
out.flush()
os._exit(0)
""".replace("COMPANIONS", repr(COMPANIONS)).replace("MAX_MAPPED", str(MAX_MAPPED))


@dataclass
class Context:
    """What the child reported: the packages it imported, the imports that failed, the libraries it mapped."""

    imported: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # package -> its import error, one line
    mapped: list[str] = field(default_factory=list)
    timed_out: bool = False

    def failure(self) -> str:
        """Why torch did not import in the child, or ''."""
        return self.errors.get("torch", "")


def parse(raw: bytes) -> Context:
    """The child's report, held to its shape: anything else is an error of the child, not a context."""
    data = json.loads(raw[:MAX_REPORT]) if len(raw) <= MAX_REPORT else None
    if not isinstance(data, dict):
        raise ValueError("the report is not a JSON object within the size limit")
    imported, errors, mapped = data.get("imported"), data.get("errors"), data.get("mapped")
    if not (isinstance(imported, list) and all(isinstance(i, str) for i in imported)
            and isinstance(errors, dict) and all(isinstance(v, str) for v in errors.values())
            and isinstance(mapped, list) and all(isinstance(m, str) for m in mapped)):
        raise ValueError("the report does not have the shape the child writes")
    return Context(imported[:8], {str(k): v[:400] for k, v in list(errors.items())[:8]}, mapped[:MAX_MAPPED])


def load_context(timeout: float, python: str = sys.executable) -> Context:
    """Import torch and its companions in a child with this Python and its environment, as a user would."""
    try:
        proc = subprocess.run([python, "-c", CHILD], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Context(timed_out=True)
    except OSError as exc:
        return Context(errors={"torch": f"could not start {python}: {first_line(exc)}"})
    if proc.returncode != 0:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        return Context(errors={"torch": f"the process importing torch died ({how})"})
    try:
        return parse(proc.stdout)
    except ValueError as exc:
        return Context(errors={"torch": f"the process importing torch gave no usable report: {exc}"})


def loader_env(preload: Sequence[str], environ: Mapping[str, str], trace: bool) -> dict[str, str]:
    """The loader's environment: the process's libraries preloaded (what does not fit: their folders on
    LD_LIBRARY_PATH, after the user's), and trace mode where the loader itself is run. Through ldd (a shell
    script, which would load the preloads for real) only the folders are given, and ldd sets trace mode."""
    env = {**environ, "LC_ALL": "C"}
    fitting: list[str] = [p for p in environ.get("LD_PRELOAD", "").replace(":", " ").split() if p]
    rest: list[str] = []
    for path in preload:
        if any(c in path for c in " :\t\n"):
            rest.append(path)  # LD_PRELOAD separates on spaces and colons
        elif trace and sum(len(p) + 1 for p in fitting) + len(path) < PRELOAD_LIMIT:
            fitting.append(path)
        else:
            rest.append(path)
    if fitting:
        env["LD_PRELOAD"] = " ".join(fitting)
    folders = list(dict.fromkeys(str(Path(p).parent) for p in rest if ":" not in p))
    if folders:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [environ.get("LD_LIBRARY_PATH", ""), *folders]))
    if trace:
        env["LD_TRACE_LOADED_OBJECTS"] = "1"
    return env


def missing_sonames(output: str, path: Path | None = None) -> list[str]:
    """The loader's output -> the sonames it reports as not found, once each, in order."""
    found = [m.group(1) for m in map(NOT_FOUND.match, output.splitlines()) if m]
    found += [m.group(1) for m in map(STOPPED.search, output.splitlines())
              if m and "cannot open shared object file" in m.group(2) and (path is None or m.group(1) != str(path))
              and "/" not in m.group(1)]
    return list(dict.fromkeys(found))


def refusal(output: str) -> str:
    """Why the loader would not load the file itself, in its own words (one line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and "LD_PRELOAD" not in line]
    version = next((m.group(0) for m in map(VERSION.search, lines) if m), None)
    return (version or next((line for line in lines if "error" in line or "not a" in line), "")
            or (lines[-1] if lines else "no output"))[:200]
