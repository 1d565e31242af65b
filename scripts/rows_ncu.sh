#!/usr/bin/env bash
# Nsight Compute on session 32's several rows a thread where the gate admitted it (docs/forge.md), each
# beside the kernels it replaced, and the harness's copy of the same array size: what the change removed.
# And star_2/512^3 f32, whose L2 throughput neither it nor taller blocks moved, with L1's hit rate.
# Writes OUT_DIR/ncu_rows_s32_*.txt. The committed reports were made before the rows-a-thread launch was
# fixed (docs/forge.md, session 32): the +ry names there ran the admitted launches; run now, they are the fixed ones.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/rows_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" rows_s32 <<'CASES'
box_1/512x512x512/f32 copy
box_1/512x512x512/f32 short4+alternate
box_1/512x512x512/f32 short4+alternate+lean
box_1/512x512x512/f32 short4+alternate+lean+ry4
star_1/64x1024x1024/f32 rows16
box_1/64x1024x1024/f32 short4+lean
box_1/64x1024x1024/f32 short4+lean+ry4
star_1/64x1024x1024/f32 short4+lean+ry2
star_2/512x512x512/f32 rows8+lean
CASES
