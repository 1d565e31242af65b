"""The regular expressions of a manifest (timing, hotspot, result, failure and comparison
patterns), run with RE2: matching time is linear in the text whatever the pattern, so a pattern
such as `(a+)+$` cannot hang the gate on a program's output the way Python's backtracking `re`
does (it ran past the run's timeout: the timeout bounds the program, not the matching after it).

RE2 has no backreferences and no lookaround; a manifest using them is refused when it is loaded
(appgate.manifest), with RE2's own message.

Every pattern is multi-line: `^` and `$` match at the start and end of each line of the output
(before issue 17 they matched only at the ends of the whole output, undocumented); `.` never
crosses a line. Which match counts is the caller's (appgate.checks: timing and hotspot take the
first or last match as the manifest says, comparisons take every match, in order).
"""
from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error goes into the manifest's problem list, not to stderr


class PatternError(ValueError):
    """Not a pattern RE2 can run; the message is RE2's."""


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str):
    try:
        return re2.compile(f"(?m){pattern}", _OPTIONS)
    except re2.error as error:
        message = error.args[0] if error.args else error
        text = message.decode() if isinstance(message, bytes) else str(message)
        raise PatternError(text.replace("(?m)", "", 1)) from None  # the author's pattern, not our flag


def groups(pattern: str) -> int:
    return compile_pattern(pattern).groups


def search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


def findall(pattern: str, text: str) -> list:
    """As re.findall: the whole matches, the group of a one-group pattern, or tuples of groups."""
    return compile_pattern(pattern).findall(text)
