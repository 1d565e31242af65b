"""The "devito" CPU baseline (issue 15): correct on every type by the gate's own judge, with the
identity of what ran. That it is measured and recorded in a real CPU measurement is asserted by
tests/measurement/test_gate.py::test_baseline_measurement_records_samples_and_the_bound, whose
measurement already runs every CPU baseline (a second one here would double that cost)."""
from __future__ import annotations

import importlib.util
import json
from importlib.metadata import version

import pytest

from measurement.backends import cpu
from measurement.backends.base import Variant
from measurement.harness.cases import parse_case
from measurement.harness.judge import judge_checks
from measurement.harness.plan import check_plan
from measurement.harness.protocol import check_variant

pytestmark = pytest.mark.skipif(importlib.util.find_spec("devito") is None, reason="devito not installed")

# Small shapes of every type; f64 and f16 once each. Devito builds (~0.5 s) and compiles (~1 s,
# then from the build cache) one Operator per type, halo and precision: that is most of the time.
CASES = [
    ("star_2/19x21x23/f32", "f32"),
    ("box_1/19x21x23/f64", "f64"),
    ("star2d_3/37x41/f32", "f32"),
    ("box2d_2/37x41/f32", "f32"),
    ("varcoef_star_1/19x21x23/f16", "f32"),
    ("diamond_ts3/19x21x23/f32", "f32"),
]


@pytest.mark.parametrize("case_id, computed_in", CASES)
def test_devito_passes_the_gates_correctness_checks_on_every_type(case_id, computed_in):
    """The four checks of the gate (two shapes, fresh and equal coefficients, guard pages at
    both ends), run by check_variant and judged by judge_checks, as for every variant."""
    case = parse_case(case_id)
    specs = check_plan(case, "cpu", 5)
    correctness = judge_checks(case, specs, check_variant("cpu", case_id, Variant("devito"), specs))
    assert correctness.correct, correctness.detail
    prepared = cpu.create().prepare(case, Variant("devito"))
    assert prepared.precision == computed_in
    assert prepared.identity["computes_in"] == computed_in


def test_devito_identity_names_the_library_version_language_and_threads():
    case = parse_case("diamond_ts3/19x21x23/f32")
    identity = cpu.create().prepare(case, Variant("devito")).identity
    assert identity["library"] == "devito" and identity["version"] == version("devito")
    assert identity["language"] == "openmp" and identity["threads"] == cpu.all_cores()
    assert "-fopenmp" in identity["compiler"] and "2 star_1 Operator runs" in identity["time_steps"]



def test_devito_operators_are_compiled_through_the_build_cache_not_devitos_jit_folder(monkeypatch, tmp_path):
    """The library that runs is the build cache's verified artefact (recipe "devito"); Devito's
    own JIT folder, which nothing verifies, gets nothing."""
    from devito import configuration

    jit = configuration["compiler"].get_jit_dir()
    before = set(jit.iterdir()) if jit.is_dir() else set()
    monkeypatch.setenv("FORGESTENCIL_BUILD_CACHE", str(tmp_path))
    cpu.create().prepare(parse_case("box2d_1/9x9/f64"), Variant("devito"))  # a shape of Operator no other test builds
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert [r["recipe"] for r in records] == ["devito"] and "-fopenmp" in records[0]["command"]
    assert (set(jit.iterdir()) if jit.is_dir() else set()) == before
