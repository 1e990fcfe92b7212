"""torch-smoke: proves PyTorch works in this image, and says how to fix it when it does not.

Runs inside the image, shipped as one zipapp (builder.smoke.bundle): stdlib + torch (numpy, torchvision and
triton only where present), Python 3.10+. Reads the image's expectations from /opt/rif/cell.json (or
$RIF_CELL_FILE), written at build time by rocm-image-factory. Every check runs under a time limit
($RIF_CHECK_TIMEOUT seconds overrides it), so a hung GPU call fails its check instead of hanging the run.

Exit codes: 0 all required checks passed (WARN and INFO lines never change it), 1 a check failed,
3 --require-gpu was given but no GPU is visible.

For tests of this program only, not for users: --root DIR reads dev/ and sys/ under DIR instead of /,
and --simulate-gpu ARCH runs the GPU checks on the CPU device as if it were one GPU of that arch.

Modules: core (results, names), platforms (which checks each kind of image runs), diagnostics (what the
container sees), smoke (state the checks share), install, cpu and gpu (the checks), runner (time limits,
order), report (text, JSON, exit codes), __main__ (command line). Imports are relative, so the package runs
both as builder.smoke.torch_smoke on the host and as the top-level torch_smoke inside the zipapp.
"""
