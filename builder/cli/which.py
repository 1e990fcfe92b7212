"""`builder which`: the image for this host's AMD GPUs and its docker run line, as JSON or for a person."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from builder.cli import console
from builder.cli.kit import MatrixOpt, handles_errors
from builder.core.text import safe

WHICH_SOURCES = {"kfd": "KFD topology, /sys/class/kfd", "pci": "PCI IDs: amdgpu is not loaded",
                 "--gfx": "given with --gfx"}


@handles_errors
def which_cmd(matrix: MatrixOpt = Path("matrix.yaml"),
              gfx: Annotated[list[str] | None, typer.Option(
                  "--gfx", metavar="TARGET", help="Skip detection: a GPU of this target, as rocminfo names it "
                                                  "(Name: gfx1100); repeatable.")] = None,
              rocm: Annotated[str | None, typer.Option("--rocm", metavar="X.Y", help="Only this ROCm line.")] = None,
              os_name: Annotated[str | None, typer.Option("--os", metavar="NAME", help="Only this OS, e.g. "
                                                                                       "ubuntu-24.04.")] = None,
              flavor: Annotated[str | None, typer.Option("--flavor", metavar="runtime|devel", help="Only this flavor.")]
              = None,
              registry: Annotated[str | None, typer.Option(
                  "--registry", envvar="RIF_REGISTRY", metavar="HOST/NS",
                  help="Where the images are published (env RIF_REGISTRY); default: the local name builder build "
                       "gives them.")] = None,
              as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
              root: Annotated[Path, typer.Option(
                  "--root", "--sysfs", metavar="DIR",
                  help="Read sys/, dev/ and etc/group under DIR instead of / (a recorded host).")] = Path("/"),
              ) -> None:
    """Which image runs this host's AMD GPUs, and its docker run line (reads /sys and /dev; runs nothing)."""
    from builder import which

    answer = which.recommend(matrix, root, gfx, rocm, os_name, flavor, registry)
    print_which(answer, as_json)
    raise typer.Exit(answer["exit_code"])


def print_which(data: dict[str, Any], as_json: bool) -> None:
    """`builder which`: the JSON as is, or the same facts for a person (docker run lines never wrapped)."""
    if as_json:
        print(json.dumps(data, indent=2))
        return
    out = console.out
    gpus = data["gpus"]
    notes = list(data["notes"])
    if not gpus:
        out.print(f"[red]{safe(notes.pop(0))}[/red]", soft_wrap=True)
        if data["other_gpus"]:
            out.print("Other GPUs on this host (these images are for AMD GPUs with ROCm):")
            for o in data["other_gpus"]:
                out.print(f"  {safe(o['pci'])}  {safe(o['vendor'])} {safe(o['device_id'])}")
        cpu = data["cpu_image"]
        if cpu:
            out.print(f"torch on the CPU: {safe(cpu['tag'])}")
            out.print(f"  {safe(cpu['docker_run'])}", soft_wrap=True)
    else:
        out.print(f"GPUs ({safe(WHICH_SOURCES.get(data['source'], data['source']))}):")
        for row in _gpu_rows(gpus):
            out.print(f"  {row}", soft_wrap=True)
    rec = data["recommended"]
    if rec:
        image = rec["image"]
        out.print(f"\n[bold]Use {safe(image['tag'])}[/bold]", soft_wrap=True)
        out.print(f"  for {safe(rec['for'])}: {safe(rec['target'])}, family {safe(rec['family'] or '-')}",
                  soft_wrap=True)
        out.print(f"  {_image_text(image)}", soft_wrap=True)
        out.print(f"  {safe(rec['docker_run'])}", soft_wrap=True)
        if rec["alternatives"]:
            out.print(f"Other images for {safe(rec['target'])}:")
            for alt in rec["alternatives"]:
                out.print(f"  {safe(alt['tag'])}", soft_wrap=True)
        choices = rec["choices"]
        out.print(f"  narrow with --rocm {'|'.join(choices['rocm'])}, --os {'|'.join(choices['os'])}, "
                  f"--flavor {'|'.join(choices['flavor'])}", soft_wrap=True)
    for miss in data["unmatched"]:
        out.print(f"\n[yellow]No image:[/yellow] {safe(miss['message'])}", soft_wrap=True)
        override = miss["override"]
        if override:
            out.print(f"  HSA_OVERRIDE_GFX_VERSION={safe(override['value'])} would make the runtime treat it as "
                      f"{safe(override['poses_as'])}: {safe(override['risk'])}", soft_wrap=True)
            if override["docker_run"]:
                out.print(f"  at your own risk: {safe(override['docker_run'])}", soft_wrap=True)
            else:
                out.print(f"  but no image carries {safe(override['poses_as'])} either", soft_wrap=True)
    if notes:
        out.print("\nNotes:")
        for note in notes:
            out.print(f"  - {safe(note)}", soft_wrap=True)


def _gpu_rows(gpus: list[dict[str, Any]]) -> list[str]:
    """One row per run of alike GPUs: 'HIP 0-7  8 x AMD Instinct MI300X  gfx942  gfx94X-dcgpu  dGPU'."""
    from builder.which import span

    runs: list[list[dict[str, Any]]] = []
    for g in gpus:
        if runs and all(runs[-1][0][k] == g[k] for k in ("name", "target", "igpu", "supported")):
            runs[-1].append(g)
        else:
            runs.append([g])
    rows = []
    for run in runs:
        g, indices = run[0], [x["index"] for x in run if x["index"] is not None]
        where = f"HIP {span(indices)}" if len(indices) == len(run) else "-"
        name = f"{len(run)} x {g['name']}" if len(run) > 1 else g["name"]
        pci = f"  PCI {g['pci']}" if len(run) == 1 and g["pci"] else ""
        status = "" if g["supported"] else "  [yellow]no image[/yellow]"
        rows.append(f"{safe(where):9} {safe(name)}  {safe(g['target'] or 'gfx?')}  family "
                    f"{safe(g['family'] or '-')}  {'iGPU' if g['igpu'] else 'dGPU'}{safe(pci)}{status}")
    return rows


def _image_text(image: dict[str, Any]) -> str:
    wheels = ("pytorch.org wheels with kernels for every target" if image["gfx"] == "all" else
              f"{image['channel']} wheels with kernels for {image['gfx']} only")
    return safe(f"ROCm {image['rocm']}, torch {image['torch']} (Python {image['python']}), {image['os']}, "
                f"{image['flavor']}; {wheels}")
