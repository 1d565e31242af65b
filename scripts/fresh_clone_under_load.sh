#!/usr/bin/env bash
# Issue 19's check: `./dev test` passes RUNS times in a row, each from a fresh clone of COMMIT,
# while a CPU-heavy process runs beside it: a `manage.py measure` loop (CPU backend, star_1/128^3,
# its own scratch ledger), as the issue suggests. The 1-minute load average is sampled every 30 s.
# Writes OUT (JSON Lines: one line per run and per load sample; .ndjson, because the *.jsonl files
# of docs/benchmarks/ are ledger exports) and stops at the first failure.
#
#   bash scripts/fresh_clone_under_load.sh [RUNS] [COMMIT] [OUT]
#
# Like CI, against PostgreSQL and Redis when DATABASE_URL / CELERY_BROKER_URL are set (give each
# run of this script its own database and Redis number on a machine shared with other work).
set -uo pipefail
RUNS=${1:-3}
COMMIT=${2:-HEAD}
OUT=${3:-/tmp/fresh_clone_under_load.ndjson}
REPO=$(cd "$(dirname "$0")/.." && pwd)
COMMIT=$(git -C "$REPO" rev-parse "$COMMIT")
WORK=$(mktemp -d /tmp/fresh-clone-load-XXXXXX)
: > "$OUT"

# The CPU-heavy process: measurements back to back in their own checkout's venv and ledger.
git clone -q "$REPO" "$WORK/load" && git -C "$WORK/load" checkout -q "$COMMIT"
(cd "$WORK/load" && ./dev test --collect-only -q >/dev/null 2>&1)  # makes its .venv
(
    cd "$WORK/load"
    export DATABASE_URL="sqlite:///$WORK/load-ledger.sqlite3" FORGESTENCIL_VAR_DIR="$WORK/load-var"
    unset CELERY_BROKER_URL
    .venv/bin/python manage.py migrate -v 0
    while true; do
        .venv/bin/python manage.py measure --case star_1/128x128x128/f32 --backend cpu >/dev/null 2>&1
    done
) &
LOAD_PID=$!
(while true; do echo "{\"load_sample\": \"$(date -u +%FT%TZ)\", \"load1\": $(cut -d' ' -f1 /proc/loadavg)}" >> "$OUT"; sleep 30; done) &
SAMPLER_PID=$!
trap 'kill $SAMPLER_PID 2>/dev/null; pkill -P $LOAD_PID 2>/dev/null; kill $LOAD_PID 2>/dev/null' EXIT

status=0
for run in $(seq 1 "$RUNS"); do
    clone="$WORK/run$run"
    git clone -q "$REPO" "$clone" && git -C "$clone" checkout -q "$COMMIT"
    began=$(date +%s)
    (cd "$clone" && CI=true ./dev test -p no:cacheprovider) > "$WORK/run$run.log" 2>&1
    status=$?
    summary=$(grep -E "^=+ .*(passed|failed|error).* in " "$WORK/run$run.log" | sed 's/=//g; s/"//g' | paste -sd ';' -)
    echo "{\"run\": $run, \"commit\": \"$COMMIT\", \"exit\": $status, \"seconds\": $(( $(date +%s) - began )), \"load1_at_end\": $(cut -d' ' -f1 /proc/loadavg), \"summary\": \"$summary\", \"log\": \"$WORK/run$run.log\"}" >> "$OUT"
    [ "$status" -eq 0 ] || break
done
exit "$status"
