"""The operator gate end to end on the CPU backend, with real measurements and real events."""
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.verification import verify_ledger
from measurement.backends.base import Kernel
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings
from measurement.matrices import load_matrix
from measurement.models import CaseRow, OperatorResult
from measurement.reruns import rerun_gate
from measurement.services import gate_candidate, measure_baselines, result_key

HONEST = (Path(__file__).parent / "cheats" / "honest.c").read_text()
# Most of a CPU measurement is the cache flush before every launch (twice the last-level cache):
# two passes of two launches are enough for every assertion here (none is on a timing's precision).
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
CASE = "star_1/64x64x64/f32"


def test_loading_a_matrix_defines_its_cases_once(ledger):
    assert load_matrix("cpu", "user:test") == 15
    assert load_matrix("cpu", "user:test") == 0
    row = CaseRow.objects.get(case="box_2/32x32x32/f32")
    assert row.matrices == ["cpu"] and len(row.coefficients) == 10
    assert verify_ledger().ok


@pytest.mark.one_database
def test_baseline_measurement_records_samples_and_the_bound(ledger, monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_CPU_BASELINES", "scipy.ndimage,pystencils,halide,devito")  # every one, once
    report, event = measure_baselines(CASE, "cpu", "user:test", QUICK)
    data = event.data
    names = [v["name"] for v in data["variants"]]
    assert names[:2] == ["straightforward", "scipy.ndimage"]
    assert data["bound"]["name"] in names
    timing = data["variants"][0]["timing"]
    assert len(timing["samples"]) == QUICK.passes and all(len(p) == QUICK.launches for p in timing["samples"])
    assert all(s > 0 for p in timing["samples"] for s in p)
    assert data["copy_bandwidth"] > 0 and len(data["harness_version"]) == 64
    assert all(c["error"] <= 1e-4 for c in data["variants"][0]["correctness"]["checks"])
    assert [c["shape"] for c in data["variants"][0]["correctness"]["checks"]][:2] == [[64, 64, 64], [37, 43, 65]]
    for library in ("devito", "halide"):  # issue 15 (tests/measurement/test_devito_baseline.py, test_halide_cpu.py)
        timed = next(v for v in data["variants"] if v["name"] == library)
        assert timed["correctness"]["correct"] and timed["identity"]["library"] == library and timed["timing"]


@pytest.mark.one_database
def test_an_honest_kernel_is_judged_on_speed_alone(ledger):
    """Correct and possible: admitted or not only by its speed against the bound (with a CI)."""
    outcome = gate_candidate(CASE, "cpu", Kernel(HONEST, {"threads": 1}), "agent:test", protocol=QUICK)
    data = outcome.verdict_event.data
    assert data["state"] == "correct"
    assert data["reasons"] in ([], ["not_faster_than_public_bound"])
    assert (outcome.verdict == "admitted") == (data["speedup_ci"][0] > 1.0)
    assert data["speedup_ci"][0] <= data["speedup"] <= data["speedup_ci"][1]
    assert data["bound"]["name"] in ("straightforward", "scipy.ndimage", "pystencils", "halide", "devito")


TOGGLE = "TEST_KERNEL_TOGGLE"


def toggled_kernel(when_toggled: str) -> str:
    """The honest kernel, changed by `when_toggled` while TOGGLE is set in the environment the
    sandbox passes to kernels (toggle_later): how a driver or library update can change an
    admitted kernel's behaviour after admission."""
    body = HONEST.replace("#include <stddef.h>", "#include <stddef.h>\n#include <stdlib.h>")
    marker = "    const float c0 = (float)coef[0], c1 = (float)coef[1];\n"
    return body.replace(marker, marker + f'    int toggled = getenv("{TOGGLE}") != NULL;\n', 1).replace(
        "                y[i] = ", f"                y[i] = {when_toggled}", 1)


def toggle_later(monkeypatch):
    """What flips TOGGLE on; the sandbox passes only the variables it is told to (none of the service's)."""
    monkeypatch.setenv("FORGESTENCIL_SANDBOX_PASS_ENV", TOGGLE)
    monkeypatch.delenv(TOGGLE, raising=False)
    return lambda: monkeypatch.setenv(TOGGLE, "1")


@pytest.mark.one_database
def test_a_rerun_that_fails_correctness_retracts_the_result(ledger, speed_rule_lifted, monkeypatch):
    toggle = toggle_later(monkeypatch)
    kernel = Kernel(toggled_kernel("(toggled ? 2.0f : 1.0f) * "), {"threads": 1})
    admitted = gate_candidate(CASE, "cpu", kernel, "agent:test", protocol=QUICK)
    assert admitted.verdict == "admitted"
    row = OperatorResult.objects.get(result=result_key("cpu", CASE))
    assert row.status == "admitted" and row.source == kernel.source and row.revisions == 0
    toggle()
    rerun, revision = rerun_gate(CASE, "cpu", "user:reviewer", QUICK)
    assert rerun.verdict == "revised" and rerun.reasons == ["mismatch"]
    assert rerun.verdict_event.data["revises"] == str(admitted.verdict_event.event_id)
    assert revision.type == "ResultRetracted"
    assert revision.data["revises"] == str(admitted.verdict_event.event_id)
    assert revision.data["rerun"] == str(rerun.verdict_event.event_id)
    row.refresh_from_db()
    assert (row.status, row.revisions) == ("retracted", 1)
    assert verify_ledger().ok


@pytest.mark.one_database
def test_a_rerun_that_is_much_slower_downgrades_the_result(ledger, speed_rule_lifted, monkeypatch):
    toggle = toggle_later(monkeypatch)
    # ~8 sin() per point while toggled: about 100x slower, far outside any noise of the bound.
    slow = "(toggled ? (float)(1.0 + 0.0 * (sin(i + 1.0) + sin(i + 2.0) + sin(i + 3.0) + sin(i + 4.0) + sin(i + 5.0) + sin(i + 6.0) + sin(i + 7.0) + sin(i + 8.0))) : 1.0f) * "
    kernel = Kernel(toggled_kernel(slow).replace("#include <stdlib.h>", "#include <stdlib.h>\n#include <math.h>"), {"threads": 1})
    admitted = gate_candidate(CASE, "cpu", kernel, "agent:test", protocol=QUICK)
    assert admitted.verdict == "admitted"
    toggle()
    rerun, revision = rerun_gate(CASE, "cpu", "user:reviewer", QUICK)
    if rerun.verdict == "inconclusive":
        # Noisy timing revises nothing, however slow (measurement.reruns): the usual outcome on a
        # shared 2-core CPU, where the 0.4 ms bound rarely stays within the 2% band.
        assert rerun.report.noisy and revision is None and rerun.inconclusive.startswith("noisy: spread ")
        assert OperatorResult.objects.get(result=result_key("cpu", CASE)).status == "admitted"
        return
    assert rerun.verdict == "reconfirmed"
    assert revision is not None and revision.type == "ResultDowngraded", rerun.detail
    assert revision.data["from_value"] == pytest.approx(admitted.speedup)
    assert revision.data["to_value"] < admitted.speedup * 0.98
    row = OperatorResult.objects.get(result=result_key("cpu", CASE))
    assert (row.status, row.speedup, row.revisions) == ("downgraded", revision.data["to_value"], 1)
    assert verify_ledger().ok


@pytest.mark.one_database
def test_measure_command_prints_the_table(ledger, capsys, tmp_path, monkeypatch):
    # One timing attempt (the command has no option for it; a shared 2-core CPU is rarely
    # within the 2% band, and three attempts of each measurement only repeat the same table).
    monkeypatch.setitem(DEFAULT_PROTOCOL, "cpu", ProtocolSettings(warmup=1, max_attempts=1))
    call_command("measure", "--case", CASE, "--passes", "2", "--launches", "2")
    out = capsys.readouterr().out
    assert "straightforward" in out and "% copy BW" in out and "public bound:" in out and "BaselinesMeasured" in out
    source = tmp_path / "k.c"
    source.write_text(HONEST)
    call_command("measure", "--case", CASE, "--source", str(source), "--launch", '{"threads": 1}', "--passes", "2", "--launches", "2")
    assert "gate verdict:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--case", "star_9/64x64x64/f32"], "radius must be 1..4"),
        (["--case", "star_1/64x64/f32"], "3D but shape"),
        (["--case", "star_1/64x64x64/f8"], "bad precision"),
        (["--case", CASE, "--source", "/nonexistent.c"], "no such file"),
        (["--case", CASE, "--source", __file__, "--launch", "{threads"], "not valid JSON"),
    ],
)
def test_measure_command_errors_are_clear(ledger, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("measure", *args)


def test_gate_rerun_without_an_admitted_kernel_is_a_clear_error(ledger):
    with pytest.raises(CommandError, match="has no admitted kernel"):
        call_command("gate", "operator", "--case", CASE)
