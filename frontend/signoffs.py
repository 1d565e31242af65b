"""Sign-offs as the pages and the API handle them: every sign-off of a result with its comment,
and one sign-off per reviewer and version.

ledger.review records any sign-off (a second one by the same reviewer counts once); a reviewer
who signs the same version twice was told "Signed off" both times although nothing changed, so
the site refuses the second one and says what is still missing.
"""
from __future__ import annotations

from typing import Any

from ledger import review
from ledger.models import Event
from ledger.records import RecordedEvent

from .recorded import stamp_times


class AlreadySignedOff(review.ReviewError):
    pass


def sign_off(result: str, reviewer: str, comment: str = "") -> RecordedEvent:
    state = review.signoff_state(result)
    if reviewer in state["reviewers"]:
        missing = ("it is publishable already" if state["publishable"]
                   else f"it needs {review.REVIEWERS_NEEDED - len(set(state['reviewers']))} more, different reviewer(s)")
        raise AlreadySignedOff(f"{reviewer} signed off version {state['version']} of {result} already; {missing}")
    return review.sign_off(result, reviewer, comment)


def records(result: str) -> list[dict[str, Any]]:
    """Every sign-off of `result`, oldest first: reviewer, version, comment, event position and
    time of record (the result's stream, on its (stream, position) index)."""
    rows = Event.objects.filter(stream=result, type="AuditSignedOff").order_by("position")
    events = [RecordedEvent.from_body(*row) for row in rows.values_list("body", "prev_hash", "hash")]
    return [{"reviewer": e.data["reviewer"], "version": e.data["result_version"], "comment": e.data["comment"],
             "position": e.position, **stamp_times(e)} for e in events]
