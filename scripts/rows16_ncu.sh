#!/usr/bin/env bash
# Nsight Compute on the single-step plane queue (forge/handwritten.py) where its share of the copy
# bandwidth differs most by case (session 28, docs/forge.md): star_1 f32 at 82% (512^3), 74% (256^3)
# and 92% (128x256x2048), varcoef_star_1/512^3 f32 at 91%, star_1/512^3 f16 at 57%. On the device
# machine after `source scripts/device_env.sh`; one process a case (benchmarks/pipe_profile.py
# --design rows16), the second launch profiled. Writes OUT_DIR/ncu_rows16_<case>.txt.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/rows16_ncu.sh OUT_DIR}
for case_id in star_1/512x512x512/f32 star_1/256x256x256/f32 star_1/128x256x2048/f32 varcoef_star_1/512x512x512/f32 \
               star_1/512x512x512/f16; do
    name=$(echo "$case_id" | tr '/' '_')
    ncu --clock-control none --kernel-name stencil --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis_Tables \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        python3 benchmarks/pipe_profile.py --design rows16 --case "$case_id" > "$OUT_DIR/ncu_rows16_s28_$name.txt" 2>&1
    echo "$case_id: rc $?, $(grep -m1 'Duration' "$OUT_DIR/ncu_rows16_s28_$name.txt")"
done
