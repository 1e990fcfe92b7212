"""Where torch-smoke runs: under Apptainer (or Singularity) the fixes are Apptainer's, not `docker run` flags.

Apptainer runs the image as the invoking host user with that user's own groups (there is no --group-add), gives
the GPU through `--rocm` (which also binds the host's ROCm libraries into /.singularity.d/libs, first on
LD_LIBRARY_PATH) or `--bind /dev/kfd,/dev/dri`, and mounts the image read-only.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from pathlib import Path

MARKERS = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")
HOST_LIBS = "/.singularity.d/libs"  # where --rocm and --nv bind the host's libraries
ROCM_FLAGS = ("--rocm",)
DEVICE_BINDS = "--bind /dev/kfd,/dev/dri"
GROUPS_FIX = ("the host user must be in the render and video groups (Apptainer runs as you, with your host "
              "groups: `sudo usermod -aG render,video $USER` on the host, then log in again)")
MISSING_FIX = f"run with apptainer exec --rocm (or {DEVICE_BINDS}) IMAGE.sif; {GROUPS_FIX}"
NVIDIA_FIX = "run with apptainer exec --nv IMAGE.sif (binds the host's NVIDIA devices and driver libraries)"
LIBS_FIX = (f"run without --rocm and with {DEVICE_BINDS}, so torch loads the image's own ROCm, or make the host's "
            "ROCm the one the image was built for (apptainer's rocmliblist.conf lists what --rocm binds)")
READ_ONLY_DOCKER = "give the check a writable folder: run without --read-only, or mount a volume there"
READ_ONLY_APPTAINER = ("the image is read-only under Apptainer: bind a writable folder there (--bind DIR:PATH), or "
                       "add --writable-tmpfs; packages go in a venv of your own (python -m venv "
                       "--system-site-packages DIR)")


def detect(env: Mapping[str, str], root: Path = Path("/")) -> bool:
    """Apptainer and Singularity set these variables and keep their scripts in /.singularity.d."""
    return any(env.get(name) for name in MARKERS) or (root / ".singularity.d").is_dir()


def gid_fix(gid: int) -> str:
    """A device's group the user lacks: under Apptainer only the host's group membership helps."""
    return (f"on the host, add your user to the group that owns the device (GID {gid}: `getent group {gid}`), "
            "e.g. `sudo usermod -aG render,video $USER`, and log in again (Apptainer has no --group-add)")


def no_gpu_fix(flags: list[str]) -> str:
    """The gpu check's fix line when the devices are not there."""
    if "--nv" in flags:
        return "run with: apptainer exec --nv IMAGE.sif torch-smoke"
    return (f"run with: apptainer exec --rocm IMAGE.sif torch-smoke (or {DEVICE_BINDS} instead of --rocm: the "
            f"image's own ROCm libraries, none of the host's); {GROUPS_FIX}")


def is_read_only(exc: BaseException | None, detail: str) -> bool:
    """A check that failed because it could not write: EROFS, or a tool's own words for it."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno == errno.EROFS:
            return True
        exc = exc.__cause__ or exc.__context__
    return "Read-only file system" in detail or "[Errno 30]" in detail


def read_only_fix(apptainer: bool) -> str:
    return READ_ONLY_APPTAINER if apptainer else READ_ONLY_DOCKER
