#!/usr/bin/env bash
# Nsight Compute on campaign candidates by name (benchmarks/pipe_profile.py --candidate: the very source
# the gate measured), one process each, the second launch profiled; `copy` for a name profiles the
# harness's copy of the case's array size instead (the ceiling "% of copy" divides by), design:NAME
# pipe_profile.py's --design NAME with any options after it (a kernel campaigns do not offer for the case),
# and halide:SCHEDULE one compiled schedule of the case's Halide pipeline (its kernels are kernel_out*; the
# AOT folder unpacked). Reads "CASE NAME" lines from stdin; on the device machine after
# `source scripts/device_env.sh`.
# Writes OUT_DIR/ncu_TAG_<case>_<name>.txt. Session 32 (docs/forge.md): scripts/lean_ncu.sh's list,
# then scripts/rows_ncu.sh's.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/candidate_ncu.sh OUT_DIR TAG < "CASE NAME" lines}
TAG=${2:?usage: scripts/candidate_ncu.sh OUT_DIR TAG < "CASE NAME" lines}
while read -r case_id candidate; do
    [ -z "$case_id" ] && continue
    name=$(echo "${case_id}_$candidate" | tr '/:+ ' '__-_')
    if [ "$candidate" = copy ]; then
        kernel=(--kernel-name harness_copy --launch-skip 2); what=(--design copy)
    elif [ "${candidate#halide:}" != "$candidate" ]; then  # halide:SCHEDULE, pipe_profile.py --design halide
        kernel=(--kernel-name regex:kernel_out --launch-skip 1); what=(--design halide --schedule "${candidate#halide:}")
    elif [ "${candidate#design:}" != "$candidate" ]; then  # design:NAME [OPTIONS], pipe_profile.py --design NAME [OPTIONS]
        kernel=(--kernel-name stencil --launch-skip 1); read -r -a what <<< "--design ${candidate#design:}"
    else
        kernel=(--kernel-name stencil --launch-skip 1); what=(--candidate "$candidate")
    fi
    ncu --clock-control none "${kernel[@]}" --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active \
        python3 benchmarks/pipe_profile.py "${what[@]}" --case "$case_id" > "$OUT_DIR/ncu_${TAG}_$name.txt" 2>&1
    echo "$case_id $candidate: rc $?, $(grep -m1 'Duration' "$OUT_DIR/ncu_${TAG}_$name.txt")"
done
