"""torch-smoke's loaded.py: the child's report held to its shape, and the loader's environment bounded."""

from __future__ import annotations

import json

import pytest

from builder.smoke.torch_smoke import loaded


def test_the_report_is_held_to_its_shape() -> None:
    good = {"imported": ["torch"], "errors": {"torchaudio": "OSError: x"}, "mapped": ["/a/libc10.so"]}
    ctx = loaded.parse(json.dumps(good).encode())
    assert (ctx.imported, ctx.errors, ctx.mapped, ctx.failure()) == (["torch"], {"torchaudio": "OSError: x"},
                                                                     ["/a/libc10.so"], "")
    bad: object
    for bad in ([], {"imported": "torch", "errors": {}, "mapped": []}, {"imported": [], "errors": {"torch": 1},
                "mapped": []}, {"imported": [], "errors": {}, "mapped": [7]}):
        with pytest.raises(ValueError):
            loaded.parse(json.dumps(bad).encode())
    with pytest.raises(ValueError):
        loaded.parse(b"not json")
    with pytest.raises(ValueError):
        loaded.parse(b" " * (loaded.MAX_REPORT + 1))
    many = loaded.parse(json.dumps({"imported": [], "errors": {}, "mapped": ["/x.so"] * (loaded.MAX_MAPPED + 9)})
                        .encode())
    assert len(many.mapped) == loaded.MAX_MAPPED


def test_the_preloads_keep_the_users_fit_the_limit_and_spill_into_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    env = loaded.loader_env(["/s/torch/lib/libc10.so", "/s/with space/libx.so"],
                            {"LD_PRELOAD": "/u/libmine.so", "LD_LIBRARY_PATH": "/u/lib"}, trace=True)
    assert env["LD_PRELOAD"] == "/u/libmine.so /s/torch/lib/libc10.so"
    assert env["LD_LIBRARY_PATH"] == "/u/lib:/s/with space"  # a space cannot go in LD_PRELOAD
    assert env["LD_TRACE_LOADED_OBJECTS"] == "1" and env["LC_ALL"] == "C"
    through_ldd = loaded.loader_env(["/s/torch/lib/libc10.so"], {}, trace=False)  # ldd sets trace mode itself
    assert "LD_TRACE_LOADED_OBJECTS" not in through_ldd and "LD_PRELOAD" not in through_ldd
    assert through_ldd["LD_LIBRARY_PATH"] == "/s/torch/lib"
    monkeypatch.setattr(loaded, "PRELOAD_LIMIT", 40)
    spilled = loaded.loader_env([f"/site/pkg{i}/lib/libp{i}.so" for i in range(4)], {}, trace=True)
    assert spilled["LD_PRELOAD"] == "/site/pkg0/lib/libp0.so"
    assert spilled["LD_LIBRARY_PATH"] == "/site/pkg1/lib:/site/pkg2/lib:/site/pkg3/lib"


def test_the_loaders_words_are_parsed() -> None:
    out = "\tlibc10.so => not found\n\tlibgomp.so.1 => not found\n\tlibc10.so => not found\n"
    assert loaded.missing_sonames(out) == ["libc10.so", "libgomp.so.1"]
    refused = "/s/x86.so: error while loading shared libraries: /s/x86.so: wrong ELF class: ELFCLASS32"
    assert loaded.missing_sonames(refused) == []
    assert loaded.refusal(refused) == refused
    version = "\t/s/a.so: /lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by /s/a.so)\n"
    assert loaded.refusal(version) == "version `GLIBCXX_3.4.32' not found (required by /s/a.so)"
