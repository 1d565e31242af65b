#!/usr/bin/env bash
# Run ON the GPU device machine, in one call: the H200 re-gate of issue 15. Every standing result
# of the shipped campaign is measured again against the public-SOTA bound: Halide (a tuning run
# per case first: every AOT schedule checked and timed, the fastest correct one recorded and used),
# the composed bound of the temporal cases, the fair f16 straightforward kernel, and the library
# baselines; then the f16 byte rate of the straightforward kernels (target: f16 >= 0.9x f32).
#
#   here:    bash scripts/device_wheels.sh && .venv/bin/python scripts/halide_aot.py
#            mkdir -p device_carry/keys && cp <this session's publication key> device_carry/keys/publication.key
#   device:  run(command="bash scripts/h200_regate.sh",
#                carry=["device_wheels", "device_carry/bwrap", "device_carry/halide", "device_carry/keys"])
#
# Writes to $OUT: h200_regate.jsonl (the scratch ledger's export: the campaign, the tuning runs,
# the re-run verdicts and revisions, signed with the carried key), h200_regate.json (the
# summary), h200_regate.log, f16_naive_rate_h200.json. REGATE_DEADLINE (seconds, default 480)
# stops the re-gate from starting another case; what it leaves out is listed in the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
python3 scripts/halide_aot.py --unpack || exit 1
out=${OUT:-.}
if [ -f device_carry/keys/publication.key ]; then
    LEDGER_SIGNING_KEY=$(cat device_carry/keys/publication.key)
    export LEDGER_SIGNING_KEY
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader || true
python3 benchmarks/f16_naive_rate.py --out "$out/f16_naive_rate_h200.json" 2>&1 | tail -5
python3 benchmarks/matrix_rerun.py --backend cuda --tune halide --ledger fixtures/ledgers/h200_campaign.jsonl \
    --out "$out/h200_regate.jsonl" --summary "$out/h200_regate.json" --deadline "${REGATE_DEADLINE:-480}" \
    2>&1 | tee "$out/h200_regate.log"
exit "${PIPESTATUS[0]}"
