#!/usr/bin/env bash
# Nsight Compute on the standing `lean` kernels (session 30's split + stride, gated in session 31;
# docs/forge.md "Fewer instructions a plane"): is f16 still issue-bound after the cut, and what
# limits the f32 cases below 80% of copy? Each kernel is the campaign's candidate by name
# (benchmarks/pipe_profile.py --candidate: the source the gate measured), one process each, the
# second launch profiled. On the device machine after `source scripts/device_env.sh`.
# Writes OUT_DIR/ncu_lean_s32_<case>.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/lean_ncu.sh OUT_DIR}
while read -r case_id candidate; do
    name=$(echo "$case_id" | tr '/' '_')
    ncu --clock-control none --kernel-name stencil --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active \
        python3 benchmarks/pipe_profile.py --candidate "$candidate" --case "$case_id" > "$OUT_DIR/ncu_lean_s32_$name.txt" 2>&1
    echo "$case_id $candidate: rc $?, $(grep -m1 'Duration' "$OUT_DIR/ncu_lean_s32_$name.txt")"
done <<'CASES'
star_4/512x512x512/f16 rows8+lean
box_1/512x512x512/f16 rows16+alternate+lean
star_1/512x512x512/f16 rows16+alternate+lean
star_2/512x512x512/f32 rows8+lean
box_1/256x256x256/f32 rows16+alternate+lean
CASES
