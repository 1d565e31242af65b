"""The machine model stated beside every operator speedup: the FP32 peak computed from a
device's recorded description, the roofline time of a case, the ceiling over a bound, and the
targets the tables check. Kept free of Django so that the tables generated from a ledger export
(benchmarks/operator_table_*.py) and the audit pages (frontend/roofline.py) compute them alike.
"""
from __future__ import annotations

# FP32 lanes per SM by compute capability (Hopper, CC 9.0: 4 partitions x 32 FP32 units); the
# peak is unknown elsewhere rather than guessed.
FP32_LANES = {"9.0": 128}
# The forge's targets (issue 16): measurement/targets.py judges them, for the generated tables and the audit site:
MEMORY_MEDIAN_TARGET = 0.90  # median fraction of the copy bandwidth over the memory-bound f32/f64 cases
MEMORY_FLOOR = 0.80  # no memory-bound f32/f64 case below this fraction
F16_MEMORY_MEDIAN_TARGET = 0.85  # the same median over the memory-bound f16 cases
GEOMEAN_TARGET = 2.35  # same-precision f32 geometric mean over the bound (the seed's A100 headline)
TEMPORAL_TARGET = 1.5  # every diamond_tsT with T >= 4 over its composed bound (T launches of the best step)
RERUN_SECONDS_TARGET = 300.0  # one whole-matrix re-run of the standing results in one device call (MatrixRerunFinished)
TARGETS = {"memory_median": MEMORY_MEDIAN_TARGET, "memory_floor": MEMORY_FLOOR,
           "f16_memory_median": F16_MEMORY_MEDIAN_TARGET, "geomean": GEOMEAN_TARGET, "temporal": TEMPORAL_TARGET}


def fp32_peak(capability, sm_count, clock_mhz) -> float | None:
    """flop/s: SMs x FP32 lanes x 2 (FMA) x the maximum SM clock recorded; None where unknown."""
    lanes = FP32_LANES.get(str(capability))
    return sm_count * lanes * 2 * clock_mhz * 1e6 if lanes and sm_count and clock_mhz else None


def roofline_ceiling(bound_median: float, compulsory_bytes: float, flops: float, copy: float,
                     peak: float | None) -> float:
    """The speedup over a bound of `bound_median` seconds that a kernel at the roofline would
    reach: the compulsory bytes at the copy bandwidth, or the flops at the peak, whichever takes
    longer. It says how far a target is reachable at all over this bound on this machine."""
    return bound_median / max(compulsory_bytes / copy, flops / peak if peak and flops else 0.0)
