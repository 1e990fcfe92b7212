"""builder.matrix.schema: the matrix file's schema, and the InputErrors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.matrix import schema
from testkit.matrices import BASE, CPU_TAG, inc, load_cells, problems_of, write_matrix

KNOWN_OS = "known: debian-12, debian-13, rocky-9, ubuntu-22.04, ubuntu-24.04"
KNOWN_GFX = ("known: all, gfx101X-dgpu, gfx103X-all, gfx110X-all, gfx1150, gfx1151, gfx1152, gfx1153, "
             "gfx120X-all, gfx90X-dcgpu, gfx94X-dcgpu, gfx950-dcgpu")


# --- errors: file, line, dotted key and message ----------------------------------------------------------

ERRORS: list[tuple[str, str, list[tuple[int | None, str, str]]]] = [
    ("top-level-unknown-key", BASE + "bogus: 1\n", [(5, "bogus", "unknown key")]),
    ("matrix-unknown-key", BASE + "  flavour: [runtime]\n", [(5, "matrix.flavour", "unknown key")]),
    ("include-unknown-key", BASE + "include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.1'\n"
     "    flavour: devel\n", [(9, "include[0].flavour", "unknown key")]),
    ("torch-mapping-unknown-key", inc("os: debian-12, platform: cpu, torch: {version: '2.1', vision: '0.1'}"),
     [(6, "include[0].torch.vision", "unknown key")]),
    ("exclude-unknown-key", BASE + "exclude:\n  - {os: debian-12, user: root}\n",
     [(6, "exclude[0].user", "unknown key")]),
    ("os-not-a-list", "matrix:\n  os: debian-12\n  platform: [cpu]\n  torch: ['2.13.0']\n",
     [(2, "matrix.os", "Input should be a valid list")]),
    ("matrix-not-a-mapping", "matrix: [debian-12]\n", [(1, "matrix", "valid dictionary")]),
    ("include-not-a-list", BASE + "include: {os: debian-12}\n", [(5, "include", "valid list")]),
    ("torch-item-a-list", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch:\n    - [2.1]\n",
     [(5, "matrix.torch[0]", "valid dictionary")]),
    ("empty-axis", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: []\n",
     [(4, "matrix.torch", "at least 1 item")]),
    ("missing-axis", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n",
     [(1, "matrix.torch", "Field required")]),
    ("missing-matrix", "# nothing but\nimage: pytorch\n", [(2, "matrix", "Field required")]),
    ("empty-file", "", [(None, "matrix", "Field required")]),
    ("version-x", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: ['2.x']\n",
     [(4, "matrix.torch[0].version", "'2.x' is not allowed here")]),
    ("version-injection", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch:\n"
     "    - version: 2.13.0; rm -rf /\n      torchvision: 0.28.0 && id\n",
     [(5, "matrix.torch[0].version", "'2.13.0; rm -rf /' is not allowed here"),
      (6, "matrix.torch[0].torchvision", "'0.28.0 && id' is not allowed here")]),
    ("expect-version", BASE + "include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.1'\n"
     "    expect: {torch: latest}\n", [(9, "include[0].expect.torch", "'latest' is not allowed here")]),
    ("exclude-version", BASE + "exclude: [{torch: '2.13.0`id`'}]\n",
     [(5, "exclude[0].torch", "'2.13.0`id`' is not allowed here")]),
    ("exclude-version-in-list", BASE + "exclude:\n  - torch:\n      - '2.13.0'\n      - '2.13.0`id`'\n",
     [(8, "exclude[0].torch[1]", "'2.13.0`id`' is not allowed here")]),
    ("exclude-channel", BASE + "exclude: [{channel: [pytorch, rocm]}]\n",
     [(5, "exclude[0].channel[1]", "Input should be 'pytorch', 'therock' or 'local'")]),
    ("channel-literal", BASE + "  channel: [pytorch, nightly]\n",
     [(5, "matrix.channel[1]", "Input should be 'pytorch', 'therock' or 'local'")]),
    ("include-channel-literal", inc("os: debian-12, platform: cpu, torch: '2.13.0', channel: amd"),
     [(6, "include[0].channel", "Input should be 'pytorch', 'therock' or 'local'")]),
    ("duplicate-channel", BASE + "  channel: [therock, pytorch, therock]\n",
     [(5, "matrix.channel[2]", "duplicate value 'therock'")]),
    ("index-urls-unknown-channel", BASE + "index_urls:\n  pytorch: https://x/y\n",
     [(6, "index_urls.pytorch", "'pytorch' is not allowed here")]),
    ("override-without-reason", inc("os: debian-12, platform: cpu, torch: '1.13', override: {}"),
     [(6, "include[0].override.reason", "Field required")]),
    ("override-reason-too-short", inc("os: debian-12, platform: cpu, torch: '1.13', override: {reason: why}"),
     [(6, "include[0].override.reason", "at least 10 characters")]),
    ("override-unknown-key", inc("os: debian-12, platform: cpu, torch: '1.13', override: {rule: known-torch}"),
     [(6, "include[0].override.reason", "Field required"), (6, "include[0].override.rule", "unknown key")]),
    ("user-injection", BASE + "user: root;id\n", [(5, "user", "'root;id' is not allowed here")]),
    ("include-user-injection", inc("os: debian-12, platform: cpu, torch: '2.1', user: '$(id)'"),
     [(6, "include[0].user", "'$(id)' is not allowed here")]),
    ("image-uppercase", BASE + "image: PyTorch\n", [(5, "image", "'PyTorch' is not allowed here")]),
    ("url-subshell", BASE + "index_urls:\n  cpu: https://x/$(id)\n",
     [(6, "index_urls.cpu", "'https://x/$(id)' is not allowed here")]),
    ("url-space", BASE + "index_urls:\n  cpu: 'https://x/a b'\n",
     [(6, "index_urls.cpu", "'https://x/a b' is not allowed here")]),
    ("url-quote", BASE + "index_urls:\n  cpu: https://x/a\"b\n",
     [(6, "index_urls.cpu", "'https://x/a\"b' is not allowed here")]),
    ("url-single-quote", BASE + "index_urls:\n  rocm7.2: \"https://x/it's\"\n",
     [(6, "index_urls.rocm7.2", "\"https://x/it's\" is not allowed here")]),
    ("source-url-scheme", BASE + "source_url: file:///etc/passwd\n",
     [(5, "source_url", "'file:///etc/passwd' is not allowed here")]),
    ("tag-injection", inc("os: debian-12, platform: cpu, torch: '2.1', tag: 'a;b'"),
     [(6, "include[0].tag", "'a;b' is not allowed here")]),
    ("tag-space", inc("os: debian-12, platform: cpu, torch: '2.1', tag: 'a b'"),
     [(6, "include[0].tag", "'a b' is not allowed here")]),
    ("tag-leading-dash", inc("os: debian-12, platform: cpu, torch: '2.1', tag: -x"),
     [(6, "include[0].tag", "'-x' is not allowed here")]),
    ("platform-pattern", "matrix:\n  os: [debian-12]\n  platform: [cpu, rocm7]\n  torch: ['2.1']\n",
     [(3, "matrix.platform[1]", "'rocm7' is not allowed here")]),
    ("flavor-literal", BASE + "  flavor: [runtime, debug]\n",
     [(5, "matrix.flavor[1]", "Input should be 'runtime' or 'devel'")]),
    ("unknown-os", "matrix:\n  os: [debian-11]\n  platform: [cpu]\n  torch: ['2.1']\n",
     [(2, "matrix.os[0]", f"unknown os 'debian-11'; {KNOWN_OS}")]),
    ("unknown-os-include", inc("os: ubuntu-20.04, platform: cpu, torch: '2.1'"),
     [(6, "include[0].os", f"unknown os 'ubuntu-20.04'; {KNOWN_OS}")]),
    ("unknown-gfx", BASE + "  gfx:\n    - gfx1151\n    - gfx942\n",
     [(7, "matrix.gfx[1]", "unknown gfx family 'gfx942'; gfx942 is a target of family gfx94X-dcgpu: "
                           "use gfx: [gfx94X-dcgpu]")]),
    ("unknown-gfx-exclude", BASE + "exclude: [{gfx: MI300X}]\n",
     [(5, "exclude[0].gfx", "unknown gfx family 'MI300X'; MI300X is a GPU of family gfx94X-dcgpu: "
                            "use gfx: [gfx94X-dcgpu]")]),
    ("unknown-gfx-exclude-list", BASE + "exclude: [{gfx: [all, MI300X]}]\n",
     [(5, "exclude[0].gfx[1]", "unknown gfx family 'MI300X'; MI300X is a GPU of family gfx94X-dcgpu: "
                               "use gfx: [gfx94X-dcgpu]")]),
    ("duplicate-os", "matrix:\n  os: [debian-12, debian-12]\n  platform: [cpu]\n  torch: ['2.1']\n",
     [(2, "matrix.os[1]", "duplicate value 'debian-12'")]),
    ("duplicate-torch-across-forms", "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch:\n"
     "    - '2.13.0'\n    - version: '2.13.0'\n      torchvision: '0.28.0'\n",
     [(6, "matrix.torch[1]", "duplicate value '2.13.0'")]),
    ("duplicate-gfx", BASE + "  gfx: [gfx1151, gfx1150, gfx1151]\n",
     [(5, "matrix.gfx[2]", "duplicate value 'gfx1151'")]),
    ("duplicate-yaml-key", "image: a\n" + BASE + "image: b\n",
     [(6, "image", "duplicate key (first at line 1)")]),
    ("duplicate-yaml-key-nested", BASE + "  os: [ubuntu-24.04]\n",
     [(5, "matrix.os", "duplicate key (first at line 2)")]),
    ("duplicate-yaml-key-in-include", inc("os: debian-12, platform: cpu, torch: '2.1', os: debian-13"),
     [(6, "include[0].os", "duplicate key (first at line 6)")]),
    ("include-tag-equals-product-tag", BASE + f"include:\n  - {{os: debian-13, platform: cpu, torch: '2.12.0', "
     f"tag: {CPU_TAG}}}\n",
     [(6, "include[0]", "duplicate cell (same tag as the cell from line 1)")]),
    ("include-equals-product-cell", BASE + "include:\n  - os: debian-12\n    platform: cpu\n"
     "    torch: {version: '2.13.0', torchvision: '0.28.0'}\n",
     [(6, "include[0]", "duplicate cell (same tag as the cell from line 1)")]),
    ("two-includes-one-tag", BASE + "include:\n  - {os: debian-12, platform: cpu, torch: '2.1', tag: t}\n"
     "  - {os: debian-13, platform: cpu, torch: '2.12.0', tag: t}\n",
     [(7, "include[1]", "duplicate cell (same tag as the cell from line 6)")]),
    ("exclude-matches-nothing", BASE + "exclude:\n  - os: ubuntu-24.04\n",
     [(6, "exclude[0]", "matches no cell of the matrix")]),
    ("exclude-gfx-on-cpu-only", BASE + "exclude:\n  - {platform: cpu, gfx: gfx1151}\n",
     [(6, "exclude[0]", "matches no cell of the matrix")]),
    ("rocm-without-gfx-axis", "matrix:\n  os: [debian-12]\n  platform: [cpu, rocm7.2]\n  torch: ['2.1']\n",
     [(3, "matrix.platform", "rocm platforms need at least one gfx family (matrix.gfx)")]),
    ("include-cpu-with-gfx", BASE + "include:\n  - os: debian-12\n    platform: cpu\n    torch: '2.1'\n"
     "    gfx: gfx1151\n", [(9, "include[0].gfx", "a cpu cell has no gfx family")]),
    ("include-rocm-without-gfx", BASE + "include:\n  - os: debian-12\n    platform: rocm7.1\n"
     "    torch: '2.1'\n",
     [(6, "include[0].gfx", "a rocm7.1 cell needs a gfx family")]),
    ("top-level-list", "- matrix: {}\n", [(1, "(top level)", "the matrix file must be a mapping")]),
    ("top-level-scalar", "\n\njust text\n", [(3, "(top level)", "the matrix file must be a mapping")]),
    ("syntax-unclosed-flow", "matrix:\n  os: [debian-12\n  platform: [cpu]\n",
     [(3, "(syntax)", "expected ',' or ']'")]),
    ("syntax-tab", BASE + "\tflavor: [devel]\n", [(5, "(syntax)", "'\\t' that cannot start any token")]),
    ("syntax-two-documents", BASE + "---\nimage: x\n", [(5, "(syntax)", "but found another document")]),
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(t, e, id=i) for i, t, e in ERRORS])
def test_input_errors_name_file_line_and_key(tmp_path: Path, text: str,
                                             expected: list[tuple[int | None, str, str]]) -> None:
    file = tmp_path / "matrix.yaml"
    file.write_text(text, encoding="utf-8")
    problems = problems_of(file)
    assert len(problems) == len(expected), "\n".join(map(str, problems))
    for problem, (line, key, message) in zip(problems, expected, strict=True):
        where = f"{file}:{line}" if line is not None else str(file)
        assert (problem.file, problem.line, problem.key) == (file, line, key)
        assert str(problem).startswith(f"{where}: {key}: ") and message in problem.message, str(problem)


def test_index_urls_key_must_be_a_platform(tmp_path: Path) -> None:
    [problem] = problems_of(write_matrix(tmp_path, BASE + "index_urls:\n  'cpu; id': https://x/\n"))
    assert problem.line == 6 and problem.key.startswith("index_urls.cpu; id")
    assert "'cpu; id' is not allowed here" in problem.message


def test_all_schema_problems_are_reported_together(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, """\
        user: root;id
        matrix:
          os: [debian-11]
          platform: [cpu]
          torch: ["2.x"]
          flavour: [devel]
        include:
          - {os: debian-12, platform: cpu, torch: "2.1", tag: "a b"}
        """)
    assert sorted((p.line, p.key) for p in problems_of(file)) == [
        (1, "user"), (3, "matrix.os[0]"), (5, "matrix.torch[0].version"), (6, "matrix.flavour"),
        (8, "include[0].tag")]


def test_pattern_message_quotes_the_real_pattern(tmp_path: Path) -> None:
    [problem] = problems_of(write_matrix(tmp_path, inc("os: debian-12, platform: cpu, torch: '2.1', tag: 'a;b'")))
    assert schema.TAG_RE in problem.message


def test_bad_index_urls_key_names_the_key_without_pydantic_markers(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, BASE + "index_urls:\n  rocm-bad: https://x/y\n")
    [problem] = problems_of(file)
    assert problem.key == "index_urls.rocm-bad"


def test_override_reason_too_short_is_a_schema_error(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, inc("os: ubuntu-24.04, platform: rocm7.2, torch: '2.9.1', gfx: all, "
                               "override: {reason: 'trust me'}"))
    [problem] = problems_of(file)
    assert (problem.line, problem.key) == (6, "include[0].override.reason")
    assert "at least 10 characters" in problem.message


def test_override_does_not_apply_to_product_cells(tmp_path: Path) -> None:
    file = write_matrix(tmp_path, """\
        matrix:
          os: [ubuntu-24.04]
          platform: [rocm7.2]
          torch: ["2.9.1"]
          gfx: [all]
          override: {reason: "build everything regardless"}
        """)
    [problem] = problems_of(file)
    assert (problem.line, problem.key) == (6, "matrix.override")
    assert problem.message == "unknown key (known here: os, platform, torch, gfx, flavor, channel)"


# --- torch releases and their companions -----------------------------------------------------------------

def test_torch_companions_explicit_default_or_null(tmp_path: Path) -> None:
    """Omitted companions get the paired release (compat.yaml); an explicit null means not installed."""
    cells = load_cells(tmp_path, """\
        matrix:
          os: [debian-12]
          platform: [cpu]
          torch:
            - version: "2.9.1"
              torchvision: "0.24.0"
              torchaudio: "2.9.0"
            - {version: "2.8.0", torchvision: "0.23.0"}
            - "2.13.0"
            - {version: "2.12.1"}
            - {version: "2.11.0", torchaudio: null}
            - {version: "2.10.0", torchvision: null, torchaudio: null}
            - {version: "2.7.1", torchvision: ~}
        """)
    assert [(c.torch, c.torchvision, c.torchaudio) for c in cells] == [
        ("2.9.1", "0.24.0", "2.9.0"),  # explicit versions are kept, even an older patch of the pair
        ("2.8.0", "0.23.0", "2.8.0"),
        ("2.13.0", "0.28.0", "2.11.0"),  # torchaudio stays at 2.11 from torch 2.12 on
        ("2.12.1", "0.27.1", "2.11.0"),
        ("2.11.0", "0.26.0", None),
        ("2.10.0", None, None),
        ("2.7.1", None, "2.7.1"),
    ]
    expectations = [(e["torchvision"], e["torchaudio"]) for e in (c.expectations() for c in cells)]
    assert expectations == [(c.torchvision, c.torchaudio) for c in cells]
