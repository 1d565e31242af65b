#!/usr/bin/env bash
# Run ON the H200 device machine, in one call: gate hand-written candidates a sweep measured ahead
# (issue 16), in a new campaign over the shipped export; measure the edge shapes that borrow the new
# kernels; re-run the gated cases; bring the export back xz-packed. It stops before the gate on any
# other card: the shipped ledger is the H200's, and an H100's times would mix with it (session 40 was
# given H100s for calls that named the H200).
#
#   here:    bash scripts/device_wheels.sh && .venv/bin/python scripts/halide_aot.py
#            mkdir -p device_carry/prev device_carry/keys
#            xz -9 -T2 -c fixtures/ledgers/h200_campaign.jsonl > device_carry/prev/h200.jsonl.xz
#            head -c32 /dev/urandom | base64 > device_carry/keys/publication-N.seed   (a new key each session)
#            (the three largest committed JSON Lines files out of the tree for the call: docs/gpu.md, session 31)
#   device:  run(command="bash scripts/h200_gate.sh TAG SUBJECTS EDGES [ROUNDS]",
#                carry=["device_wheels", "device_carry/bwrap", "device_carry/halide", "device_carry/prev", "device_carry/keys"])
#
# SUBJECTS: CASE=NAME,... (forge_campaign.py --subjects; the cases gated are these). EDGES: comma-separated
# edge cases to measure with the new kernels, or "-". ROUNDS (default 1): rounds a case, so that two subjects of one
# case are both gated in one call (session 44: the gate, not a sweep, where device time is scarce). Writes to $OUT/r (8 files at most come back):
# device_machine_TAG.txt, gpu_composed_TAG.log (not with GATE_FROM=warm, below), h200_campaign_TAG.log, h200_edges_TAG.log,
# h200_matrix_rerun_TAG.json and .log, and export_TAG.jsonl.xz (the last ledger written: re-run, edges or campaign).
# Each step has a deadline in seconds of the call (campaign by 330, edges by 470, re-run by 545: bash's SECONDS), so
# that ten cases and their edges end inside the tool's 600 s with the export packed (GATE_END=S moves all three
# 600 - S s earlier, for a call that less device time is left for); a step a deadline cut short
# says so in its log, and the next call finishes it from this call's export.
# On the machine an earlier call left warm (its /tmp kept), `GATE_FROM=warm` gates over that call's last ledger
# (/tmp/last.jsonl) instead of the carried export, and skips the GPU tests it passed: a second gate in the same
# warm minutes, not a cold start and a re-import (session 47 chained three such calls by hand).
set -uo pipefail
cd "$(dirname "$0")/.."
TAG=${1:?usage: scripts/h200_gate.sh TAG SUBJECTS EDGES [ROUNDS]}
SUBJECTS=${2:?usage: scripts/h200_gate.sh TAG SUBJECTS EDGES [ROUNDS]}
EDGES=${3:?usage: scripts/h200_gate.sh TAG SUBJECTS EDGES [ROUNDS]}
ROUNDS=${4:-1}
END=${GATE_END:-600}
[[ "$END" =~ ^[0-9]+$ ]] && [ "$END" -ge 300 ] && [ "$END" -le 600 ] || { echo "GATE_END=$END: 300 to 600 s (the deadlines count from 0; a call runs 600 s at most)" >&2; exit 2; }
R=${OUT:?the device tool sets OUT}/r
mkdir -p "$R"
source scripts/h200_common.sh
seed=$(carried_seed) || exit 2
if ! record_machine "$R/device_machine_$TAG.txt"; then
    echo "not an H200 ($(head -1 "$R/device_machine_$TAG.txt")): the H200 ledger is not gated here" >&2
    exit 3
fi
source scripts/device_env.sh || exit 1
case ${GATE_FROM:-carried} in
    carried) unpack_carried || exit 1; imported=/tmp/prev.jsonl ;;
    warm) [ -s /tmp/last.jsonl ] && [ -f /tmp/gpu_composed.passed ] || { echo "GATE_FROM=warm: no earlier gate on this machine" >&2; exit 2; }
          imported=/tmp/last.jsonl ;;
    *) echo "GATE_FROM=${GATE_FROM}: carried or warm" >&2; exit 2 ;;
esac
# the composed bounds first (session 40: a composed bound that faulted let a gate judge over a weaker one), and the
# newest candidates on the GPU (session 41's burst: emulated, not yet run on a GPU when it was first offered)
if [ ! -f /tmp/gpu_composed.passed ]; then
    FORGESTENCIL_REQUIRE_GPU=1 python3 -m pytest -p pytest_django.plugin -m gpu -q tests/measurement/test_cuda_bounds.py \
        tests/measurement/test_composed.py tests/forge/test_handwritten_gpu.py::test_the_burst_candidates_are_correct_on_the_gpu \
        > "$R/gpu_composed_$TAG.log" 2>&1 || { tail -5 "$R/gpu_composed_$TAG.log"; exit 1; }
    touch /tmp/gpu_composed.passed
fi
LEDGER_SIGNING_KEY=$(cat "$seed")
export LEDGER_SIGNING_KEY
cases=$(tr "," "\n" <<< "$SUBJECTS" | cut -d= -f1 | awk '!seen[$0]++' | paste -sd, -)
rm -f /tmp/camp.jsonl /tmp/edges.jsonl /tmp/rerun.jsonl  # an earlier gate's on a warm machine: never taken for this one's
began=$(date +%s)
python3 benchmarks/forge_campaign.py --backend cuda --handwritten --handwritten-from 1 --subjects "$SUBJECTS" \
    --import "$imported" --rounds "$ROUNDS" --only "$cases" --deadline $(( END - 270 - SECONDS )) --out /tmp/camp.jsonl > "$R/h200_campaign_$TAG.log" 2>&1
echo "campaign: rc $? at $(( $(date +%s) - began )) s"
ledger=/tmp/camp.jsonl
if [ "$EDGES" != "-" ]; then
    python3 benchmarks/forge_edges.py --backend cuda --tune halide --ledger /tmp/camp.jsonl --out /tmp/edges.jsonl \
        --only "$EDGES" --deadline $(( END - 130 - SECONDS )) > "$R/h200_edges_$TAG.log" 2>&1
    echo "edges: rc $? at $(( $(date +%s) - began )) s"
    [ -s /tmp/edges.jsonl ] && ledger=/tmp/edges.jsonl
fi
python3 benchmarks/matrix_rerun.py --backend cuda --ledger "$ledger" --out /tmp/rerun.jsonl \
    --summary "$R/h200_matrix_rerun_$TAG.json" --only "$cases" \
    --deadline $(( END - 55 - SECONDS )) > "$R/h200_matrix_rerun_$TAG.log" 2>&1
echo "re-run: rc $? at $(( $(date +%s) - began )) s"
[ -s /tmp/rerun.jsonl ] && ledger=/tmp/rerun.jsonl
cp "$ledger" /tmp/last.jsonl
xz -9 -T4 -c "$ledger" > "$R/export_$TAG.jsonl.xz"
tail -n 4 "$R"/h200_*"$TAG".log
