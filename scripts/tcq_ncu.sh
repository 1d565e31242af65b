#!/usr/bin/env bash
# Nsight Compute on `tcq` (forge/handwritten_tensor.py), session 39's best variant on star_1/512^3 f16 (28-37% of
# copy on every case it was timed on, slower than the straightforward kernel on four of five), beside the kernel
# admitted there (rows16+alternate+lean), the straightforward kernel (the fair f16 bound) and the harness's copy:
# whether its time goes to the ring's fill, the barrier a plane or the ldmatrix loads (docs/gpu.md, session 39's
# item 4). On the device machine after `source scripts/device_env.sh`; writes OUT_DIR/ncu_tcq_*.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/tcq_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" tcq <<'CASES'
star_1/512x512x512/f16 design:tcq
star_1/512x512x512/f16 rows16+alternate+lean
star_1/512x512x512/f16 design:straightforward
star_1/512x512x512/f16 copy
CASES
