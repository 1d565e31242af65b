#!/usr/bin/env bash
# Nsight Compute on the cluster pipeline of sessions 36-37 (forge/handwritten_cluster.py) beside the pipe it would
# replace, on the device machine after `source scripts/device_env.sh`: one process a variant
# (benchmarks/pipe_profile.py), the second launch profiled. Writes OUT_DIR/ncu_cluster_<name>.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/cluster_ncu.sh OUT_DIR}
for spec in "pipe|--design pipe --shuffle" "push_c2|--design cpipe --cluster 2 --height 32 --chunk 256" \
            "pull_c2|--design cpipe --cluster 2 --height 32 --chunk 256 --exchange pull" \
            "signal_c2|--design cpipe --cluster 2 --height 32 --chunk 256 --exchange signal" \
            "signal_c4|--design cpipe --cluster 4 --height 32 --chunk 256 --exchange signal"; do
    name=${spec%%|*}; flags=${spec#*|}
    # shellcheck disable=SC2086
    ncu --clock-control none --kernel-name stencil --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis_Tables \
        python3 benchmarks/pipe_profile.py --case diamond_ts8/512x512x512/f32 $flags > "$OUT_DIR/ncu_cluster_$name.txt" 2>&1
    echo "$name: rc $?, $(grep -m1 'Duration' "$OUT_DIR/ncu_cluster_$name.txt")"
done
