# Sourced ON the device machine by scripts/h200_gate.sh and scripts/h200_burst3d.sh, from the repository root: what
# both check and unpack first, so that the two calls carry and read the same things the same way.

# carried_seed: the path of the one carried publication seed (device_carry/keys/*.seed); fails with why otherwise.
carried_seed() {
    local seeds=(device_carry/keys/*.seed)
    [ ${#seeds[@]} -eq 1 ] && [ -f "${seeds[0]}" ] || { echo "carry exactly one device_carry/keys/*.seed (a new publication key)" >&2; return 2; }
    [ -f device_carry/prev/h200.jsonl.xz ] || { echo "carry device_carry/prev/h200.jsonl.xz (the shipped export)" >&2; return 2; }
    echo "${seeds[0]}"
}

# record_machine FILE: the card, driver, clocks and time into FILE; true where the card is an H200 (the shipped
# ledger is the H200's: no other card's times go into it).
record_machine() {
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader > "$1"
    date -u >> "$1"
    grep -q H200 "$1"
}

# unpack_carried: the Halide AOT folder, and the shipped export as /tmp/prev.jsonl.
unpack_carried() {
    python3 scripts/halide_aot.py --unpack || return 1
    xz -dc device_carry/prev/h200.jsonl.xz > /tmp/prev.jsonl
}
