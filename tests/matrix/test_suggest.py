"""A misspelt key or value gets the spelling it was meant to be; an unknown torch version, its own line."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.matrix import suggest
from builder.matrix.expand import expand_matrix
from testkit.matrices import write_matrix

GOOD = """\
image: pytorch
matrix:
  os: [debian-12]
  platform: [cpu]
  torch:
    - {version: "2.13.0", torchvision: null, torchaudio: null}
  flavor: [runtime, devel]
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(InputError) as caught:
        expand_matrix(write_matrix(tmp_path, text))
    return [str(p).split(":", 1)[1] for p in caught.value.problems]  # without the file name


@pytest.mark.parametrize(("typo", "said"), [
    # keys, at every level of the schema
    (GOOD.replace("  flavor:", "  flavour:"), "7: matrix.flavour: unknown key; did you mean 'flavor'?"),
    (GOOD.replace("matrix:", "matrx:"), "2: matrx: unknown key; did you mean 'matrix'?"),
    (GOOD.replace("torchvision: null", "torchvison: null"),
     "6: matrix.torch[0].torchvison: unknown key; did you mean 'torchvision'?"),
    (GOOD + "exlude:\n  - {flavor: devel}\n", "8: exlude: unknown key; did you mean 'exclude'?"),
    (GOOD + "include:\n  - {os: debian-12, platfrom: cpu, torch: '2.13.0', flavor: runtime}\n",
     "9: include[0].platfrom: unknown key; did you mean 'platform'?"),
    # values
    (GOOD.replace("[runtime, devel]", "[runtime, dev]"),
     "7: matrix.flavor[1]: Input should be 'runtime' or 'devel'; did you mean 'devel'?"),
    (GOOD + "  channel: [pytroch]\n",
     "8: matrix.channel[0]: Input should be 'pytorch', 'therock' or 'local'; did you mean 'pytorch'?"),
    (GOOD.replace("[debian-12]", "[debain-12]"),
     "3: matrix.os[0]: unknown os 'debain-12'; did you mean 'debian-12'? known: debian-12, debian-13, rocky-9, "
     "ubuntu-22.04, ubuntu-24.04"),
])
def test_a_typo_gets_the_spelling_it_meant_at_its_own_line(tmp_path: Path, typo: str, said: str) -> None:
    assert said in problems(tmp_path, typo)


def test_a_key_nothing_resembles_lists_the_keys_allowed_there(tmp_path: Path) -> None:
    [said] = problems(tmp_path, GOOD + "  colour: [red]\n")
    assert said == "8: matrix.colour: unknown key (known here: os, platform, torch, gfx, flavor, channel)"


def test_an_unknown_torch_version_points_at_its_own_line_not_matrix(tmp_path: Path) -> None:
    [said] = problems(tmp_path, GOOD.replace('"2.13.0"', '"2.99.0"'))
    assert said.startswith("6: matrix.torch[0].version: no compatibility data for torch 2.99")
    short = GOOD.replace('    - {version: "2.13.0", torchvision: null, torchaudio: null}', '    - "2.31.0"')
    [said] = problems(tmp_path, short)
    assert said.startswith("6: matrix.torch[0]: no compatibility data for torch 2.31")


def test_an_unknown_torch_beside_a_known_one_still_builds_the_known_one(tmp_path: Path) -> None:
    text = GOOD.replace('    - {version: "2.13.0", torchvision: null, torchaudio: null}',
                        '    - {version: "2.13.0", torchvision: null, torchaudio: null}\n    - "2.99.0"')
    expansion = expand_matrix(write_matrix(tmp_path, text))
    assert {c.torch for c in expansion.cells} == {"2.13.0"}
    assert {d.rule for d in expansion.dropped} == {"known-torch"}  # --explain says why


def test_did_you_mean_stays_quiet_when_nothing_is_close() -> None:
    assert suggest.did_you_mean("zzz", ["runtime", "devel"]) == ""
    assert suggest.keys_at(("matrix", "torch", 0))[:3] == ["version", "torchvision", "torchaudio"]
    assert suggest.keys_at(("nowhere", "deeper")) == []
