"""Shared programs of the appgate tests: a program whose clocks are exact (so that a verdict rule
is tested on times it cannot get wrong, never on a race with a loaded machine), and a wrong
candidate of a bundled application that still prints the program's PASS."""
from __future__ import annotations

from pathlib import Path

import yaml

from appgate.manifest import suite_roots
from ledger.management.commands.seed_demo import HECBENCH_FORGED_EXPORT
from tests.appgate.test_manifest import write_app

APPS = Path(__file__).resolve().parents[2] / "fixtures" / "apps"
# The last H200 forge call's export (issue 18), the one the demo imports: the triage's ledger
# continued by every forge call, each call's export holding the earlier ones as its first lines
SHIPPED_FORGED = Path(__file__).resolve().parents[2] / HECBENCH_FORGED_EXPORT
HEAT3D_CPU = APPS / "heat3d" / "manifest.cpu.yaml"
HEAT3D_WEIGHT = "r = 0.15, dt = r * h * h;"


def heat3d_with_another_weight() -> str:
    """heat3d.c with the diffusion number r = dt/h^2 at 0.12 instead of 0.15: still stable, and
    its own check (the field against the exact discrete decay at the time it reached) passes,
    but it simulates another time than the baseline: the wrong candidate of issue 17."""
    source = (APPS / "heat3d" / "src" / "heat3d.c").read_text()
    assert source.count(HEAT3D_WEIGHT) == 1, "heat3d.c changed: update the wrong candidate's weight"
    return source.replace(HEAT3D_WEIGHT, "r = 0.12, dt = r * h * h;")


# Prints its own times, exactly: the baseline BASE_MS milliseconds of which half in the hotspot
# (printed in microseconds); -DFORGED halves the hotspot and nothing else, -DOUTSIDE also halves
# the rest (more than the hotspot can explain), -DWRONG changes the result but still passes its
# own check. A second argument 1 (or SLOWING in the environment) makes every run slower than the
# one before it (a run counter in its run folder): every timing of it is noisy. A third argument
# prints time_ms with that many decimals (a clock in steps, as haccmk's "%f" of seconds), and a
# fourth makes every other run that many steps slower; -DCOARSE is -DFORGED printing one decimal
# fewer (a candidate that rewrote the printf).
CLOCKED = r"""
#include <stdio.h>
#include <stdlib.h>
#ifdef COARSE
#define FORGED
#endif
int main(int argc, char** argv) {
    double ms = atof(argv[1]), hot = ms / 2, result = 1.0;
    int runs = 0, slowing = getenv("SLOWING") != NULL || (argc > 2 && atoi(argv[2]));
    FILE* f = fopen("runs", "r");
    if (f) { if (fscanf(f, "%d", &runs) != 1) runs = 0; fclose(f); }
    f = fopen("runs", "w");
    if (f) { fprintf(f, "%d", runs + 1); fclose(f); }
#ifdef FORGED
    ms -= hot / 2; hot /= 2;
#endif
#ifdef OUTSIDE
    ms /= 2;
#endif
#ifdef WRONG
    result = 1.5;
#endif
    if (slowing) ms *= 1 + runs;
    int decimals = argc > 3 ? atoi(argv[3]) : 6, steps = argc > 4 ? atoi(argv[4]) : 0;
#ifdef COARSE
    decimals -= 1;
#endif
    double step = 1;
    for (int d = 0; d < decimals; d++) step /= 10;
    ms += (runs % 2) * steps * step;
    printf("time_ms=%.*f\nhotspot_us=%.3f\nresult=%.6f\nVERIFICATION: PASSED\n", decimals, ms, hot * 1000, result);
    return 0;
}
"""


def clocked_app(tmp_path: Path, candidate: str = "-DFORGED", **changes) -> Path:
    blocks = {
        "name": "clocked",
        "build": {"command": "cc -O1 {switch} -o {out} src/main.c"},
        "switch": {"kind": "build_flag", "baseline": "-DBASELINE", "candidate": candidate},
        "datasets": [{"name": "one", "args": "1.0"}],
        "correctness": {"own_check": {"result_pattern": "VERIFICATION: PASSED",
                                      "failure_pattern": "VERIFICATION: FAILED"},
                        "compare": [{"source": "stdout", "pattern": "^result=([0-9.]+)$", "tolerance": 1e-12}]},
        "timing": {"source": "pattern", "pattern": r"time_ms=([0-9.]+)", "unit": "ms"},
        "hotspot": {"source": "pattern", "pattern": r"hotspot_us=([0-9.]+)", "unit": "us",
                    "case": "star2d_1/64x64/f64"},
    }
    return write_app(tmp_path, CLOCKED, **{**blocks, **changes})


# A suite of outside programs in HeCBench's layout (tests/appgate/test_suite_import.py,
# test_triage_parallel.py): C programs with upstream's Makefile conventions that print the time
# they are given and their own verdict.
COMMIT = "f27000a5188f8ac79bd43fc95a1b3f890c18823d"
# The HeCBench checkout the tests read (never copied): the `hecbench` root the user configured
# (FORGESTENCIL_SUITE_ROOTS), else where this project's machines keep it; tests skip without one.
CORPUS = suite_roots().get("hecbench", Path("/work/shared/corpora/hecbench"))
TIMED = r"(?:Average kernel execution time )([0-9.+-e]+)(?: \(ms\))"
MAKEFILE = """CC        = cc
OPTIMIZE  = yes
program = main
source = main.c
obj = $(source:.c=.o)
CFLAGS := $(EXTRA_CFLAGS) -std=c99 -O2
$(program): $(obj) Makefile
\t$(CC) $(CFLAGS) $(obj) -o $@ -lm

%.o: %.c Makefile
\t$(CC) $(CFLAGS) -c $< -o $@

run: $(program)
\t./$(program) {run}
"""
# Prints the time it is given (per kernel: two kernels, which upstream's runner adds up) and its
# own verdict: PASS unless a third argument asks it to fail.
MAIN = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  double ms = atof(argv[1]), sum = 0;
  int fail = argc > 2 && atoi(argv[2]);
  for (int i = 1; i <= 1000; i++) sum += i;
  printf("Average kernel execution time %f (ms)\n", ms / 2);
  printf("Average kernel execution time %f (ms)\n", ms / 2);
  printf("%s\n", (sum == 500500.0 && !fail) ? "PASS" : "FAIL");
  return 0;
}
"""

def write_suite(folder: Path, model: str, programs: dict) -> Path:
    """A suite checkout in HeCBench's layout (not a git checkout: CORPUS.md names its commit):
    `programs` maps a name to (its benchmarks.yaml test block or None, its main.c or None: no
    folder, its Makefile run target's arguments)."""
    (folder / "src").mkdir(parents=True)
    (folder / "CORPUS.md").write_text(f"Upstream: github.com/zjin-lcf/HeCBench at commit {COMMIT}\n(2026-05-19).\n")
    (folder / "LICENSE").write_text("BSD 3-Clause License\n\nCopyright (c) 2020, Test Authors\nAll rights reserved.\n")
    metadata = {}
    for name, (test, main, run) in programs.items():
        metadata[name] = {"categories": ["testing"], "models": [model]}
        if test:
            metadata[name]["test"] = {**test, "timeout": 60}
        if main is not None:
            program = folder / "src" / f"{name}-{model}"
            program.mkdir()
            (program / "main.c").write_text(main)
            (program / "Makefile").write_text(MAKEFILE.format(run=run))
    (folder / "benchmarks.yaml").write_text(yaml.safe_dump(metadata))
    return folder
