#!/usr/bin/env bash
# Nsight Compute on session 33's producer warp (docs/forge.md): where the gate admitted it (star_2/512^3 f64),
# beside `planes` (the same ring filled by every thread's cp.async, a block barrier a plane), the kernel it
# replaced (short4+lean) and the harness's copy; and where it lost, star_2/512^3 f32 (against the admitted
# rows8+lean) and star_4/512^3 f32 (against `planes`), through pipe_profile.py's --design producer since
# campaigns do not offer it there. Writes OUT_DIR/ncu_producer_s33_*.txt. Session 33 ran the f64 lines in one
# call (log docs/benchmarks/producer_ncu_s33.log) and the f32 ones in another (producer_ncu_s33_f32.log).
set -uo pipefail
OUT_DIR=${1:?usage: scripts/producer_ncu.sh OUT_DIR}
bash "$(dirname "$0")/candidate_ncu.sh" "$OUT_DIR" producer_s33 <<'CASES'
star_2/512x512x512/f64 copy
star_2/512x512x512/f64 short4+lean
star_2/512x512x512/f64 planes
star_2/512x512x512/f64 planes+bulk+producer
star_2/512x512x512/f32 copy
star_2/512x512x512/f32 rows8+lean
star_2/512x512x512/f32 planes
star_2/512x512x512/f32 design:producer
star_4/512x512x512/f32 planes
star_4/512x512x512/f32 design:producer
CASES
