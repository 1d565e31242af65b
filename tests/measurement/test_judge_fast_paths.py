"""The judge's middle-row shortcuts (measurement/harness/judge.py) decide exactly as the whole-array
tests they stand in front of: np.array_equal with NaN equal to NaN, and a float64 std of exactly 0."""
import numpy as np
import pytest

from measurement.harness.judge import _constant, _same_output


def output(seed: int, dtype=np.float32) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((9, 10, 12)).astype(dtype)
    a[0], a[-1] = np.nan, np.nan  # the poisoned planes around a region
    return a


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_same_output_agrees_with_array_equal(dtype):
    a = output(1, dtype)
    same, other = a.copy(), output(2, dtype)
    corner = a.copy()
    corner[1, 0, 0] += 1  # differs only far from the middle row
    nan_inside = a.copy()
    nan_inside[4, 5, 3] = np.nan
    both_nan = nan_inside.copy()
    cases = [(a, same), (a, other), (a, corner), (a, nan_inside), (nan_inside, both_nan), (a, a[:, :, :11])]
    for x, y in cases:
        assert _same_output(x, y) == (x.shape == y.shape and np.array_equal(x, y, equal_nan=True))


def test_constant_agrees_with_a_zero_standard_deviation():
    flat = np.full((6, 7, 8), 0.3, dtype=np.float32)
    varied_far = flat.copy()
    varied_far[0, 0, 0] = 0.2  # the middle row is constant, the region is not
    varied_middle = flat.copy()
    varied_middle[3, 3, 5] = 0.2
    for region in (flat, varied_far, varied_middle, flat[1:5, 1:6, 2:7]):
        assert _constant(region) == (float(np.std(region.astype(np.float64))) == 0.0)
