#!/usr/bin/env bash
# Run ON the GPU device machine (docs/gpu.md): the `gpu`-marked tests, against the image's cupy
# and torch, with this project's other packages from device_wheels/.
#
#   here:    bash scripts/device_wheels.sh
#   device:  run(command="bash scripts/gpu_tests.sh", carry=["device_wheels", "device_carry/bwrap", "device_carry/halide"])
#
# Extra arguments go to pytest (e.g. -k adversarial, -x). Exit status is pytest's.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
# the Halide baseline's objects, where device_carry/halide was carried (scripts/halide_aot.py)
[ -d device_carry/halide ] && { python3 scripts/halide_aot.py --unpack || exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader || true
python3 -m pytest -p pytest_django.plugin -m gpu -q "$@"
