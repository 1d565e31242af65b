#!/usr/bin/env bash
# Nsight Compute on star2d_1/8192^2 f64, retracted at 0.963x of tuned Halide's auto_anderson2021 schedule: that
# schedule's kernel beside our campaign candidates for the case, the straightforward kernel and the harness's copy
# (session 37's item 5, docs/gpu.md): where Halide's 2% comes from (DRAM bytes read and written, L2 reads, occupancy,
# issue), and what session 41's `burst` candidates changed of it. On the device machine after
# `source scripts/device_env.sh && python3 scripts/halide_aot.py --unpack`; writes OUT_DIR/ncu_star2d_*.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/star2d_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" star2d <<'CASES'
star2d_1/8192x8192/f64 halide:auto_anderson2021
star2d_1/8192x8192/f64 short4
star2d_1/8192x8192/f64 rows16
star2d_1/8192x8192/f64 short4+lean
star2d_1/8192x8192/f64 design:rows16 --by 4 --alternate
star2d_1/8192x8192/f64 design:rows16 --alternate
star2d_1/8192x8192/f64 burst16+by1+l4
star2d_1/8192x8192/f64 burst8+by4+l4
star2d_1/8192x8192/f64 design:straightforward
star2d_1/8192x8192/f64 copy
CASES
