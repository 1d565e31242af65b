"""Child-side: what a backend offers for one case, and the checks of all its baselines.

Baselines are harness code, so they share one child (one process start, one CUDA context)
instead of one each; candidates and prior bests still get a child of their own. So do the
schedules of a tuning run (measurement.tuning): all of a library's schedules are checked in one
child (schedule_session).
"""
from __future__ import annotations

import time
from typing import Any

from measurement.backends import get_backend
from measurement.backends.base import BaselineUnavailable, Kernel, Variant, ensure_fits, scheduled
from measurement.contenders import same_identity

from .cases import Case, parse_case
from .protocol import CheckRun, CheckSpec, prepare_variant, run_checks


def baseline_session(backend_name: str, case_id: str, specs: list[CheckSpec], schedules: dict[str, str] | None = None,
                     extra: list[Variant] | None = None, leave_out: dict[str, dict] | None = None,
                     expected: list[str] | None = None,
                     ) -> tuple[dict[str, Any], Kernel, dict[str, list[CheckRun] | str]]:
    """(description with each baseline's precision and identity, the straightforward kernel,
    {baseline name: its check runs, or the error that stopped it}). `schedules` names the tuned
    schedule of a library baseline ({"halide": "fused_z4"}, measurement.selectors.tuned);
    a baseline not named runs its default. `extra` are baselines the parent made (the composed
    bounds of measurement.composed), checked here like the backend's own. `leave_out` ({name:
    identity}, measurement.contenders) names baselines out of contention: each is left out, and
    listed in the description's `left_out`, only if the identity installed here is that one.
    `expected`: the libraries the ledger tuned for the case (selectors.tuned), which
    must be here (refuse_missing_libraries)."""
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    names = backend.baseline_names(case)
    refuse_missing_libraries(backend, backend_name, case, names, expected or [])
    ensure_fits(backend, case)  # the first child of a measurement: refuse a case too large for the backend here
    straightforward = backend.straightforward(case)
    variants = [Variant("straightforward", straightforward, "baseline")]
    offered = [Variant(name, schedule=(schedules or {}).get(name)) for name in names if name != "straightforward"]
    left_out = [v.name for v in offered if v.name in (leave_out or {}) and _installed_is(backend, case, v, leave_out[v.name])]
    variants += [v for v in offered if v.name not in left_out]
    variants += extra or []
    began = time.perf_counter()
    precisions, identities, runs, seconds = check_each(backend, case, variants, specs)
    description = {**backend.describe(), "precisions": {"straightforward": case.precision, **precisions},
                   "identities": identities, "left_out": left_out,
                   # where this child's time went (the whole-matrix re-run's budget): each baseline's
                   # preparation (code generation, compilation, library set-up) and checks
                   "baseline_seconds": {**seconds, "session": round(time.perf_counter() - began, 3)}}
    return description, straightforward, runs


def refuse_missing_libraries(backend, backend_name: str, case: Case, offered: list[str], expected: list[str]) -> None:
    """BaselineUnavailable unless every library baseline offered here or tuned for the case can
    run: one that cannot (not installed, not built for the case, not unpacked) would drop out of
    the bound without a word, and the verdict would stand over a weaker one (session 28 measured
    an edge at 3.39x over the straightforward kernel where Halide had not been unpacked; 2.13x
    over tuned Halide before). A tuned library that a FORGESTENCIL_*_BASELINES selection left out
    is refused for the same reason."""
    reasons = {}
    for library in dict.fromkeys([*offered, *expected]):
        reason = backend.library_unavailable(case, library)
        if reason is None and library not in offered:
            reason = f"not among the baselines offered here ({', '.join(offered)}): a baseline selection left it out"
        if reason is not None:
            reasons[library] = reason
    if reasons:
        listed = "; ".join(f"{library}: {reason}" for library, reason in reasons.items())
        raise BaselineUnavailable(f"no verdict on {case.id} ({backend_name}) without its library baselines ({listed}); "
                                  f"a verdict without them would stand over a weaker bound")


def _installed_is(backend, case: Case, variant: Variant, identity: dict[str, Any]) -> bool:
    """Whether the baseline installed here is the recorded one, by the prepared object's identity
    (cheap on CUDA, whose library baselines import and compile nothing until their first run; the
    CPU's Halide and Devito compile here, and so save only their checks and timing)."""
    try:
        prepared = prepare_variant(backend, case, variant)
    except Exception:  # not runnable here: checked with the others, which reports why
        return False
    return same_identity(identity, dict(getattr(prepared, "identity", None) or {}))


def schedule_session(backend_name: str, case_id: str, library: str,
                     specs: list[CheckSpec]) -> tuple[str, dict[str, str], dict[str, list[CheckRun] | str]]:
    """(the library's version, {schedule name: text} of its family for the case, default first,
    {schedule name: its check runs, or the error that stopped it}): the first child of a tuning
    run (measurement.tuning), which checks every schedule of the family where the baseline runs."""
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    reason = backend.library_unavailable(case, library)
    if reason is not None:  # not a family whose every schedule failed: a tuning run here would record that
        raise BaselineUnavailable(f"{library} cannot be tuned on {case.id} here: {reason}")
    ensure_fits(backend, case)
    family = getattr(backend, "baseline_schedules", None)
    if family is None:
        raise ValueError(f"the {backend_name} backend has no schedule families (Backend.baseline_schedules)")
    version, schedules = family(case, library)
    _, _, runs, _ = check_each(backend, case, [scheduled(library, name) for name in schedules], specs)
    return version, schedules, {name: runs[scheduled(library, name).name] for name in schedules}


def check_each(backend, case: Case, variants: list[Variant], specs: list[CheckSpec]) -> tuple[
        dict[str, str], dict[str, dict[str, Any]], dict[str, list[CheckRun] | str], dict[str, dict[str, float]]]:
    """({name: precision}, {name: identity}, {name: check runs or error}, {name: {"prepare": s,
    "checks": s}}) of each variant, prepared once and checked in this child; a variant that cannot
    run here is reported, not fatal."""
    precisions: dict[str, str] = {}
    identities: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[CheckRun] | str] = {}
    seconds: dict[str, dict[str, float]] = {}
    for variant in variants:
        began = time.perf_counter()
        prepared_at = None
        try:
            prepared = prepare_variant(backend, case, variant)
            prepared_at = time.perf_counter()
            precisions[variant.name] = prepared.precision
            identities[variant.name] = dict(getattr(prepared, "identity", None) or {})
            runs[variant.name] = run_checks(backend, case, prepared, specs)
        except Exception as exc:  # reported, not fatal
            runs[variant.name] = f"{type(exc).__name__}: {exc}"
        ended = time.perf_counter()
        prepare_end = prepared_at if prepared_at is not None else ended
        seconds[variant.name] = {"prepare": round(prepare_end - began, 3), "checks": round(ended - prepare_end, 3)}
    return precisions, identities, runs, seconds
