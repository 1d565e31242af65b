"""The App Agent's M2b on the CPU: the kernel the operator gate admitted for the app's hotspot case
is taken back from the library, spliced into the file the manifest names (a recorded patch) and
gated like any candidate; the baseline M1 built is the one the gate times (built once)."""
from __future__ import annotations

import hashlib

import pytest

from appgate import builds
from appgate.agent import run_agent
from appgate.services import AppProtocol
from ledger.models import Event
from ledger.services import record_from_row
from tests.appgate.test_manifest import write_app
from tests.forge.fixtures import CASE, HONEST

# Explicit heat steps on an n^3 box of floats (the boundary kept): the baseline's own loop, or
# (FORGED) the kernel in src/kernel.h, the forge's interface, which M2b replaces.
PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernel.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
    int n = atoi(argv[1]), steps = atoi(argv[2]);
    size_t count = (size_t)n * n * n, plane = (size_t)n * n;
    float *u = malloc(count * sizeof *u), *y = malloc(count * sizeof *y);
    double coef[2] = {0.4, 0.1}, hot = 0, sum = 0;
    for (size_t i = 0; i < count; i++) u[i] = (float)((i * 7919) % 101) / 101.0f;
    memcpy(y, u, count * sizeof *u);
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        double h0 = now();
#ifdef FORGED
        stencil(u, NULL, y, coef, n, n, n);
#else
        const float c0 = (float)coef[0], c1 = (float)coef[1];
        for (int z = 1; z < n - 1; z++)
            for (int j = 1; j < n - 1; j++)
                for (int x = 1; x < n - 1; x++) {
                    size_t i = (size_t)z * plane + (size_t)j * n + x;
                    y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - n] + u[i + n] + u[i - plane] + u[i + plane]);
                }
#endif
        hot += now() - h0;
        float* t = u; u = y; y = t;
    }
    double t1 = now();
    for (size_t i = 0; i < count; i++) sum += u[i];
    printf("time_s=%.9f\nhotspot_s=%.9f\nchecksum=%.9e\n", t1 - t0, hot, sum);
    printf("VERIFICATION: %s\n", isfinite(sum) && sum > 0 ? "PASSED" : "FAILED");
    return 0;
}
"""
# The application's own kernel behind the forge's interface (a plain loop).
OWN_KERNEL = r"""#include <stddef.h>
void stencil(const float *restrict u, const float *restrict a, float *restrict y, const double *coef, int nz, int ny, int nx) {
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    size_t plane = (size_t)nx * ny;
    for (int z = 1; z < nz - 1; z++)
        for (int j = 1; j < ny - 1; j++)
            for (int x = 1; x < nx - 1; x++) {
                size_t i = (size_t)z * plane + (size_t)j * nx + x;
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane]);
            }
}
"""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.one_database  # the App Agent's M2b on real measurements; its SQL is ordinary appends and reads
def test_m2b_splices_the_admitted_kernel_into_the_candidate_and_the_gate_judges_it(ledger, tmp_path, monkeypatch,
                                                                                  speed_rule_lifted, admit):
    admitted = admit()  # the honest kernel gated on CASE, measured once a session (tests/conftest.py)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kernel.h").write_text(OWN_KERNEL)
    path = write_app(
        tmp_path, PROGRAM, name="heatbox",
        source={"path": ".", "baseline_files": {"src/main.c": sha(PROGRAM), "src/kernel.h": sha(OWN_KERNEL)}},
        build={"command": "cc -O2 -fopenmp {switch} -o {out} src/main.c -lm"},
        env={"OMP_NUM_THREADS": 1},
        datasets=[{"name": "box", "args": "48 10"}],
        correctness={"own_check": {"result_pattern": "VERIFICATION: PASSED", "failure_pattern": "VERIFICATION: FAILED"},
                     "compare": [{"source": "stdout", "pattern": r"checksum=(\S+)", "norm": "max_rel", "tolerance": 1e-6}]},
        timing={"source": "pattern", "pattern": r"time_s=(\S+)"},
        hotspot={"source": "pattern", "pattern": r"hotspot_s=(\S+)", "case": CASE, "kernel_file": "src/kernel.h"})
    built = []
    real_build = builds.build
    monkeypatch.setattr(builds, "build", lambda loaded, variant, *a, **k: built.append(variant) or real_build(loaded, variant, *a, **k))

    row = run_agent(path, "agent:test", protocol=AppProtocol(passes=2, warmup=0, max_attempts=1))

    assert built == ["baseline", "candidate"]  # the baseline of M1 is the gate's
    proposed = record_from_row(Event.objects.get(type="AppCandidateProposed")).data
    assert proposed["proposer"] == "kernel-agent" and list(proposed["files"]) == ["src/kernel.h"]
    spliced = proposed["files"]["src/kernel.h"]
    assert HONEST in spliced and str(admitted.verdict_event.event_id) in spliced
    assert "+#define IDX(z, y, x)" in proposed["patch"] and "-    size_t plane = (size_t)nx * ny;" in proposed["patch"]
    m2b = next(m for m in row.milestones if m["milestone"] == "M2b")
    assert "spliced into src/kernel.h" in m2b["detail"]
    verdict = record_from_row(Event.objects.get(type="AppGateVerdict")).data
    assert verdict["candidate"] == str(Event.objects.get(type="AppCandidateProposed").event_id)
    assert verdict["reasons"] in ([], ["below_floor"]), verdict["detail"]  # correct: checked by both checks
    variants = {record_from_row(e).data["variant"]: record_from_row(e).data for e in Event.objects.filter(type="AppVariantBuilt")}
    assert variants["candidate"]["source_hashes"]["src/kernel.h"] == sha(spliced)
    assert variants["baseline"]["source_hashes"]["src/kernel.h"] == sha(OWN_KERNEL)
    assert (tmp_path / "src" / "kernel.h").read_text() == OWN_KERNEL
