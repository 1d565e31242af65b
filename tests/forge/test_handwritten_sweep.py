"""benchmarks/handwritten_sweep.py's `sweep_case` with a library baseline beside the variants (session 34's `unroll`
and `narrow` families time every Halide schedule so): run here on the CPU backend, whose kernels are C, so the same
code path that timed the H200 sweeps times a variant and a library on the same buffers. Its first device run stopped
where the library rows were set apart from the variants; this is what would have caught it."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from measurement.backends import get_backend
from measurement.backends.base import Variant

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import handwritten_sweep  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="the CPU backend compiles its kernels with cc")
CASE = "star_1/16x16x24/f32"


def test_a_library_is_timed_beside_the_variants_and_is_never_the_best_variant():
    backend = get_backend("cpu")

    def straightforward_again(case, **_):
        kernel = backend.straightforward(case)
        return kernel.source, kernel.launch, ""

    def wrong(case, **_):
        source, launch, _ = straightforward_again(case)
        return source.replace("coef[0]", "(coef[0] * 2)", 1), launch, ""

    assert "coef[0]" in straightforward_again(handwritten_sweep.parse_case(CASE))[0]
    row = handwritten_sweep.sweep_case(backend, CASE, 1, 2, [("again", {}, straightforward_again), ("wrong", {}, wrong)],
                                       baselines=(Variant("scipy.ndimage"),))
    assert set(row["variants"]) == {"straightforward", "again", "scipy.ndimage"}
    assert row["variants"]["scipy.ndimage"]["parameters"] == {"baseline": "scipy.ndimage"}
    assert all(len(v["samples_ms"]) == 2 and v["median_ms"] > 0 for v in row["variants"].values())
    assert row["best"] == "again"  # a library is the bound to read a variant against, not a variant
    assert "differs from straightforward" in row["rejected"]["wrong"]["error"]
