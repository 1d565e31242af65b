#!/usr/bin/env bash
# Nsight Compute on session 33's producer warp where it lost: star_2/512^3 f32 (66% of copy against the admitted
# rows8+lean's 76%) and star_4/512^3 f32 (56% against `planes`' 66%), each beside the kernel that stands and
# `planes`, and the harness's copy: why the f64 win does not carry to f32 (docs/forge.md, session 33).
# Writes OUT_DIR/ncu_producer_f32_s33_*.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/producer_f32_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" producer_f32_s33 <<'CASES'
star_2/512x512x512/f32 copy
star_2/512x512x512/f32 rows8+lean
star_2/512x512x512/f32 planes
star_2/512x512x512/f32 design:producer
star_4/512x512x512/f32 planes
star_4/512x512x512/f32 design:producer
CASES
