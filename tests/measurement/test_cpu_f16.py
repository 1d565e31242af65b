"""The F16C straightforward C kernel of single-step f16 cases (measurement.harness.codegen_c) and its
scalar predecessor, kept as the CPU historical baseline `straightforward_f16_scalar`.

Correctness is the gate's own: check_plan's four runs (two shapes, one odd; guard pages at both
ends) through check_variant, judged by judge_checks. The claim of the codegen_c docstring, that
the vector loop computes each point as the scalar kernel does, is checked bit for bit.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from measurement.backends import cpu
from measurement.backends.base import Variant
from measurement.backends.cpu_compile import CFLAGS, COMPILER
from measurement.harness import codegen
from measurement.harness.cases import parse_case
from measurement.harness.judge import judge_checks
from measurement.harness.oracle import make_inputs
from measurement.harness.plan import check_plan
from measurement.harness.protocol import check_variant

TYPES = ["star_1", "star_2", "star_4", "box_1", "box_2", "star2d_1", "box2d_1", "varcoef_star_1"]
# nx = 36: the written row is whole vectors plus a tail for every radius (34 = 4 x 8 + 2, 28 = 3 x 8 + 4).
SHAPES = {3: "11x12x36", 2: "21x36"}


def f16_case(type_name: str):
    return parse_case(f"{type_name}/{SHAPES[2 if '2d' in type_name else 3]}/f16")


@pytest.fixture(scope="module")
def backend():
    return cpu.create()


@pytest.mark.parametrize("type_name", TYPES)
def test_the_f16c_kernel_passes_the_gates_checks_on_every_single_step_type(type_name):
    case = f16_case(type_name)
    specs = check_plan(case, "cpu", 7)
    correctness = judge_checks(case, specs, check_variant("cpu", case.id, Variant("straightforward"), specs))
    assert correctness.correct, correctness.detail


@pytest.mark.parametrize("type_name", TYPES)
def test_the_f16c_kernel_is_bit_identical_to_the_scalar_one(backend, type_name):
    case = f16_case(type_name)
    inputs, coef = make_inputs(case, 23), backend.coefficients(case.coefficients())
    outputs = {}
    for name in ("straightforward", "straightforward_f16_scalar"):
        buffers = backend.allocate(case, inputs, "end")
        buffers.poison_output()
        backend.prepare(case, Variant(name)).run(buffers, coef)
        outputs[name] = buffers.output().view(np.uint16)
    assert np.array_equal(outputs["straightforward"], outputs["straightforward_f16_scalar"])


def test_the_scalar_f16_kernel_is_a_historical_baseline_of_single_step_f16_cases_only(backend, monkeypatch):
    monkeypatch.delenv(cpu.BASELINES_ENV, raising=False)
    assert "straightforward_f16_scalar" in backend.baseline_names(parse_case("star_1/16x16x24/f16"))
    for case_id in ("star_1/16x16x24/f32", "star_1/16x16x24/f64", "diamond_ts4/16x16x24/f16"):
        assert "straightforward_f16_scalar" not in backend.baseline_names(parse_case(case_id))
        with pytest.raises(ValueError, match="unknown CPU baseline 'straightforward_f16_scalar'"):
            backend.prepare(parse_case(case_id), Variant("straightforward_f16_scalar"))
    monkeypatch.setenv(cpu.BASELINES_ENV, "")
    assert backend.baseline_names(parse_case("star_1/16x16x24/f16")) == ["straightforward"]


def test_f32_f64_and_temporal_f16_cases_keep_the_scalar_kernel():
    for case_id in ("box_2/19x21x23/f32", "star2d_1/37x41/f64", "diamond_ts4/19x21x23/f16"):
        case = parse_case(case_id)
        assert codegen.straightforward_c(case) == codegen.straightforward_c_scalar(case)
        assert "__F16C__" not in codegen.straightforward_c(case)


@pytest.mark.skipif(shutil.which(COMPILER) is None, reason="no C compiler")
def test_the_kernel_converts_eight_halves_at_once_with_f16c_and_falls_back_without(tmp_path):
    source = tmp_path / "kernel.c"
    source.write_text(codegen.straightforward_c(parse_case("box_1/19x21x23/f16")))
    flags = [flag for flag in CFLAGS if flag != "-shared"]

    def assembly(*extra: str) -> str:
        subprocess.run([COMPILER, *flags, *extra, "-S", "-o", str(tmp_path / "kernel.s"), str(source)], check=True)
        return (tmp_path / "kernel.s").read_text()

    assert "vcvtph2ps\t(" not in assembly("-mno-f16c")  # LANES 0: the scalar kernel's casts
    vector = assembly("-mf16c", "-mavx")
    assert "%ymm" in vector and "vcvtph2ps\t(" in vector


def test_the_cpu_f16_rate_benchmark_checks_then_times_all_three_kernels_at_both_thread_counts(backend, monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "f16_naive_rate_cpu.py"
    spec = importlib.util.spec_from_file_location("f16_naive_rate_cpu", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "PASSES", 2)
    monkeypatch.setattr(bench, "LAUNCHES", 2)
    monkeypatch.setattr(bench, "WARMUP", 1)
    result = bench.measure_grid(backend, "box_1/12x14x40", 3)
    assert all(check["correct"] for check in result["checks"].values())
    assert set(result["threads"]) == {"1_thread", "all_threads"}
    for setting in result["threads"].values():
        kernels = setting["kernels"]
        assert set(kernels) == {"f32", "f16", "f16_scalar"}
        assert all(len(k["samples_s"]) == 2 and k["bytes_per_s"] > 0 for k in kernels.values())
        assert setting["ratio"] == kernels["f16"]["bytes_per_s"] / kernels["f32"]["bytes_per_s"]
