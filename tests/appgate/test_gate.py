"""The application gate on small real programs built here: a crash, a hang, a wrong answer, a
failed build and a modified baseline are verdicts (never hangs); the headline is the geometric
mean over every dataset; re-runs retract a result that no longer holds."""
from __future__ import annotations

import math

import pytest

from appgate.models import AppRow
from appgate.services import AppProtocol, rerun, run_gate
from ledger.models import Event
from tests.appgate.test_manifest import write_app

QUICK = AppProtocol(passes=3, warmup=0, max_attempts=1)

# The same smoothing both ways; the candidate (-DFORGED) swaps pointers instead of copying back.
# BROKEN_AT selects a failure of the candidate at run time, for the failure tests.
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
    int n = atoi(argv[1]), steps = atoi(argv[2]);
    const char* broken = getenv("BROKEN_AT");
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), exact = 0;
    for (int i = 0; i < n; i++) a[i] = (i % 7) - 3.0;
    for (int i = 0; i < n; i++) exact += a[i];
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        for (int i = 1; i < n - 1; i++) b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
        b[0] = 0.75 * a[0] + 0.25 * a[1]; b[n - 1] = 0.25 * a[n - 2] + 0.75 * a[n - 1];
#ifdef FORGED
        double* t = a; a = b; b = t;
#else
        memcpy(a, b, n * sizeof *a);
#endif
    }
    double t1 = now(), sum = 0;
    for (int i = 0; i < n; i++) sum += a[i];
#ifdef FORGED
    if (broken && !strcmp(broken, "crash")) abort();
    if (broken && !strcmp(broken, "hang")) for (;;) sleep(1);
    if (broken && !strcmp(broken, "wrong")) sum += 1.0;
#endif
    printf("time_s=%.9f\nhotspot_s=%.9f\n", t1 - t0, t1 - t0);
    /* the boundary weights keep the sum: the smoothing conserves mass */
    printf("VERIFICATION: %s (sum %.6f, expected %.6f)\n", (sum - exact) * (sum - exact) < 1e-12 ? "PASSED" : "FAILED", sum, exact);
    return 0;
}
"""


def smooth_app(tmp_path, program: str = PROGRAM, **changes):
    blocks = {
        "name": "smooth",
        "build": {"command": "cc -O2 {switch} -o {out} src/main.c"},
        "datasets": [{"name": "small", "args": "20000 40"}, {"name": "large", "args": "80000 40"}],
        "correctness": {"own_check": {"result_pattern": "VERIFICATION: PASSED", "failure_pattern": "VERIFICATION: FAILED"},
                        "compare": [{"source": "stdout", "pattern": r"\(sum ([-0-9.]+),", "tolerance": 1e-9}]},
        "timing": {"source": "pattern", "pattern": r"time_s=([0-9.eE+-]+)"},
        "hotspot": {"source": "pattern", "pattern": r"hotspot_s=([0-9.eE+-]+)", "case": "star2d_1/64x64/f64"},
    }
    return write_app(tmp_path, program, **{**blocks, **changes})


def test_the_gate_times_every_dataset_and_headlines_the_geometric_mean(ledger, tmp_path):
    outcome = run_gate(smooth_app(tmp_path), "user:test", QUICK)
    assert outcome.verdict in ("admitted", "rejected", "inconclusive") and outcome.reasons in ([], ["below_floor"])
    data = outcome.verdict_event.data
    assert set(data["datasets"]) == {"small", "large"}
    assert math.isclose(data["headline"], math.sqrt(data["datasets"]["small"] * data["datasets"]["large"]), rel_tol=1e-12)
    measured = Event.objects.filter(type="AppDatasetMeasured")
    assert measured.count() == 2 and Event.objects.filter(type="AppVariantBuilt").count() == 2
    for payload in outcome.measured:
        assert len(payload["samples"]["baseline"]) == len(payload["samples"]["candidate"]) == QUICK.passes
        assert payload["order"][0] != payload["order"][1]  # rotated
        assert 0 < payload["hotspot_fraction"] <= 1
    assert data["amdahl_ceiling"] and data["hotspot_fraction"] and data["real"] == (outcome.verdict == "admitted")
    row = AppRow.objects.get(name="smooth")
    assert row.status == outcome.verdict and row.headline == data["headline"]


@pytest.mark.parametrize("broken, reason, detail", [
    ("crash", "candidate_incorrect", "signal"),
    ("wrong", "candidate_incorrect", "reported failure"),
    ("hang", "candidate_incorrect", "timed out"),
])
def test_a_broken_candidate_is_a_verdict_before_any_timing(ledger, tmp_path, broken, reason, detail):
    path = smooth_app(tmp_path, run={"command": "{out} {args}", "timeout_s": 2}, env={"BROKEN_AT": broken})
    outcome = run_gate(path, "user:test", QUICK)
    assert outcome.verdict == "rejected" and outcome.reasons == [reason] and detail in outcome.detail
    assert not Event.objects.filter(type="AppDatasetMeasured").exists()


def test_a_build_failure_and_a_modified_baseline_are_rejected(ledger, tmp_path):
    path = smooth_app(tmp_path, build={"command": "cc -O2 {switch} -o {out} src/main.c -lno_such_library"})
    outcome = run_gate(path, "user:test", QUICK)
    assert outcome.reasons == ["baseline_build_failed"]
    path = smooth_app(tmp_path)
    (tmp_path / "src" / "main.c").write_text(PROGRAM.replace("0.5 * a[i]", "0.5 * a[i] + 0.0"))
    outcome = run_gate(path, "user:test", QUICK)
    assert outcome.reasons == ["baseline_modified"] and "src/main.c" in outcome.detail


def test_a_rerun_that_fails_retracts_the_standing_result(ledger, tmp_path):
    path = smooth_app(tmp_path, datasets=[{"name": "small", "args": "20000 40"}])
    first = run_gate(path, "user:test", QUICK)
    if first.verdict != "admitted":
        pytest.skip(f"the pointer swap did not clear the floor on this machine this time: {first.detail}")
    smooth_app(tmp_path, datasets=[{"name": "small", "args": "20000 40"}], env={"BROKEN_AT": "wrong"})  # a new release
    outcome, revision = rerun("smooth", "user:reviewer", QUICK)
    assert outcome.verdict == "rejected" and revision.type == "ResultRetracted"
    assert revision.data["revises"] == str(first.verdict_event.event_id)
    row = AppRow.objects.get(name="smooth")
    assert row.status == "retracted" and row.revisions == 1


def test_rerun_of_an_unknown_or_ungated_app_is_refused(ledger, tmp_path):
    from appgate.services import AppGateError, register

    with pytest.raises(AppGateError, match="no application named 'nope'"):
        rerun("nope", "user:test")
    register(smooth_app(tmp_path), "user:test")
    with pytest.raises(AppGateError, match="no standing result"):
        rerun("smooth", "user:test")
