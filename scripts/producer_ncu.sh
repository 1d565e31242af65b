#!/usr/bin/env bash
# Nsight Compute on session 33's producer warp where the gate admitted it (star_2/512^3 f64, docs/forge.md),
# beside `planes` (the same ring filled by every thread's cp.async, a block barrier a plane), the kernel it
# replaced (short4+lean) and the harness's copy of the same array size: what the producer warp removed.
# Writes OUT_DIR/ncu_producer_s33_*.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/producer_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" producer_s33 <<'CASES'
star_2/512x512x512/f64 copy
star_2/512x512x512/f64 short4+lean
star_2/512x512x512/f64 planes
star_2/512x512x512/f64 planes+bulk+producer
CASES
