"""An installed torch, torchvision and torchaudio linked the way the real wheels are, built with the C compiler.

Where each shape comes from (`readelf -d`, checked again by tests/smoke/test_libs_real_shape.py):
- torch/lib (pytorch.org's torch 2.13.0+cpu, and every torch wheel): each library has DT_SONAME and RUNPATH
  `$ORIGIN`; libtorch_cpu.so and libtorch_global_deps.so need libgomp.so.1, which the wheel bundles in torch/lib;
  torch/_C.cpython-*.so needs libtorch_python.so with RUNPATH `$ORIGIN:$ORIGIN/lib`.
- torchvision/_C.so (PyPI's torchvision 0.26.0): NEEDED libc10.so, libtorch.so, libtorch_cpu.so,
  libtorch_python.so and the GPU runtime, with only a dead DT_RPATH from the build machine (no RUNPATH);
  torchaudio/lib/*.abi3.so (PyPI's torchaudio 2.11.0): the same NEEDED, no RPATH or RUNPATH. Both load with
  ctypes.CDLL (torch.ops.load_library) after `import torch`.
- The ROCm runtime in another package's folder: TheRock's torch runs torch/_rocm_init.py from torch/__init__.py,
  which calls rocm_sdk.initialize_process(preload_shortnames=[...]); that CDLLs each library of
  _rocm_sdk_core/lib with RTLD_GLOBAL (ROCm/TheRock external-builds/pytorch/build_prod_wheels.py at
  0032408fb24ab0e85133abf40faf2f9004c06e23, LINUX_LIBRARY_PRELOADS and get_rocm_init_contents;
  build_tools/packaging/python/templates/rocm/src/rocm_sdk/__init__.py at
  122f975d7c58905b991a1806881bab368a90d93c, preload_libraries). torch/lib/libtorch_hip.so and libc10_hip.so
  name libamdhip64.so.7 and libroctx64.so.4 with RUNPATH `$ORIGIN` only: the wheels built before TheRock's
  rewrite_torch_runpath.py (91fa2baa607e99e8f3d366ccf09e3555bf920216) carry the build machine's path there,
  which does not exist after install, so only the preload resolves them.
The bundled libgomp is named librifgomp.so.1 here: the host's own libgomp.so.1 (gcc's) would resolve the real
name once the fixture's copy is removed.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import zlib
from dataclasses import dataclass, field
from pathlib import Path

GOMP = "librifgomp.so.1"  # stands in for the libgomp.so.1 torch bundles
HIP, ROCTX = "libamdhip64.so.7", "libroctx64.so.4"
TORCH_VERSION = "2.9.1+rocm7.10.0"  # TheRock's local version shape
PRELOADS = ("amdhip64", "roctx64")  # rocm_sdk short names, as in LINUX_LIBRARY_PRELOADS
SDK_LIBS = {"amdhip64": HIP, "roctx64": ROCTX}
DEAD_RPATH = "/__w/_temp/conda_environment_23408988289/lib"  # torchvision 0.26.0's _C.so carries this one
EXT = sysconfig.get_config_var("EXT_SUFFIX") or ".cpython-311-x86_64-linux-gnu.so"

ROCM_SDK = '''"""rocm_sdk as TheRock's: preload_libraries CDLLs each library with RTLD_GLOBAL."""
import ctypes, os
__version__ = "7.10.0"
LIBS = {libs!r}
_ALL_CDLLS = {{}}
def initialize_process(*, preload_shortnames=None, rtld_global=True, check_version=None, **kwargs):
    root = os.path.join(os.path.dirname(os.path.dirname(__file__)), "_rocm_sdk_core", "lib")
    for name in preload_shortnames or []:
        _ALL_CDLLS[name] = ctypes.CDLL(os.path.join(root, LIBS[name]), mode=ctypes.RTLD_GLOBAL)
'''
ROCM_INIT = '''
def initialize():
    import rocm_sdk
    rocm_sdk.initialize_process(
        preload_shortnames={preloads!r},
        check_version='7.10.0')
'''
TORCH_INIT = '''"""torch/__init__.py in the real order: _rocm_init, _load_global_deps (RTLD_GLOBAL), torch._C."""
import ctypes, os
__version__ = {version!r}
try:
    from . import _rocm_init
except ImportError:
    pass
else:
    _rocm_init.initialize()
    del _rocm_init
_here = os.path.dirname(__file__)
ctypes.CDLL(os.path.join(_here, "lib", "libtorch_global_deps.so"), mode=ctypes.RTLD_GLOBAL)
_C = ctypes.CDLL(os.path.join(_here, "_C{ext}"))
class version:
    hip = "7.1.25424"
    cuda = None
'''
COMPANION_INIT = '''import ctypes, os
import torch
__version__ = {version!r}
for _name in {libs!r}:
    ctypes.CDLL(os.path.join(os.path.dirname(__file__), _name))  # torch.ops.load_library
'''


@dataclass
class Library:
    path: str  # under site-packages
    needed: tuple[str, ...] = ()
    soname: bool = True
    runpath: str | None = "$ORIGIN"
    rpath: str | None = None


@dataclass
class Install:
    """What to build; the broken variants change one field."""

    preloads: tuple[str, ...] = PRELOADS
    extra_needed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # path -> more NEEDED
    libraries: list[Library] = field(default_factory=list)

    def __post_init__(self) -> None:
        torch_libs = ("libc10.so", "libtorch.so", "libtorch_cpu.so")
        self.libraries = [
            Library(f"_rocm_sdk_core/lib/{HIP}", runpath=None),
            Library(f"_rocm_sdk_core/lib/{ROCTX}", runpath=None),
            Library(f"torch/lib/{GOMP}"),
            Library("torch/lib/libc10.so"),
            Library("torch/lib/libtorch_global_deps.so", (GOMP,)),
            Library("torch/lib/libc10_hip.so", ("libc10.so", HIP)),
            Library("torch/lib/libtorch_cpu.so", ("libc10.so", GOMP)),
            Library("torch/lib/libtorch_hip.so", ("libtorch_cpu.so", "libc10_hip.so", "libc10.so", HIP, ROCTX)),
            Library("torch/lib/libtorch.so", ("libtorch_cpu.so", "libtorch_hip.so")),
            Library("torch/lib/libtorch_python.so", ("libtorch.so", "libtorch_cpu.so", "libc10.so")),
            Library(f"torch/_C{EXT}", ("libtorch_python.so",), soname=False, runpath="$ORIGIN:$ORIGIN/lib"),
            Library("torchvision/_C.so", (*torch_libs, "libtorch_python.so", HIP, "libc10_hip.so", "libtorch_hip.so"),
                    soname=False, runpath=None, rpath=DEAD_RPATH),
            Library("torchaudio/lib/libtorchaudio.abi3.so", (*torch_libs, HIP, "libc10_hip.so", "libtorch_hip.so"),
                    soname=False, runpath=None),
            Library("torchaudio/lib/_torchaudio.abi3.so", (*torch_libs, HIP, "libc10_hip.so", "libtorch_hip.so"),
                    soname=False, runpath=None),
        ]


def have_cc() -> bool:
    return shutil.which("cc") is not None


def compile_library(site: Path, lib: Library, extra: tuple[str, ...] = ()) -> None:
    """One library that defines a function and calls nothing: its dynamic section is what the test is about.
    Each NEEDED is linked by file name (-l:NAME) from where the real install would have it."""
    out = site / lib.path
    out.parent.mkdir(parents=True, exist_ok=True)
    source = out.parent / (out.name.replace(".", "_") + ".c")
    source.write_text(f"int rif_{zlib.crc32(lib.path.encode())}(void) {{ return 1; }}\n")
    stubs = site.parent / "link-stubs"
    args = ["cc", "-shared", "-fPIC", "-o", str(out), str(source), "-Wl,--no-as-needed", f"-L{stubs}"]
    if lib.soname:
        args.append(f"-Wl,-soname,{out.name}")
    if lib.runpath:
        args.append(f"-Wl,--enable-new-dtags,-rpath,{lib.runpath}")
    elif lib.rpath:
        args.append(f"-Wl,--disable-new-dtags,-rpath,{lib.rpath}")
    args += [f"-l:{n}" for n in (*lib.needed, *extra)]
    subprocess.run(args, check=True, capture_output=True)
    source.unlink()


def link_stubs(folder: Path, names: set[str]) -> None:
    """Empty libraries of each soname to link against (the linker records NEEDED from them)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stub.c").write_text("int rif_stub(void) { return 0; }\n")
    for name in names:
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(folder / name),
                        str(folder / "stub.c")], check=True, capture_output=True)


def build(root: Path, install: Install | None = None) -> Path:
    """site-packages under root, with torch, its ROCm runtime package, rocm_sdk, torchvision and torchaudio."""
    install = install or Install()
    site = root / "site-packages"
    names = {n for lib in install.libraries for n in (*lib.needed, *install.extra_needed.get(lib.path, ()))}
    link_stubs(root / "link-stubs", names)
    for lib in install.libraries:
        compile_library(site, lib, install.extra_needed.get(lib.path, ()))
    (site / "_rocm_sdk_core" / "__init__.py").write_text("")
    (site / "rocm_sdk").mkdir()
    (site / "rocm_sdk" / "__init__.py").write_text(ROCM_SDK.format(libs=SDK_LIBS))
    (site / "torch" / "__init__.py").write_text(TORCH_INIT.format(version=TORCH_VERSION, ext=EXT))
    (site / "torch" / "_rocm_init.py").write_text(ROCM_INIT.format(preloads=list(install.preloads)))
    (site / "torchvision" / "__init__.py").write_text(
        COMPANION_INIT.format(version="0.24.1+rocm7.10.0", libs=["_C.so"]))
    (site / "torchaudio" / "__init__.py").write_text(
        COMPANION_INIT.format(version="2.9.1+rocm7.10.0", libs=["lib/libtorchaudio.abi3.so",
                                                                 "lib/_torchaudio.abi3.so"]))
    return site
