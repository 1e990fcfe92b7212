"""A pure-Python `torch` for the synthetic wheels of the row benchmark (bench_row.py): what the in-image smoke test
asks of a ROCm torch on a machine without a GPU (versions, the arch list, CPU known answers), on NumPy.

So `builder publish` validates the benchmark's images as it does real ones (a synthetic torch that imports as an
empty package fails the smoke test, and a failed image is never pushed). It computes with NumPy (the real wheel,
from the machine's wheelhouse), so the known answers are true answers; the payload beside it is still synthetic.
"""

from __future__ import annotations

from pathlib import Path

LIBRARY = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")  # needs libc alone
INIT = '''"""torch stand-in of rocm-image-factory's row benchmark (benchmarks/support/torchstandin.py)."""
import types as _types

import numpy as _np

__version__ = {version!r}
float32, float64 = _np.float32, _np.float64
version = _types.SimpleNamespace(hip={hip!r}, cuda=None)
_ARCHS = {archs!r}


class Tensor:
    def __init__(self, data):
        self.data = _np.asarray(data.data if isinstance(data, Tensor) else data)

    def __matmul__(self, other):
        return Tensor(self.data @ _of(other))

    def __mul__(self, other):
        return Tensor(self.data * _of(other))

    def __sub__(self, other):
        return Tensor(self.data - _of(other))

    def __getitem__(self, key):
        return Tensor(self.data[key])

    def abs(self):
        return Tensor(_np.abs(self.data))

    def max(self):
        return Tensor(self.data.max())

    def item(self):
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def numpy(self):
        return self.data


def _of(x):
    return x.data if isinstance(x, Tensor) else x


class Generator:
    def __init__(self):
        self.rng = _np.random.default_rng(0)

    def manual_seed(self, seed):
        self.rng = _np.random.default_rng(seed)
        return self


def tensor(data, dtype=None):
    return Tensor(_np.asarray(data, dtype=dtype or _np.float32))


def randn(*shape, dtype=None, generator=None):
    rng = (generator or Generator()).rng
    return Tensor(rng.standard_normal(shape).astype(dtype or _np.float32))


def from_numpy(array):
    return Tensor(array)


def diag(t):
    return Tensor(_np.diag(_of(t)))


def _svd(a, full_matrices=True):
    u, s, vh = _np.linalg.svd(_of(a), full_matrices=full_matrices)
    return Tensor(u), Tensor(s), Tensor(vh)


linalg = _types.SimpleNamespace(svd=_svd)
cuda = _types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0, get_arch_list=lambda: list(_ARCHS))
_C = _types.SimpleNamespace()
'''


def files(version: str, hip: str, archs: list[str]) -> tuple[tuple[str, bytes], ...]:
    """The stand-in's files in the torch wheel: its __init__.py, and one real shared object in torch/lib (the
    smoke test resolves every library there; the host's zlib, Debian 12 as the images are)."""
    return (("torch/__init__.py", INIT.format(version=version, hip=hip, archs=sorted(archs)).encode()),
            ("torch/lib/libstandin.so", LIBRARY.read_bytes()))
