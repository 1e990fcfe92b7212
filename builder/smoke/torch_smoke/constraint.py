"""The torch pip cannot swap out: the image's pip constraint file, written at build time, checked at run time.

Every image sets PIP_CONSTRAINT (and UV_CONSTRAINT, which `uv pip install` honours: docs.astral.sh/uv/reference/
environment) to /opt/rif/constraints.txt, which pins the exact torch, torchvision, torchaudio, Triton and, on
TheRock, rocm/rocm-sdk and device packages installed. `pip install X` where X needs another torch then stops with
pip's ResolutionImpossible ("The user requested (constraint) torch==...") and torch stays; anything else installs.
Lift it on purpose with `PIP_CONSTRAINT= pip install ...` (docs/images.md).

`python -m torch_smoke.constraint FILE` (the zipapp on PYTHONPATH) writes the file from the installed distributions.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import metadata
from pathlib import Path

from .core import Outcome
from .smoke import Check, Smoke

FILE = "/opt/rif/constraints.txt"
ENV = ("PIP_CONSTRAINT", "UV_CONSTRAINT")
# PEP 503 names of what makes the image's torch: the torch family, its Triton, and TheRock's ROCm packages.
PINNED = re.compile(r"(torch|torchvision|torchaudio|pytorch-triton-rocm|rocm|rocm-sdk(-[a-z0-9-]+)?"
                    r"|amd-torch-device(-[a-z0-9-]+)?)")
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
LIFT = "lift it on purpose for one command with `PIP_CONSTRAINT= pip install ...` (uv: `UV_CONSTRAINT= uv pip ...`)"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(path: list[str] | None = None) -> dict[str, str]:
    """The distributions the constraint pins, name -> exact version, as installed (on sys.path, or `path`)."""
    found: dict[str, str] = {}
    dists = metadata.distributions() if path is None else metadata.distributions(path=path)
    for dist in dists:
        name = canonical(str(dist.metadata["Name"] or ""))
        if PINNED.fullmatch(name):
            found[name] = str(dist.version)
    return dict(sorted(found.items()))


def render(pins: dict[str, str]) -> str:
    header = ("# rocm-image-factory: the torch of this image, pinned for pip (PIP_CONSTRAINT) and uv (UV_CONSTRAINT).\n"
              f"# A package that needs another torch fails to install instead of replacing it; {LIFT}.\n")
    return header + "".join(f"{name}=={version}\n" for name, version in pins.items())


def read_pins(path: Path) -> dict[str, str]:
    """name -> version of a constraint file's `name==version` lines (64 KiB at most, comments skipped)."""
    with open(path, "rb") as fh:
        text = fh.read(65536).decode("utf-8", errors="replace")
    pins = {}
    for line in text.splitlines():
        match = PIN.fullmatch(line.split("#", 1)[0].strip())
        if match:
            pins[canonical(match[1])] = match[2]
    return pins


def pip_constraint(s: Smoke) -> str | Outcome:
    """The constraint is in force: PIP_CONSTRAINT names a file whose pins are what is installed, torch among them
    (read from the installed distributions' metadata: it needs no import of torch, so `--only pip_constraint` runs)."""
    value = s.view.env.get("PIP_CONSTRAINT", "").strip()
    if not value:
        return Outcome("info", "PIP_CONSTRAINT is not set: pip may replace this image's torch with another build",
                       f"export PIP_CONSTRAINT={FILE} UV_CONSTRAINT={FILE} to keep this torch in place")
    path = Path(value.split()[0])
    try:
        pins = read_pins(path)
    except OSError as exc:
        return Outcome("warn", f"PIP_CONSTRAINT={value} cannot be read ({exc.strerror}): pip runs unconstrained",
                       f"point PIP_CONSTRAINT at {FILE}")
    have = installed()
    if "torch" not in pins:
        return Outcome("warn", f"PIP_CONSTRAINT={value} pins no torch: pip may replace it",
                       f"point PIP_CONSTRAINT at {FILE}")
    stale = [f"{n}=={v} (installed: {have.get(n, 'none')})" for n, v in pins.items() if have.get(n) != v]
    if stale:
        return Outcome("warn", f"PIP_CONSTRAINT={value} pins what is not installed: {', '.join(stale)}",
                       "the image's packages were changed after it was built: rebuild it, or pull it again")
    uv = "UV_CONSTRAINT too" if s.view.env.get("UV_CONSTRAINT", "").strip() == value else "UV_CONSTRAINT not set"
    return f"in force: PIP_CONSTRAINT={value} pins {', '.join(f'{n}=={v}' for n, v in pins.items())}; {uv}"


CHECKS: dict[str, Check] = {"pip_constraint": pip_constraint}


def main(argv: list[str], path: list[str] | None = None) -> int:
    """Write the constraint file (the image's build step): atomically, and refuse an environment without torch."""
    if len(argv) != 1:
        print("usage: python -m torch_smoke.constraint FILE", file=sys.stderr)
        return 2
    pins = installed(path)
    if "torch" not in pins:
        print("torch_smoke.constraint: torch is not installed here", file=sys.stderr)
        return 1
    target = Path(argv[0])
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render(pins), encoding="utf-8")
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
