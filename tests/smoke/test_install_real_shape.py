"""The install checks against the shapes real installs have (issue 46, item 4): TheRock's local versions
(2.9.1+rocm7.10.0, 2.12.0+rocm10.0.0 with HIP 7.15.x), gcnArchName with feature flags, and an import that raises
a deprecation warning users never see (the real torch 2.11.0+cu130 imported without any; a dependency may)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import install
from tests.fakes.smoke import ROCM_CELL, fake_torch, outcome, smoke


def test_a_deprecation_warning_at_import_passes_a_user_warning_fails(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "torch"
    package.mkdir()
    init = package / "__init__.py"
    monkeypatch.syspath_prepend(str(tmp_path))
    for category, status in (("DeprecationWarning", "pass"), ("PendingDeprecationWarning", "pass"),
                             ("UserWarning", "fail")):
        init.write_text(f"import warnings\n__version__ = '2.9.1+rocm7.10.0'\n"
                        f"warnings.warn('pkg_resources is deprecated as an API', {category})\n")
        monkeypatch.delitem(sys.modules, "torch", raising=False)
        result = outcome(install.import_torch, smoke(ROCM_CELL, None))
        assert result.status == status, (category, result.detail)
    monkeypatch.delitem(sys.modules, "torch", raising=False)


def test_therock_versions_and_feature_flagged_archs() -> None:
    therock = {**ROCM_CELL, "platform": "rocm7.10", "torch": "2.9.1", "torch_wheel": "2.9.1+rocm7.10.0",
               "hip": "7.1", "gfx_targets": ["gfx90a", "gfx942"]}
    torch = fake_torch(hip="7.1.25424-4179531dcd", archs=("gfx90a:sramecc+:xnack-", "gfx942:sramecc+:xnack-"))
    torch.__version__ = "2.9.1+rocm7.10.0"
    s = smoke(therock, torch)
    assert [outcome(check, s).status for check in (install.torch_version, install.hip_version, install.arch_list)] \
        == ["pass", "pass", "pass"]
    ten = {**therock, "platform": "rocm10.0", "torch": "2.12.0", "torch_wheel": "2.12.0+rocm10.0.0", "hip": "7.15"}
    newer = fake_torch(hip="7.15.60123-abcdef", archs=("gfx90a:xnack-",))
    newer.__version__ = "2.12.0+rocm10.0.0"
    newer.version.rocm = "10.0.0"
    assert outcome(install.hip_version, smoke(ten, newer)).status == "pass"
    short = outcome(install.arch_list, smoke(ten, newer))
    assert short.status == "fail" and "no kernels for gfx942 (it has gfx90a)" in short.detail
