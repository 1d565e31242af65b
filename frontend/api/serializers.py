"""Request and response shapes of the audit API (also what the OpenAPI schema shows)."""
from rest_framework import serializers

from frontend.reruns import KINDS, STATES
from ledger.review import MAX_TEXT_CHARS
from measurement.contenders import CONTENTION_FACTOR


class OperatorRowSerializer(serializers.Serializer):
    result = serializers.CharField(help_text="operator/<backend>/<case>")
    case = serializers.CharField()
    backend = serializers.CharField()
    type = serializers.CharField()
    precision = serializers.CharField()
    shape = serializers.CharField()
    status = serializers.ChoiceField(choices=["admitted", "downgraded", "retracted", "none"])
    revised = serializers.BooleanField(help_text="the result's history holds revisions")
    version = serializers.IntegerField(help_text="1 + revisions: the version sign-offs apply to")
    kernel_hash = serializers.CharField(help_text="sha256 of the admitted kernel's source")
    speedup = serializers.FloatField(allow_null=True, help_text="over the per-case public bound")
    speedup_ci_low = serializers.FloatField(allow_null=True)
    speedup_ci_high = serializers.FloatField(allow_null=True)
    bound_name = serializers.CharField(help_text="the fastest baseline of the measurement behind the speedup")
    bound_label = serializers.CharField(help_text="the bound with its version, schedule or parts, e.g. 'pystencils 2.0'")
    bound_precision = serializers.CharField()
    same_precision = serializers.BooleanField(allow_null=True)
    over_straightforward = serializers.FloatField(allow_null=True, help_text="speedup over the straightforward kernel")
    over_halide = serializers.FloatField(allow_null=True, help_text="speedup over Halide (tuned schedule)")
    over_devito = serializers.FloatField(allow_null=True, help_text="speedup over Devito (CPU)")
    over_pystencils = serializers.FloatField(allow_null=True)
    over_cupyx_ndimage = serializers.FloatField(allow_null=True)
    over_scipy_ndimage = serializers.FloatField(allow_null=True)
    over_torch_conv = serializers.FloatField(allow_null=True)
    over_composed = serializers.FloatField(allow_null=True, help_text="over the hardest composed bound (temporal cases)")
    fraction_of_copy = serializers.FloatField(allow_null=True, help_text="of the measured copy bandwidth")
    device = serializers.CharField(help_text="of the measurement behind the verdict ('' without one)")
    flop_per_byte = serializers.FloatField(allow_null=True, help_text="the case's flops / compulsory bytes")
    bound_class = serializers.ChoiceField(choices=["memory-bound", "compute-bound", "unknown"],
                                          help_text="against the device's balance: FP32 peak / measured copy bandwidth")
    roofline_ceiling = serializers.FloatField(allow_null=True, help_text="the bound's median / the roofline time: the most "
                                                                         "any kernel could gain over that bound there")
    verdict_position = serializers.IntegerField(allow_null=True)
    history = serializers.CharField(help_text="the revisions' lines, ' | '-separated: 'was 1.850x over ...; 0.770x over ...'")
    signoffs = serializers.IntegerField(help_text="different reviewers who signed off the current version")
    publishable = serializers.BooleanField(help_text="two different reviewers signed off the current version")
    provenance_url = serializers.CharField(help_text="absolute; empty for a case without a result")
    api_provenance_url = serializers.CharField(help_text="absolute; empty for a case without a result")


class TargetSerializer(serializers.Serializer):
    """One target of issue 16 over a matrix (measurement.targets.TargetEvaluation)."""

    name = serializers.CharField(help_text="admitted, sealed, memory_median, memory_floor, f16_memory_median, geomean, "
                                           "temporal or rerun_seconds")
    label = serializers.CharField()
    target = serializers.CharField(help_text="what it asks, with its threshold")
    threshold = serializers.FloatField(allow_null=True,
                                       help_text="a fraction of copy, a speedup or seconds; null: a count")
    value = serializers.FloatField(allow_null=True, help_text="the measured value; null: not recorded")
    measured = serializers.CharField(help_text="the value in words with the cases it is over, or why there is none")
    met = serializers.BooleanField(allow_null=True, help_text="over the whole matrix; null: nothing to judge")
    value_met = serializers.BooleanField(allow_null=True, help_text="the value alone meets the threshold over the "
                                                                    "cases counted")
    verdict = serializers.ChoiceField(choices=["met", "not met", "not recorded"])
    scope = serializers.ListField(child=serializers.CharField(), help_text="the cases the target is over")
    counted = serializers.ListField(child=serializers.CharField(), help_text="the cases with a value")
    uncounted = serializers.ListField(child=serializers.CharField(), help_text="cases of the scope without a value")
    failing = serializers.ListField(child=serializers.CharField(), help_text="cases that miss the target on their own")


class ScorecardSerializer(serializers.Serializer):
    matrix = serializers.CharField()
    backend = serializers.CharField()
    cases = serializers.IntegerField()
    targets = TargetSerializer(many=True)


class ApplicationRowSerializer(serializers.Serializer):
    result = serializers.CharField(help_text="app/<architecture>/<name>")
    app = serializers.CharField()
    suite = serializers.CharField(help_text="the named checkout root of a suite's program (hecbench), 'bundled', or ''")
    domain = serializers.CharField()
    architecture = serializers.CharField()
    state = serializers.CharField()
    reason_code = serializers.CharField(help_text="the state's machine-readable reason (too_short, in_scope, ...); '' when none")
    reason = serializers.CharField(help_text="the state's reason as recorded")
    milestone = serializers.CharField(help_text="the last milestone reached")
    status = serializers.ChoiceField(choices=["admitted", "downgraded", "retracted", "rejected", "self-checked", "inconclusive",
                                              "none"])
    revised = serializers.BooleanField()
    version = serializers.IntegerField()
    headline = serializers.FloatField(allow_null=True, help_text="all-dataset geometric mean speedup")
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    datasets = serializers.IntegerField()
    real = serializers.BooleanField(help_text="measured on the application's own architecture")
    amdahl_ceiling = serializers.FloatField(allow_null=True)
    hotspot_fraction = serializers.FloatField(allow_null=True, help_text="the gate's: the baseline's hotspot share by its clocks")
    hotspot_kernel = serializers.CharField(help_text="the top kernel of the triage's profile (M1); '' without one")
    hotspot_share = serializers.FloatField(allow_null=True, help_text="its share of all kernels' GPU time")
    baseline_quality = serializers.FloatField(allow_null=True, help_text="the baseline's fraction of its roofline: "
                                                                         "ncu's speed of light (max of memory and compute "
                                                                         "throughput over peak), time-weighted over M1's "
                                                                         "profiled launches; null: not measured")
    checks = serializers.CharField(help_text='correctness checks of the verdict: "own_check + compare", "own_check" '
                                             '(self-checked), "compare"; "" when not recorded')
    noisy = serializers.CharField(help_text="datasets still noisy after every attempt (the verdict is inconclusive)")
    parity = serializers.BooleanField(help_text="a standing result whose 95% CI reaches 1.0: not shown to be faster")
    above_ceiling = serializers.BooleanField(help_text="the headline is above its Amdahl ceiling: a measurement problem")
    upstream_repo = serializers.CharField(help_text="the repository of the declared upstream; '' for a bundled app")
    upstream_version = serializers.CharField(help_text="the declared upstream commit (a suite's program) or version")
    source_path = serializers.CharField(help_text="the source folder, relative to the suite's root for a suite's program")
    signoffs = serializers.IntegerField(help_text="different reviewers who signed off the current version")
    publishable = serializers.BooleanField()
    provenance_url = serializers.CharField()
    api_provenance_url = serializers.CharField()


class SignOffStateSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    reviewers = serializers.ListField(child=serializers.CharField())
    publishable = serializers.BooleanField()


class EventStampSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    type = serializers.CharField()
    stream = serializers.CharField()
    actor = serializers.CharField()
    hash = serializers.CharField()
    prev_hash = serializers.CharField()
    recorded_at = serializers.CharField(help_text="when this ledger recorded the event (for an imported one: its import)")
    time_of_record = serializers.CharField(help_text="when the fact was first recorded: an imported event's origin time")
    imported_at = serializers.CharField(allow_null=True, help_text="when this ledger imported it; null: recorded here")


class ProvenanceSerializer(serializers.Serializer):
    """The chain of one result; nested parts as documented in docs/audit_api.md."""

    result = serializers.CharField()
    status = serializers.CharField()
    verdict = serializers.JSONField(allow_null=True)
    measurements = serializers.JSONField(required=False, help_text="operator: every variant's raw samples")
    round = serializers.JSONField(required=False, allow_null=True)
    source = serializers.CharField(required=False)
    parent_source = serializers.CharField(required=False, allow_null=True)
    diff = serializers.CharField(required=False)
    datasets = serializers.JSONField(required=False, help_text="application: per dataset, both variants' samples")
    builds = serializers.JSONField(required=False)
    milestones = serializers.JSONField(required=False)
    origin = serializers.JSONField(required=False, help_text="application: its manifest's suite, upstream, commit or version, "
                                                             "source path and every baseline file's sha256")
    hotspots = serializers.JSONField(required=False, help_text="application: the top kernels of the profile shown "
                                                               "(its last M1's, or a later `appgate profile`'s that "
                                                               "measured the speed of light) with their shares, the "
                                                               "speed of light and the event they come from")
    history = serializers.JSONField()
    events = EventStampSerializer(many=True)
    chain_verifies = serializers.BooleanField()
    verification = serializers.JSONField()
    signoff = SignOffStateSerializer()
    signoffs = serializers.JSONField(help_text="every sign-off, oldest first: reviewer, version, comment, position, "
                                               "time_of_record, imported_at")


class RerunRequestSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KINDS)
    target = serializers.CharField(help_text="a case id (kind case) or an application's name (kind app)")
    backend = serializers.ChoiceField(choices=["cpu", "cuda"], default="cpu", help_text="kind case only")


class RerunSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=KINDS)
    target = serializers.CharField()
    backend = serializers.CharField()
    result = serializers.CharField()
    requested_by = serializers.CharField()
    requested_at = serializers.CharField()
    state = serializers.ChoiceField(choices=STATES)
    progress = serializers.ListField(child=serializers.CharField())
    outcome = serializers.JSONField(allow_null=True)
    detail = serializers.CharField(allow_blank=True)
    history_line = serializers.CharField(allow_null=True)
    left_out = serializers.ListField(
        child=serializers.CharField(),
        help_text=f"the library baselines its verdict did not time, out of contention (>= {CONTENTION_FACTOR:g}x behind "
                  "the bound when last timed); [] when none")
    worker = serializers.JSONField(required=False, allow_null=True,
                                   help_text="running only: host, pid, heartbeat_at and alive (false: its worker stopped "
                                             "reporting; the reaper will close the re-run as abandoned)")


class SignOffRequestSerializer(serializers.Serializer):
    result = serializers.CharField()
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_TEXT_CHARS)


class SignOffRecordSerializer(serializers.Serializer):
    result = serializers.CharField()
    result_version = serializers.IntegerField()
    reviewer = serializers.CharField()
    position = serializers.IntegerField()
    signed_at = serializers.CharField()


class SignOffResponseSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="of the AuditSignedOff event")
    result = serializers.CharField()
    state = SignOffStateSerializer()


class RetractionRequestSerializer(serializers.Serializer):
    result = serializers.CharField()
    reason = serializers.CharField(max_length=MAX_TEXT_CHARS, help_text="required: why the result no longer holds")


class RetractionResponseSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="of the ResultRetracted event")
    result = serializers.CharField()
    reason = serializers.CharField()


class FrozenTableSerializer(serializers.Serializer):
    sha256 = serializers.CharField()
    rows = serializers.IntegerField()


class FreezeSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    actor = serializers.CharField()
    recorded_at = serializers.CharField()
    hash = serializers.CharField()
    tables = serializers.DictField(child=FrozenTableSerializer())


class TableCheckSerializer(serializers.Serializer):
    frozen = serializers.CharField()
    now = serializers.CharField()
    matches = serializers.BooleanField()


class FreezeCheckSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    frozen_at = serializers.CharField()
    actor = serializers.CharField()
    tables = serializers.DictField(child=TableCheckSerializer())


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
