"""`manage.py measure --case ID [--backend cpu|cuda] [--source FILE --launch JSON]`."""
from django.core.management.base import BaseCommand, CommandError

from measurement.harness.cases import CaseError
from measurement.services import MeasurementError, gate_candidate, measure_baselines

from ._common import add_protocol_arguments, kernel_from, protocol_from, report_table


class Command(BaseCommand):
    help = ("Measure a case with the canonical protocol: the baselines, and a candidate kernel when --source "
            "is given (then the operator gate judges it). Prints a table and records the events.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--case", required=True, help="e.g. star_1/64x64x64/f32")
        parser.add_argument("--source", help="candidate kernel source file (C for cpu, CUDA C++ for cuda)")
        parser.add_argument("--launch", help='launch configuration JSON, e.g. {"threads": 2}')
        parser.add_argument("--hypothesis", default="", help="why this candidate should be faster")
        add_protocol_arguments(parser)

    def handle(self, *args, **options) -> None:
        protocol = protocol_from(options)
        progress = lambda message: self.stderr.write(f"  {message}")  # noqa: E731
        try:
            if options["source"]:
                kernel = kernel_from(options["source"], options["launch"])
                outcome = gate_candidate(options["case"], options["backend"], kernel, options["actor"],
                                         options["hypothesis"], protocol, progress)
                self.stdout.write(report_table(outcome.report))
                self.stdout.write(f"gate verdict: {outcome.verdict.upper()}"
                                  f"{' (' + ', '.join(outcome.reasons) + ')' if outcome.reasons else ''}: {outcome.detail}")
                self.stdout.write(f"recorded events #{outcome.measured_event.position} and #{outcome.verdict_event.position}")
            else:
                report, event = measure_baselines(options["case"], options["backend"], options["actor"], protocol, progress)
                self.stdout.write(report_table(report))
                self.stdout.write(f"recorded event #{event.position} (BaselinesMeasured)")
        except (CaseError, MeasurementError) as exc:
            raise CommandError(str(exc)) from None
