#!/usr/bin/env bash
# Run ON the GPU device machine (docs/gpu.md): the `gpu`-marked tests, against the image's cupy
# and torch, with this project's other packages from device_wheels/.
#
#   here:    bash scripts/device_wheels.sh
#   device:  run(command="bash scripts/gpu_tests.sh", carry=["device_wheels", "device_carry/bwrap", "device_carry/halide"])
#
# Extra arguments go to pytest (e.g. -k adversarial, -x). It cannot pass by skipping (issue 20):
# it exits 1 before any test when CUDA is not usable (CuPy missing or broken, no device: the
# root conftest's gpu_unavailable says which), pytest stops the run if that changes before
# collection (FORGESTENCIL_REQUIRE_GPU), and a run in which any test was skipped for want of a
# GPU exits 1 whatever pytest said. Otherwise the exit status is pytest's.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
python3 -c '
import sys
from conftest import gpu_unavailable
why = gpu_unavailable()
sys.exit(f"CUDA is not usable here, so no gpu test can run: {why}" if why else 0)' || exit 1
# the Halide baseline's objects, where device_carry/halide was carried (scripts/halide_aot.py)
[ -d device_carry/halide ] && { python3 scripts/halide_aot.py --unpack || exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader || true
log=$(mktemp)
FORGESTENCIL_REQUIRE_GPU=1 python3 -m pytest -p pytest_django.plugin -m gpu -q "$@" | tee "$log"
status=${PIPESTATUS[0]}
if grep -q "^SKIPPED .*needs CuPy and a CUDA GPU" "$log"; then
    echo "gpu_tests.sh: tests were skipped for want of a GPU (above): this run proves nothing" >&2
    status=1
fi
rm -f "$log"
exit "$status"
