#!/usr/bin/env bash
# Run ON the GPU device machine: the App Agent's M1 triage of the imported HeCBench CUDA programs
# (issue 18, docs/appgate.md#triage) in one call of at most 10 minutes, resumable by the next.
#
#   here:    bash scripts/device_wheels.sh
#            .venv/bin/python scripts/pack_suite.py ../shared/corpora/hecbench --out device_carry/hecbench/hecbench.tar.xz
#            mkdir -p device_carry/keys && cp <this session's publication key> device_carry/keys/  (publication.key or a
#            single *.seed: base64 Ed25519 seed; its public key must be trusted where the export is imported)
#   device:  run(command="bash scripts/h200_triage.sh",
#                carry=["device_wheels", "device_carry/bwrap", "device_carry/keys", "device_carry/hecbench"])
#   here:    commit $OUT's hecbench_triage_h200.json and .jsonl, e.g. as docs/benchmarks/hecbench_triage_h200_1.*
#   device:  run(command="bash scripts/h200_triage.sh docs/benchmarks/hecbench_triage_h200_1", carry=[...the same])
#
# The argument (optional) names the previous call's files inside the repository, without suffix:
# PREFIX.json (its triage report: those programs are not triaged again) and PREFIX.jsonl (its
# ledger export, restored first, so the ledger goes on where it stopped: its checkpoints must be by
# keys trusted in fixtures/keys/trusted_keys.txt, and the carried key (device_carry/keys/publication.key,
# else the one *.seed there) signs what this call adds; it need not be the key of the earlier call).
# What this call writes goes to $OUT only, under other names:
#   hecbench_triage_h200.json   the report: the previous rows and this call's, `not_triaged` left over
#   hecbench_triage_h200.jsonl  the whole ledger's export (the previous events and this call's), signed
#   hecbench_import_h200.json   the import's report; hecbench_triage_h200.log  the progress lines
# TRIAGE_SECONDS (default 540) is the call's budget from this script's start: the triage stops
# starting builds and runs so that it ends, and the export is written, before the 600 s limit.
# TRIAGE_RUN_JOBS (default 4) programs run side by side on the GPU (profiles one at a time; each
# M1 says `concurrent_runs`: a triage's times, the gate times every program alone);
# TRIAGE_RUN_TIMEOUT (default 30) caps each run; TRIAGE_RETRY=timed_out (with a longer cap)
# triages again the resumed programs an earlier call's cap cut. TRIAGE_LEDGER: another export to
# restore than PREFIX.jsonl, one that continues it (the forge calls' last export, which holds the
# triage's ledger and the gate runs after it), e.g. docs/benchmarks/hecbench_forged_h200_3.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${TRIAGE_SECONDS:-540}
resume=${1:-}
ledger=${TRIAGE_LEDGER:-$resume.jsonl}
out=${OUT:-.}
tarball=device_carry/hecbench/hecbench.tar.xz
[ -f "$tarball" ] || { echo "$tarball is missing: run scripts/pack_suite.py here and carry device_carry/hecbench" >&2; exit 1; }
key=$(ls device_carry/keys/publication.key device_carry/keys/*.seed 2>/dev/null | head -1)
if [ -n "$resume" ]; then
    for file in "$resume.json" "$ledger"; do
        [ -f "$file" ] || { echo "$file is missing: give the previous call's files (committed) without suffix" >&2; exit 1; }
    done
    [ -n "$key" ] || { echo "resuming needs a trusted publication key in device_carry/keys/ to sign what this call adds" >&2; exit 1; }
fi
source scripts/device_env.sh || exit 1
if [ -n "$key" ]; then
    LEDGER_SIGNING_KEY=$(cat "$key")
    export LEDGER_SIGNING_KEY
fi
# The profilers where CUDA images keep them, when they are not on PATH already.
for bin in /usr/local/cuda/bin /opt/nvidia/nsight-systems/*/bin /opt/nvidia/nsight-compute/*; do
    [ -d "$bin" ] && case ":$PATH:" in *":$bin:"*) ;; *) PATH="$PATH:$bin" ;; esac
done
export PATH
corpus=$(mktemp -d /tmp/hecbench-XXXXXX)
tar -xJf "$tarball" -C "$corpus" || exit 1
export FORGESTENCIL_SUITE_ROOTS="hecbench=$corpus"
log="$out/hecbench_triage_h200.log"
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    nvcc --version | tail -2; command -v nsys && nsys --version; command -v ncu && ncu --version | tail -1
    echo "corpus: $(wc -l <"$corpus/PACKED") programs unpacked into $corpus; resume: ${resume:-none}"
} 2>&1 | tee "$log"
python3 manage.py migrate --noinput -v 0 || exit 1
if [ -n "$resume" ]; then
    python3 manage.py ledger restore "$ledger" 2>&1 | tail -3 | tee -a "$log" || exit 1
else
    python3 manage.py ledger init --name "hecbench triage on the H200" | tee -a "$log"
fi
python3 manage.py appgate --actor agent:h200-triage suite import "$corpus" --suite hecbench --arch sm_90 \
    --only "$(paste -sd, "$corpus/PACKED")" --report "$out/hecbench_import_h200.json" 2>/dev/null | head -3 | tee -a "$log"
python3 manage.py appgate --actor agent:h200-triage triage "$FORGESTENCIL_VAR_DIR/suites/hecbench/cuda" \
    --jobs 12 --run-jobs "${TRIAGE_RUN_JOBS:-4}" --build-timeout 240 --run-timeout "${TRIAGE_RUN_TIMEOUT:-30}" --deadline $((budget - 20 - SECONDS)) \
    ${resume:+--resume "$resume.json"} ${TRIAGE_RETRY:+--retry "$TRIAGE_RETRY"} \
    --report "$out/hecbench_triage_h200.json" 2>&1 >/dev/null | tee -a "$log"
status=${PIPESTATUS[0]}
python3 manage.py ledger export --out "$out/hecbench_triage_h200.jsonl" 2>&1 | tail -2 | tee -a "$log"
python3 - "$out/hecbench_triage_h200.json" <<'PY' | tee -a "$log"
import json, sys
report = json.load(open(sys.argv[1]))
print(f"triaged {report['triaged']}, left for the next call {len(report['not_triaged'])}: {report['by_reason']}")
PY
echo "${SECONDS} s in all" | tee -a "$log"
exit "$status"
