#!/usr/bin/env bash
# Nsight Compute on star_1/512^3 f16 (session 29, docs/forge.md): the fair f16 straightforward kernel
# (63% of copy, the bound) beside the plane queue in 8- and 16-byte vectors (rows8 61%, rows16 57%),
# which lost to it and were retracted. Where each one's warps wait (WarpStateStats, SchedulerStats),
# which pipes they fill (ComputeWorkloadAnalysis, InstructionStats) and what reaches DRAM. On the
# device machine after `source scripts/device_env.sh`; one process a kernel (benchmarks/pipe_profile.py),
# the second launch profiled. Writes OUT_DIR/ncu_f16_s29_<design>.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/f16_ncu.sh OUT_DIR}
CASE=${CASE:-star_1/512x512x512/f16}
for design in straightforward rows8 rows16; do
    ncu --clock-control none --kernel-name stencil --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
        --section MemoryWorkloadAnalysis_Tables \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed_op_global_ld.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python3 benchmarks/pipe_profile.py --design "$design" --case "$CASE" > "$OUT_DIR/ncu_f16_s29_$design.txt" 2>&1
    echo "$design: rc $?, $(grep -m1 'Duration' "$OUT_DIR/ncu_f16_s29_$design.txt")"
done
