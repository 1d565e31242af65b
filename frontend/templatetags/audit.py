"""Template helpers of the audit UI: plotly figures, highlighted source, number formats."""
from __future__ import annotations

import itertools
import json
import math

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CLexer, CppLexer, DiffLexer

from frontend.recorded import stamp_times
from frontend.tables import BASELINE_COLUMNS, BASELINE_FAMILIES
from ledger.review import MAX_TEXT_CHARS
from measurement import contenders
from measurement.harness.rules import REGRESSION_BAND

register = template.Library()
_plot_ids = itertools.count(1)
_FORMATTER = HtmlFormatter(linenos="table", cssclass="highlight", anchorlinenos=False)
_LEXERS = {"c": CLexer, "cuda": CppLexer, "diff": DiffLexer}


@register.simple_tag
def text_limit() -> int:
    """The longest comment or reason a reviewer may write (the form's maxlength; the server checks it too)."""
    return MAX_TEXT_CHARS


@register.simple_tag
def contention_factor() -> str:
    """How far behind the bound a baseline was for a re-run to leave it out ("3"), from the rule
    itself (measurement.contenders), so the pages' wording cannot drift from it."""
    return f"{contenders.CONTENTION_FACTOR:g}"


@register.simple_tag
def plot(figure: dict) -> SafeString:
    """A div that the page's loader script (base.html) draws with the bundled plotly.min.js; the
    figure travels as JSON in a script element, escaped the way json_script escapes it."""
    element = f"plot-{next(_plot_ids)}"
    data = json.dumps(_finite(figure), allow_nan=False, default=str).replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")
    return format_html('<div class="plot" data-figure="{}"></div><script type="application/json" id="{}">{}</script>',
                       element, element, mark_safe(data))


def _finite(value):
    """NaN and infinities become null (JSON has neither; plotly leaves a gap)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@register.simple_tag
def source_code(text: str | None, language: str = "c") -> SafeString:
    """Server-side syntax highlighting with line numbers (pygments escapes the source). Leading
    blank lines are kept (pygments drops them by default), so line n is the source's line n."""
    if not text:
        return mark_safe("")
    return mark_safe(highlight(text, _LEXERS[language](stripnl=False), _FORMATTER))


@register.simple_tag
def highlight_css() -> SafeString:
    return mark_safe(_FORMATTER.get_style_defs(".highlight"))


@register.filter
def times(value: float | None, digits: int = 2) -> str:
    """A speedup: 2.31×; an em dash when there is none."""
    return "—" if value is None else f"{value:.{digits}f}×"


@register.filter
def baseline_cells(row: dict) -> list[tuple[str, float]]:
    """(baseline family, speedup over it) of an operator table row, every measured one."""
    return [(family, row[column]) for family, column in zip(BASELINE_FAMILIES, BASELINE_COLUMNS) if row.get(column) is not None]


@register.filter
def when(value: str | None) -> str:
    """An ISO 8601 UTC time as pages show it: 2026-11-30 14:02:11 UTC."""
    return f"{value[:19].replace('T', ' ')} UTC" if value else "—"


@register.filter
def recorded(event) -> SafeString:
    """The time of record of an event (a RecordedEvent, or a provenance stamp dict), with the
    time this ledger imported it beside it as a secondary fact (frontend.recorded)."""
    times = event if isinstance(event, dict) else stamp_times(event)
    if not times.get("imported_at"):
        return format_html('<time class="of-record">{}</time>', when(times["time_of_record"]))
    return format_html('<time class="of-record">{}</time> <small class="muted imported">(imported here {})</small>',
                       when(times["time_of_record"]), when(times["imported_at"]))


@register.simple_tag
def noise(spreads: dict | None, noisy: bool, attempts: int = 0) -> SafeString:
    """Why a timing is noisy or not, instead of a bare badge: the variant with the widest pass
    spread ((max - min) / median of its pass times) against the band a quiet timing stays within
    (measurement.harness.rules.REGRESSION_BAND); a noisy timing was kept after every attempt."""
    timed = {name: value for name, value in (spreads or {}).items() if value is not None}
    worst = max(timed, key=timed.get) if timed else None
    tried = f" in each of {attempts} attempts" if attempts > 1 else ""
    if noisy and worst is not None and timed[worst] > REGRESSION_BAND:
        return format_html('<span class="downgraded noise" title="a noisy timing cannot revise a result: a re-run '
                           'of it is inconclusive">noisy: {} spread {} &gt; the {} band{}</span>',
                           worst, percent(timed[worst]), percent(REGRESSION_BAND), tried)
    if noisy:
        return format_html('<span class="downgraded noise">noisy (as the gate recorded it)</span>')
    if worst is None:
        return mark_safe("")
    return format_html('<small class="muted noise">quiet: widest spread {} ({}) within the {} band</small>',
                       percent(timed[worst]), worst, percent(REGRESSION_BAND))


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


@register.filter
def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4e} s"


@register.filter
def get(mapping: dict, key: str):
    return mapping.get(key) if mapping else None
