#!/usr/bin/env bash
# Run ON the GPU device machine, in one call: every compiled Halide schedule of the GPU matrix
# checked and timed against the straightforward kernel (scripts/halide_device_check.py, its
# JSON written to $OUT or .), then the Halide baseline's GPU tests (tests/measurement/test_halide_cuda.py).
#
#   here:    bash scripts/device_wheels.sh && .venv/bin/python scripts/halide_aot.py
#   device:  run(command="bash scripts/halide_device_check.sh",
#                carry=["device_wheels", "device_carry/bwrap", "device_carry/halide"])
#
# HALIDE_CHECK_DEADLINE (seconds, default 300) stops the matrix run from starting another case.
# Extra arguments go to pytest. Exit status: the matrix run's, or pytest's if that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
python3 scripts/halide_aot.py --unpack || exit 1
out=${OUT:-.}
python3 scripts/halide_device_check.py --deadline "${HALIDE_CHECK_DEADLINE:-300}" --out "$out/halide_device_check.json"
check=$?
python3 -m pytest -p pytest_django.plugin -m gpu -q tests/measurement/test_halide_cuda.py "$@" 2>&1 | tee "$out/halide_gpu_tests.log"
tests=${PIPESTATUS[0]}
[ "$check" -ne 0 ] && exit "$check"
exit "$tests"
