"""`manage.py tune_baselines --backend cpu|cuda (--case ID ... | --matrix NAME) [--library halide]`."""
from django.core.management.base import BaseCommand, CommandError

from measurement.harness.cases import CaseError
from measurement.matrices import matrix_cases
from measurement.services import MeasurementError
from measurement.tuning import tune_baseline

from ._common import add_protocol_arguments, protocol_from


class Command(BaseCommand):
    help = ("Tuning runs: check and time every schedule of a library baseline's family on each case and record "
            "them all with the fastest correct one (BaselineTuned); later measurements of the case use that schedule.")

    def add_arguments(self, parser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--case", nargs="+", help="case ids, e.g. star_1/64x64x64/f32")
        which.add_argument("--matrix", help="every case of a matrix of fixtures/matrices")
        parser.add_argument("--library", default="halide", help="the library baseline to tune (default halide)")
        add_protocol_arguments(parser)

    def handle(self, *args, **options) -> None:
        protocol = protocol_from(options)
        try:
            cases = options["case"] or matrix_cases(options["matrix"])
        except MeasurementError as exc:
            raise CommandError(str(exc)) from None
        failed = []
        for number, case_id in enumerate(cases, 1):
            self.stdout.write(f"[{number}/{len(cases)}] {case_id}")
            try:
                event = tune_baseline(case_id, options["backend"], options["library"], actor=options["actor"],
                                      protocol=protocol, progress=lambda message: self.stderr.write(f"  {message}"))
            except (CaseError, MeasurementError) as exc:
                failed.append(case_id)
                self.stderr.write(f"  not tuned: {exc}")
                continue
            chosen = event.payload["chosen"]
            self.stdout.write(f"  chose {chosen} (event #{event.position})" if chosen else
                              f"  no correct schedule (event #{event.position}); measurements keep the default")
        if failed:
            raise CommandError(f"{len(failed)} of {len(cases)} cases not tuned: {', '.join(failed)}")
