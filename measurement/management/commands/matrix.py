"""`manage.py matrix list|load NAME`: the named case lists in fixtures/matrices."""
from django.core.management.base import BaseCommand, CommandError

from measurement.matrices import MATRIX_DIR, load_matrix, matrix_cases
from measurement.services import MeasurementError


class Command(BaseCommand):
    help = "List the case matrices, or load one (records a CaseDefined event per case; idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["list", "load"])
        parser.add_argument("name", nargs="?")
        parser.add_argument("--actor", default="user:cli")

    def handle(self, *args, **options) -> None:
        if options["action"] == "list":
            for path in sorted(MATRIX_DIR.glob("*.json")):
                self.stdout.write(f"{path.stem}: {len(matrix_cases(path.stem))} cases")
            return
        if not options["name"]:
            raise CommandError("matrix load needs a NAME (see `matrix list`)")
        try:
            added = load_matrix(options["name"], options["actor"])
        except MeasurementError as exc:
            raise CommandError(str(exc)) from None
        total = len(matrix_cases(options["name"]))
        # a case another matrix defined already is not new to the case table (`added` counts those)
        self.stdout.write(f"matrix {options['name']}: {total} cases, {added} of them new to the case table"
                          + (f" ({total - added} defined already)" if added < total else ""))
