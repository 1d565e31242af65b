"""CSV for the table endpoints (`?format=csv`): a small renderer over frontend.tables.table_csv,
so the REST export and the frozen tables are the same bytes for the same rows
(djangorestframework-csv is not a dependency: one function is all this needs)."""
from rest_framework.renderers import BaseRenderer

from frontend.tables import table_csv


class CSVRenderer(BaseRenderer):
    """Renders a view's rows with its `csv_columns`; text (a frozen table) passes through."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, str):
            return data.encode()
        context = renderer_context or {}
        view = context["view"]
        context["response"]["Content-Disposition"] = f'attachment; filename="{view.csv_name}.csv"'
        return table_csv(data, view.csv_columns).encode()
