"""The bound named everywhere (issue 15): a verdict names its bound with library, version and
identity and carries every public baseline with the kernel's speedup over it; the operator table,
its CSV and the case page show them; a downgrade shows the value, CI and bound of the re-run's
own measurement and a history line that says what changed."""
import csv
import io

from frontend.tables import BASELINE_COLUMNS, OPERATOR_COLUMNS, operator_rows, table_csv
from ledger.services import NewEvent, append
from measurement import selectors
from measurement.reruns import history_line
from measurement.services import result_key

TINY = "star_1/64x64x64/f32"


def test_a_verdict_names_its_bound_and_every_baseline(ledger, admit):
    verdict = admit().verdict_event.data
    bound, baselines = verdict["bound"], verdict["baselines"]
    assert bound["name"] in baselines and bound["label"].startswith(bound["name"])
    # every library baseline says what ran: library, installed version, the precision it computes in
    library = {name: b for name, b in baselines.items() if name != "straightforward"}
    assert library and all(b["identity"]["version"] and b["identity"]["computes_in"] for b in library.values())
    assert baselines["scipy.ndimage"]["identity"]["library"] == "scipy.ndimage"
    for b in baselines.values():  # the speedup over each is its median over the kernel's, from the same run
        assert abs(b["speedup"] - b["median"] / verdict["candidate_median"]) < 1e-12
    # the bound is the fastest of them, and the verdict's speedup is the speedup over it
    assert bound["median"] == min(b["median"] for b in baselines.values())
    assert abs(verdict["speedup"] - baselines[bound["name"]]["speedup"]) < 1e-12
    assert f"over {bound['label']}" in verdict["detail"]


def test_the_table_its_api_and_its_csv_carry_the_bound_and_a_column_per_baseline(client, ledger, admit):
    verdict = admit().verdict_event.data
    row = next(r for r in operator_rows() if r["case"] == TINY)
    assert row["bound_label"] == verdict["bound"]["label"]
    # a baseline the run could not use (on a loaded machine the physics floor can judge a tiny case's
    # straightforward timing impossible) has no entry in the verdict and an empty cell, never a number
    for name in ("straightforward", "scipy.ndimage"):
        assert row[f"over_{name.replace('.', '_')}"] == (verdict["baselines"].get(name) or {}).get("speedup"), name
    bound_column = f"over_{verdict['bound']['name'].replace('.', '_')}"
    assert row[bound_column] == verdict["speedup"]  # the bound's own column always holds the headline
    assert row["over_torch_conv"] is None  # not a CPU baseline: an empty cell, not a zero
    parsed = list(csv.DictReader(io.StringIO(table_csv([row], OPERATOR_COLUMNS))))
    assert set(BASELINE_COLUMNS) <= set(parsed[0]) and parsed[0]["bound_label"] == verdict["bound"]["label"]
    api = next(r for r in client.get("/api/tables/operator-cases/").json() if r["case"] == TINY)
    assert api["bound_label"] == verdict["bound"]["label"] and api["over_scipy_ndimage"] == row["over_scipy_ndimage"]
    served = list(csv.DictReader(io.StringIO(client.get("/api/tables/operator-cases/", {"format": "csv"}).content.decode())))
    assert next(r for r in served if r["case"] == TINY)["bound_label"] == verdict["bound"]["label"]
    schema = client.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]["OperatorRow"]["properties"]
    assert {"bound_label", "history", *BASELINE_COLUMNS} <= set(schema)


def test_the_case_page_lists_every_baseline(client, ledger, admit):
    verdict = admit().verdict_event.data
    page = client.get(f"/cases/cpu/{TINY}/").content.decode()
    assert "every public baseline" in page
    for b in verdict["baselines"].values():
        assert b["label"] in page


def test_a_downgrade_shows_the_rerun_measurement_and_its_history(ledger, admit):
    admitted = admit().verdict_event
    key = result_key("cpu", TINY)
    current = selectors.operator_result(key)
    composed = {"name": "composed(star_1 admitted x8)", "label": "composed(star_1 admitted x8)", "precision": "f32",
                "median": 1e-3, "identity": {"steps": 8}}
    was = {"speedup": current.speedup, "speedup_ci": current.speedup_ci, "bound": current.bound,
           "baselines": current.baselines}
    measured = {"speedup": 0.5, "speedup_ci": [0.45, 0.55], "bound": composed,
                "baselines": {composed["name"]: {**composed, "speedup": 0.5}}}
    line = history_line(was, measured, "")
    assert line == (f"was {current.speedup:.3f}x over {current.bound['label']}; "
                    "0.500x over composed(star_1 admitted x8) (95% CI 0.450-0.550)")
    append(NewEvent(stream=key, type="ResultDowngraded", actor="user:reviewer", payload={
        "result": key, "from_value": current.speedup, "to_value": 0.5, "reason": f"gate re-run: {line}",
        "revises": str(admitted.event_id), "was": was, "measured": measured}))
    row = next(r for r in operator_rows() if r["case"] == TINY)
    # the value, its CI and its bound all come from the re-run: never the admission's CI beside the new value
    assert (row["status"], row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"]) == ("downgraded", 0.5, 0.45, 0.55)
    assert row["bound_label"] == "composed(star_1 admitted x8)" and row["over_composed"] == 0.5
    assert row["over_straightforward"] is None  # the re-run's baselines replace the admission's
    assert row["history"] == f"gate re-run: {line}"


def test_a_downgrade_recorded_before_v2_drops_the_admission_ci(ledger, admit):
    admit()
    key = result_key("cpu", TINY)
    append(NewEvent(stream=key, type="ResultDowngraded", actor="user:reviewer", schema_version=1, payload={
        "result": key, "from_value": 2.0, "to_value": 1.1, "reason": "re-run slower"}))
    row = next(r for r in operator_rows() if r["case"] == TINY)
    assert row["speedup"] == 1.1 and row["speedup_ci_low"] is None and row["speedup_ci_high"] is None
