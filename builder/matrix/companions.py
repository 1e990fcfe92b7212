"""torchvision and torchaudio: the versions that pair with a torch release, from the compatibility data."""

from __future__ import annotations

from builder.core import facts
from builder.core.facts import torch_minor


def companion_version(torch: str, companion_minor: str, follows_torch: bool, offset: int = 0) -> str:
    """torchvision moves with every torch patch (2.9.1 -> 0.24.1); a companion left behind stays at .0."""
    patch = int(torch.split(".")[2]) if torch.count(".") == 2 else 0
    return f"{companion_minor}.{patch + offset if follows_torch else 0}"


def default_companions(torch: str) -> tuple[str | None, str | None]:
    """The torchvision and torchaudio versions that pair with a torch release, or None when unknown."""
    minor = facts.compat().torch.get(torch_minor(torch))
    if minor is None:
        return None, None
    offset = minor.companion_patch_offset
    vision = companion_version(torch, minor.torchvision, follows_torch=True, offset=offset)
    audio = companion_version(torch, minor.torchaudio, follows_torch=minor.torchaudio == torch_minor(torch),
                              offset=offset)
    return vision, audio
