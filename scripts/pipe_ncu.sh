#!/usr/bin/env bash
# Nsight Compute on the `pipe` variants of session 27 (docs/forge.md, "pipe"), on the device machine
# after `source scripts/device_env.sh`: one process per variant (benchmarks/pipe_profile.py), the
# second launch profiled. Writes OUT_DIR/ncu_pipe_<case>_<variant>.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/pipe_ncu.sh OUT_DIR}
for spec in "diamond_ts4/512x512x512/f32|" "diamond_ts4/512x512x512/f32|--shuffle" "diamond_ts4/512x512x512/f32|--skip" \
            "diamond_ts4/512x512x512/f32|--shuffle --skip" "diamond_ts8/512x512x512/f32|" \
            "diamond_ts8/512x512x512/f32|--shuffle" "diamond_ts8/512x512x512/f32|--shuffle --skip"; do
    case_id=${spec%%|*}; flags=${spec#*|}
    name=$(echo "${case_id%%/*}_${flags:-plain}" | tr -d ' -' )
    # shellcheck disable=SC2086
    ncu --clock-control none --kernel-name stencil --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis \
        python3 benchmarks/pipe_profile.py --case "$case_id" $flags > "$OUT_DIR/ncu_pipe_$name.txt" 2>&1
    echo "$case_id $flags: rc $?, $(grep -m1 'Duration' "$OUT_DIR/ncu_pipe_$name.txt")"
done
