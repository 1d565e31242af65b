"""`manage.py gate operator --case ID | --all`: re-run the operator gate on admitted kernels."""
import time

from django.core.management.base import BaseCommand, CommandError

from measurement.harness.cases import CaseError
from measurement.reruns import RerunOutcome, record_matrix_rerun, rerun_all, rerun_counts, rerun_gate
from measurement.selectors import standing_operator_results
from measurement.services import MeasurementError

from ._common import add_protocol_arguments, protocol_from, report_table


class Command(BaseCommand):
    help = "Re-run a gate on what it admitted; a result that no longer holds is retracted or downgraded."

    def add_arguments(self, parser) -> None:
        parser.add_argument("gate", choices=["operator"])
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--case", help="re-run this case's admitted kernel")
        which.add_argument("--all", action="store_true", help="re-run every result of --backend not retracted, in case order")
        parser.add_argument("--fan-out", action="store_true",
                            help="with --all: one re-run task per case on the backend's queue, run by the workers "
                                 "(needs CELERY_BROKER_URL); waits for every one, printing n of N as each ends")
        add_protocol_arguments(parser)

    def handle(self, *args, **options) -> None:
        if options["fan_out"] and not options["all"]:
            raise CommandError("--fan-out goes with --all")
        if options["all"]:
            self.rerun_all(options)
            return
        progress = lambda message: self.stderr.write(f"  {message}")  # noqa: E731
        try:
            outcome, revision = rerun_gate(options["case"], options["backend"], options["actor"], protocol_from(options), progress)
        except (CaseError, MeasurementError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(report_table(outcome.report))
        self.stdout.write(f"re-run verdict: {outcome.verdict.upper()}: {outcome.detail or ', '.join(outcome.reasons)}")
        if revision is not None:
            self.stdout.write(f"recorded {revision.type} #{revision.position}: {revision.data['reason']}")

    def rerun_all(self, options) -> None:
        """One line per case as it ends, then the counts; non-zero exit when any case failed."""
        backend, started = options["backend"], time.perf_counter()

        def report(item: RerunOutcome) -> None:
            self.stdout.write(item.line())
            self.stdout.flush()  # a line per case as it ends, also when stdout is a pipe (a device call)

        planned = [row.case for row in standing_operator_results(backend)]
        if options["fan_out"]:
            outcomes = self.fan_out(options, report)
        else:
            outcomes = rerun_all(backend, options["actor"], protocol_from(options), report)
        record_matrix_rerun(backend, options["actor"], planned, outcomes, time.perf_counter() - started, whole=True)
        counts = rerun_counts(outcomes)
        self.stdout.write(f"re-ran {len(outcomes)} {backend} results in {time.perf_counter() - started:.1f} s: "
                          + ", ".join(f"{n} {name}" for name, n in counts.items()))
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} of {len(outcomes)} re-runs failed")

    def fan_out(self, options, report) -> list[RerunOutcome]:
        """The batch of re-runs (frontend.batches), followed to its end: n of N as each ends. The
        workers measure with their own settings; only --passes and --launches travel with the batch."""
        from frontend.batches import BatchError, follow, request_batch  # re-runs are the audit app's tracked work

        protocol_from(options)  # the same checks of --passes and --launches
        protocol = {k: options[k] for k in ("passes", "launches") if options.get(k)} or None
        try:
            batch = request_batch(options["backend"], options["actor"], protocol=protocol)
        except BatchError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"batch {batch}: one re-run task per case queued; progress: /reruns/?batch={batch}")

        def ended(done: int, total: int, item: RerunOutcome) -> None:
            self.stdout.write(f"[{done} of {total}] ", ending="")
            report(item)

        try:
            return follow(batch, ended)
        except BatchError as exc:
            raise CommandError(str(exc)) from None
