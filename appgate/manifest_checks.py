"""The blocks of a manifest that say how a run is judged: its correctness checks (the program's
own and the comparisons of the variants' outputs) and its clocks (timing, hotspot), with the
checks a schema cannot express. Semantics: appgate.checks; design: docs/appgate.md#correctness.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from . import diffs


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OwnCheck(Strict):
    """The program's own verdict: `result_pattern` must match its output, `failure_pattern` must not."""

    result_pattern: str
    failure_pattern: str


class Comparison(Strict):
    """An output compared between the two variants: the groups of every match of `pattern` in
    the program's output (source stdout), or the numbers of a file it writes in its run folder
    (source file), under a norm: max_rel / max_abs / l2_rel (relative to the baseline's norm)
    within `tolerance`, or exact (sha256 of the bytes: a checksum)."""

    source: Literal["stdout", "file"]
    pattern: str | None = None  # stdout only
    file: str | None = None  # file only: relative to the run's folder
    norm: Literal["max_rel", "max_abs", "l2_rel", "exact"] = "max_rel"
    tolerance: float = Field(default=0.0, ge=0)


class Correctness(Strict):
    """Two independent checks (docs/appgate.md#correctness): the program's own and a comparison
    of the variants' outputs. A program that checks nothing omits `own_check`; one whose outputs
    cannot be compared says why in `no_comparison`, and its verdict is self-checked, never REAL."""

    own_check: OwnCheck | None = None
    compare: list[Comparison] = Field(default_factory=list)
    no_comparison: str | None = Field(default=None, min_length=10)
    # A unified diff of ours, never the candidate's, applied to both variants' source before they
    # build (appgate.builds): it makes a program that prints nothing result-dependent print its
    # result, after its timers, for `compare` to read (docs/appgate.md#probes).
    probe: str | None = None


TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
TimeUnit = Literal["s", "ms", "us", "ns"]


class Timing(Strict):
    source: Literal["wall", "pattern"]
    pattern: str | None = None  # a regex with one group: the program's own time, in `unit`
    unit: TimeUnit = "s"
    # Which match counts when the program prints several; `sum`: all of them added up (HeCBench's
    # own runner sums the matches of its timing regex: one time per kernel, their total).
    match: Literal["first", "last", "sum"] = "last"


class Hotspot(Strict):
    """Where the measured hotspot fraction f comes from (for the Amdahl ceiling 1/(1-f+f/S))."""

    source: Literal["pattern", "none"]
    pattern: str | None = None  # a regex with one group: the time spent in the hotspot, in `unit`
    unit: TimeUnit = "s"  # converted to seconds, like timing's: the share f compares the two
    match: Literal["first", "last"] = "last"
    case: str | None = None  # the operator case of the hot loop (the App Agent's M2b)
    # A file of the source holding the hot loop as the forge's kernel function (`void stencil(u,
    # a, y, coef, nz, ny, nx)`, CUDA: `extern "C" __global__`), compiled by the candidate build:
    # the App Agent's M2b replaces it with the admitted kernel it takes back from the library.
    kernel_file: str | None = None


def correctness_problems(c: Correctness, patterns: dict[str, str | None]) -> list[str]:
    """Which checks are declared and whether each can run; adds the patterns to compile to `patterns`."""
    problems = []
    if c.own_check is not None:
        patterns.update({"correctness.own_check.result_pattern": c.own_check.result_pattern,
                         "correctness.own_check.failure_pattern": c.own_check.failure_pattern})
    if c.compare and c.no_comparison:
        problems.append("correctness.no_comparison: only without correctness.compare "
                        "(it says why nothing can be compared)")
    elif not c.compare and not c.no_comparison:
        problems.append("correctness.compare: required: an independent comparison of the variants' outputs (or "
                        "correctness.no_comparison: why none can be compared; the verdict is then self-checked, "
                        "never REAL)")
    if not c.compare and c.own_check is None:
        problems.append("correctness: no check at all: declare own_check, compare or both")
    if c.probe is not None:
        if not c.compare:
            problems.append("correctness.probe: only with correctness.compare (the comparison reads what it prints)")
        try:
            diffs.parse(c.probe)
        except ValueError as error:
            problems.append(f"correctness.probe: not a unified diff with -p1 paths: {error}")
    for index, comparison in enumerate(c.compare):
        where = f"correctness.compare.{index}"
        if comparison.source == "stdout":
            if not comparison.pattern or comparison.file:
                problems.append(f"{where}: a stdout comparison needs a pattern and no file")
            else:
                patterns[f"{where}.pattern"] = comparison.pattern
        elif not comparison.file or comparison.pattern:
            problems.append(f"{where}: a file comparison needs a file and no pattern (all its numbers are compared)")
        elif Path(comparison.file).is_absolute() or ".." in Path(comparison.file).parts:
            problems.append(f"{where}.file: {comparison.file!r} must be a relative path in the run's folder")
        if comparison.norm == "exact" and comparison.tolerance:
            problems.append(f"{where}.tolerance: an exact comparison has no tolerance")
    return problems


def clock_problems(timing: Timing, hotspot: Hotspot) -> list[str]:
    return [f"{where}: unit and match apply to a pattern only (source is {block.source!r})"
            for where, block in (("timing", timing), ("hotspot", hotspot))
            if block.source != "pattern" and (block.unit != "s" or block.match != "last")]
