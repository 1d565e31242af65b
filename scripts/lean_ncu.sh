#!/usr/bin/env bash
# Nsight Compute on the standing `lean` kernels (session 30's split + stride, gated in session 31;
# docs/forge.md "Fewer instructions a plane" and session 32): is f16 still issue-bound after the cut,
# and what limits the f32 cases below 80% of copy? Writes OUT_DIR/ncu_lean_s32_*.txt (the committed
# reports were made by this list before scripts/candidate_ncu.sh added the L1 sections and metrics).
set -uo pipefail
OUT_DIR=${1:?usage: scripts/lean_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" lean_s32 <<'CASES'
star_4/512x512x512/f16 rows8+lean
box_1/512x512x512/f16 rows16+alternate+lean
star_1/512x512x512/f16 rows16+alternate+lean
star_2/512x512x512/f32 rows8+lean
box_1/256x256x256/f32 rows16+alternate+lean
CASES
