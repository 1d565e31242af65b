#!/usr/bin/env bash
# Run ON the device machine, in one call: what session 42 left for the H200 (docs/gpu.md, the end): the edge its
# deadline cut (box2d_1/128x8388608/f16 with the burst kernel now admitted), the 3D `burst` sweeps beside the admitted
# kernels on the H200 itself (the H100's ranking of 3D kernels did not hold there for three of five), and Nsight
# Compute on star_2/512³ f32's L2 reads; star_1/128³ f32 last in the f32 sweep (the floor rule capped it near 78.5% of
# copy until session 43). On any other card only the profile runs (its bytes are the kernel's, not the
# card's rate), and the script exits 3: the H200's ledger and sweeps take no other card's times.
#
#   here:    as for scripts/h200_gate.sh (wheels, Halide AOT, the shipped export xz-packed, a new key)
#   device:  run(command="bash scripts/h200_burst3d.sh TAG",
#                carry=["device_wheels", "device_carry/bwrap", "device_carry/halide", "device_carry/prev", "device_carry/keys"])
#
# Writes to $OUT/r (8 files at most come back): device_machine_TAG.txt, h200_edges_TAG.log, export_TAG.jsonl.xz,
# handwritten_burst3d_h200_TAG.json and handwritten_burst3d_f16_h200_TAG.json (rewritten after every case, so a
# sweep the deadline stops keeps its finished cases), burst3d_sweeps_TAG.log, ncu_star2_TAG.tar.xz.
# Deadlines in seconds of the call (bash's SECONDS): edge by 120, f32 sweep by 300, f16 sweep by 470, profile by 570.
set -uo pipefail
cd "$(dirname "$0")/.."
TAG=${1:?usage: scripts/h200_burst3d.sh TAG}
R=${OUT:?the device tool sets OUT}/r
mkdir -p "$R" /tmp/ncu_star2
left() { local s=$(( $1 - SECONDS )); echo $(( s > 1 ? s : 1 )); }  # seconds to a deadline, at least 1
source scripts/h200_common.sh
record_machine "$R/device_machine_$TAG.txt"
h200=$?
source scripts/device_env.sh || exit 1
profile() {
    printf '%s\n' "star_2/512x512x512/f32 copy" "star_2/512x512x512/f32 burst16+by4+l8" "star_2/512x512x512/f32 rows8+lean" \
        | timeout "$(left 570)" bash scripts/candidate_ncu.sh /tmp/ncu_star2 "star2_$TAG"
    tar -C /tmp -cJf "$R/ncu_star2_$TAG.tar.xz" ncu_star2
}
if [ $h200 -ne 0 ]; then
    echo "not an H200 ($(head -1 "$R/device_machine_$TAG.txt")): only the profile runs" >&2
    profile
    exit 3
fi
seed=$(carried_seed) || exit 2
unpack_carried || exit 1
LEDGER_SIGNING_KEY=$(cat "$seed") python3 benchmarks/forge_edges.py --backend cuda --tune halide --ledger /tmp/prev.jsonl \
    --only box2d_1/128x8388608/f16 --deadline "$(left 120)" --out /tmp/edges.jsonl > "$R/h200_edges_$TAG.log" 2>&1
echo "edge: rc $? at $SECONDS s"
[ -s /tmp/edges.jsonl ] && xz -9 -T4 -c /tmp/edges.jsonl > "$R/export_$TAG.jsonl.xz"
timeout "$(left 300)" python3 benchmarks/handwritten_sweep.py --family burst --admitted /tmp/prev.jsonl \
    --cases star_1/512x512x512/f32,varcoef_star_1/512x512x512/f32,star_1/128x256x2048/f32,star_1/128x128x128/f32 \
    --out "$R/handwritten_burst3d_h200_$TAG.json" >> "$R/burst3d_sweeps_$TAG.log" 2>&1
echo "f32 sweep: rc $? at $SECONDS s"
timeout "$(left 470)" python3 benchmarks/handwritten_sweep.py --family burst --admitted /tmp/prev.jsonl \
    --cases star_1/64x1024x1024/f16,varcoef_star_1/512x512x512/f16,star_1/512x512x512/f16 \
    --out "$R/handwritten_burst3d_f16_h200_$TAG.json" >> "$R/burst3d_sweeps_$TAG.log" 2>&1
echo "f16 sweep: rc $? at $SECONDS s"
profile
echo "profile: at $SECONDS s"
grep -h ": " "$R/burst3d_sweeps_$TAG.log" | tail -n 6
