"""`ablation protocol`: re-run a real measurement with one requirement of the protocol removed at a
time, and record the honest value, the ablated value and the distortion (docs/protocol_ablation.md).

Subjects: an operator case (a kernel measured against the per-case public bound by the operator
gate's protocol) or an application (both variants over every dataset by the application gate's
protocol). The quantity is the speedup the gate would report: median(bound) / median(kernel) for
a case, the all-dataset geometric mean of median(baseline) / median(candidate) for an app.

Arms (one `AblationMeasured` each, kind "protocol", all sharing one ablation id, on the stream
`ablation/<id>` with the evidence they name):

  correctness_gate      case: the subject's half-work twin (the same kernel run on the first half
                        of the grid: the rest of the output is never written), rejected by the
                        honest checks, then timed without any check. app: a wrong-but-fast variant
                        selected by --wrong-switch, timed with the program's verdict ignored.
  symmetric_timing      case: the subject timed back to back (no flush, no synchronisation between
                        launches, one clock around the batch), the baselines per launch as the
                        protocol says. app: the baseline timed by the wall clock of the whole
                        process, the candidate by the time the program reports for itself.
  all_dataset_headline  app: the best single dataset instead of the all-dataset geometric mean.
                        case (one grid, one dataset): the most favourable single pass instead of
                        the median over all passes. From the honest measurement's own samples.
  warmup                the protocol without warm-up runs.
  cache_flush           case: no cache (CPU) / L2 (GPU) flush before launches. app: not run (the
                        application protocol has no flush: every timed run is a fresh process).
  interleaving          passes in a fixed order (app: every baseline run, then every candidate run).
  control               nothing removed: the honest protocol again, so the run-to-run noise is
                        on the same table as the distortions.

Honest and ablated measurements are separate runs on the same machine; a distortion inside the
control arm's is noise. Every ablated run is read against the honest run's public bound (the same
baseline), and its notes name what the checks not removed would have said (physics floor, timed
output) and, for the correctness and timing arms, the subject's paired factor in the same run. An ablation never goes through a gate: it records `CandidateMeasured`
(cases) or `AppVariantBuilt` / `AppDatasetMeasured` (apps) on its own stream, so it never
changes the operator map, the app table, or a prior best.
"""
from .app import ablate_app, bundled_manifests, resolve_manifest
from .case import ablate_case, half_work_twin
from .common import ARMS, REQUIREMENTS, AblationError, ProtocolAblation, table

__all__ = ["ARMS", "REQUIREMENTS", "AblationError", "ProtocolAblation", "ablate_app", "ablate_case", "bundled_manifests",
           "half_work_twin", "resolve_manifest", "table"]
