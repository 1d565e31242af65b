"""What a C, C++ or CUDA program's source says that a manifest needs, read as text (nothing is
compiled or run): the files its build reads (the include closure), its main file, its own
verdict (the PASS / FAIL words it prints), an output it prints that two variants can compare,
and the unit of a time it prints. Free of Django.

Every inference is conservative: where the source does not say, the answer is None with the
reason, and the importer reports it rather than guess (docs/appgate.md#import-a-suite).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

COMPILED = {".c", ".cc", ".cpp", ".cxx", ".cu"}
HEADERS = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".tpp"}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.M)
# String literals, and the comments and character literals that may hold a quote (skipped).
TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/', re.S)
MAIN = re.compile(r"\b(?:int|int32_t)\s+main\s*\(")
# printf conversions: numeric ones are rendered as sentinels, others as a word.
CONVERSION = re.compile(r"%[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|z|j|t|q)?([diouxXeEfFgGaAcsp%])")
INTEGER = set("diouxX")
FLOAT = set("eEfFgGaA")
# A verdict word as programs print it (upper case or capitalised: lower-case "failed" is mostly
# an API error message on a path that exits, "pass" and "success" words of prose).
VERDICT = re.compile(r"\b(PASS|PASSED|Pass|Passed|passed|SUCCESS|Success|FAIL|FAILED|FAILURE|Fail|Failed|Failure)\b")
NEGATED = re.compile(r"(?i)\bnot\s+pass|%[-+ #0-9.]*(?:hh|h|ll|l|z|j|t)?[diu]\s+(?:tests?\s+)?(?:pass|fail)")
UNITS = {"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s", "ms": "ms", "msec": "ms", "msecs": "ms",
         "us": "us", "usec": "us", "usecs": "us", "ns": "ns", "nsec": "ns"}
UNIT_AFTER = re.compile(r"^\s*[(\[]?\s*(seconds|second|secs|sec|msecs|msec|ms|usecs|usec|us|nsec|ns|s)\b")
UNIT_BRACKETED = re.compile(r"[(\[]\s*(seconds|secs|sec|msec|ms|usec|us|ns|s)\s*[)\]]")
UNIT_BEFORE = re.compile(UNIT_BRACKETED.pattern + r"[^%]*$")
RATE = re.compile(r"(?i)per\s+sec|/\s*s(?:ec)?\b|\bG?(?:B|Bytes|FLOPS?)/")


@dataclass
class Closure:
    files: set[Path] = field(default_factory=set)  # resolved paths of every file reached
    unresolved: list[str] = field(default_factory=list)  # quoted includes found nowhere in the checkout


def literals(text: str) -> list[str]:
    """The string literals of a C-family source, comments left out (their escapes as written)."""
    return [token[1:-1] for token in TOKENS.findall(text) if token.startswith('"')]


def read(path: Path) -> str:
    return path.read_text(errors="replace")


def program_files(folder: Path) -> list[Path]:
    """The C-family files of a program's folder (sub-folders included), sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in COMPILED | HEADERS)


def include_closure(start: list[Path], include_dirs: list[Path], top: Path) -> Closure:
    """Every file reached from `start` through #include, resolved as a compiler would look: a
    quoted name beside the including file, then in the -I folders; an angled one in the -I
    folders only (the rest are the system's). Only files inside `top` (the checkout) count."""
    closure = Closure()
    pending = [p.resolve() for p in start]
    while pending:
        current = pending.pop()
        if current in closure.files:
            continue
        closure.files.add(current)
        for kind, name in INCLUDE.findall(read(current)):
            places = ([current.parent] if kind == '"' else []) + include_dirs
            candidates = ((d / name).resolve() for d in places)
            found = next((c for c in candidates if c.is_file() and c.is_relative_to(top)), None)
            if found is not None:
                pending.append(found)
            elif kind == '"' and name not in closure.unresolved:
                closure.unresolved.append(name)
    return closure


def entry_file(files: list[Path], folder: Path) -> Path | None:
    """The compiled file of `folder` that defines main (main.* first when several do)."""
    mains = [p for p in files if p.suffix in COMPILED and p.is_relative_to(folder) and MAIN.search(read(p))]
    return min(mains, key=lambda p: (p.stem != "main", len(p.parts), str(p)), default=None)


def own_check(texts: list[str]) -> tuple[dict | None, str]:
    """The program's own verdict from the PASS / FAIL words its string literals hold: the
    patterns (result: a pass word it prints, failure: any fail word), or None and why not."""
    said = [s for text in texts for s in literals(text) if VERDICT.search(s)]
    doubtful = [s for s in said if NEGATED.search(s)]
    if doubtful:
        return None, (f"a verdict word it prints is negated or counted ({doubtful[0]!r}): which output means PASS "
                      "is unclear")
    words = {w for s in said for w in VERDICT.findall(s)}
    passes = sorted(w for w in words if not w.upper().startswith("FAIL"))
    fails = sorted(w for w in words if w.upper().startswith("FAIL")) or ["FAIL", "FAILED", "FAILURE"]
    if not passes:
        return None, ("it prints no PASS word (" + (f"only failure words: {', '.join(sorted(words))}" if words
                                                   else "no verdict words at all") + ")")
    return {"result_pattern": rf"\b(?:{'|'.join(passes)})\b", "failure_pattern": rf"\b(?:{'|'.join(fails)})\b"}, ""


def _render(literal: str) -> tuple[str, list[tuple[int, int, str]]]:
    """A printf format as the program would print it: each numeric conversion a sentinel
    number (its index + 1, then 0000.5); also where each sits (start, end, kind)."""
    out, places, last = [], [], 0
    for index, m in enumerate(CONVERSION.finditer(literal)):
        out.append(literal[last:m.start()].replace("\\n", "\n").replace("\\t", "\t"))
        kind = m.group(1)
        text = "%" if kind == "%" else f"{index + 1}0000.5" if kind in INTEGER | FLOAT else "word"
        start = sum(len(x) for x in out)
        out.append(text)
        places.append((start, start + len(text), kind))
        last = m.end()
    out.append(literal[last:].replace("\\n", "\n").replace("\\t", "\t"))
    return "".join(out), places


def printed_unit(texts: list[str], pattern) -> tuple[str | None, str]:
    """The unit of the number `pattern` (a compiled regex with one group) reads from the
    program's output, found by rendering each printf format in the source and matching: the
    unit written after the number ("%f (ms)", "%f us") or before it ("time (s): %f")."""
    units: dict[str, str] = {}
    for text in texts:
        for literal in literals(text):
            rendered, places = _render(literal)
            m = pattern.search(rendered)
            if m is None or m.group(1) is None:
                continue
            at = next(((s, e) for s, e, kind in places if s <= m.start(1) < e), None)
            if at is None:
                continue
            after, before = UNIT_AFTER.match(rendered[at[1]:]), UNIT_BEFORE.search(rendered[:at[0]])
            unit = UNITS[(after or before).group(1)] if after or before else None
            units.setdefault(unit or "", literal)
    if not units:
        return None, "no printf format in the source prints what the timing regex reads"
    if "" in units or len(units) > 1:
        shown = "; ".join(f"{u or 'no unit'}: {lit!r}" for u, lit in sorted(units.items()))
        return None, f"the formats that print the time do not name one unit ({shown})"
    return next(iter(units)), ""


TIME_WORD = re.compile(r"(?i)\btime\b")
CAPTURE = "\x02"  # where the time's group goes while a format becomes a pattern


def printed_times(texts: list[str]) -> dict[str, str]:
    """The printf formats that print one time, each with its unit: the word "time", one
    floating-point conversion and a unit written beside it ("... time %f (ms)", "time (s): %f")."""
    found: dict[str, str] = {}
    for text in texts:
        for literal in literals(text):
            if not TIME_WORD.search(literal):
                continue
            rendered, places = _render(literal)
            floats = [(start, end) for start, end, kind in places if kind in FLOAT]
            if len(floats) != 1:
                continue
            unit = UNIT_AFTER.match(rendered[floats[0][1]:]) or UNIT_BEFORE.search(rendered[:floats[0][0]])
            if unit:
                found.setdefault(literal, UNITS[unit.group(1)])
    return found


def time_pattern(literal: str) -> str | None:
    """The line of a printf format that prints one time as a pattern whose one group is that
    number (other conversions matched, not captured); None when the pattern does not read the
    number back from the format rendered as the program prints it."""
    pieces, last = [], 0
    for m in CONVERSION.finditer(literal):
        kind = m.group(1)
        pieces.append(_escape(_unescape(literal[last:m.start()])))
        other = r"\s*[-+]?[0-9a-fA-FxX.]+" if kind in INTEGER else r".*?"
        pieces.append("%" if kind == "%" else CAPTURE if kind in FLOAT else other)
        last = m.end()
    pieces.append(_escape(_unescape(literal[last:])))
    line = next((x for x in "".join(pieces).split("\n") if CAPTURE in x), "").strip()
    pattern = line.replace(CAPTURE, r"\s*([-+0-9.eE]+)")
    rendered, places = _render(literal)
    found = re.search(pattern, rendered) if pattern else None
    sentinel = next(rendered[start:end] for start, end, kind in places if kind in FLOAT)
    return pattern if found and found.group(1) == sentinel else None


def checksum_compare(texts: list[str]) -> tuple[list[dict], str]:
    """Comparisons of the checksums a program prints with integer conversions only (compared
    exactly: the same integers or they differ); a floating-point checksum's tolerance is not in
    the source, so it is named, not compared."""
    exact, floats = [], []
    for text in texts:
        for literal in literals(text):
            if "checksum" not in literal.lower() or re.search(r"(?i)!=|invalid|warning|error", literal):
                continue
            kinds = [m.group(1) for m in CONVERSION.finditer(literal) if m.group(1) != "%"]
            if not kinds or any(k not in INTEGER | FLOAT for k in kinds):
                continue
            (exact if all(k in INTEGER for k in kinds) else floats).append(literal)
    compare = [{"source": "stdout", "pattern": _format_pattern(lit), "norm": "exact"} for lit in dict.fromkeys(exact)]
    if compare:
        return compare, ""
    if floats:
        return [], (f"it prints a floating-point checksum ({floats[0]!r}) whose tolerance between two correct "
                    "variants the source does not give")
    return [], "it prints no checksum line to compare"


def _format_pattern(literal: str) -> str:
    """A printf format as a pattern whose groups are its numbers, anchored on its own line."""
    pieces, last = [], 0
    for m in CONVERSION.finditer(literal):
        pieces.append(_escape(_unescape(literal[last:m.start()])))
        pieces.append("%" if m.group(1) == "%" else r"(-?(?:0[xX])?[0-9a-fA-F]+)")
        last = m.end()
    pieces.append(_escape(_unescape(literal[last:])))
    lines = [line for line in "".join(pieces).split("\n") if line.strip()]
    return lines[0].strip() if lines else ""


def _escape(text: str) -> str:
    """`text` as a pattern that matches it (RE2 and Python alike: only their special characters)."""
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", text)


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")


def regex_unit(regex: str) -> tuple[str | None, str]:
    """The unit a timing regex names around its group ("(?: \\(us\\))", "Time \\(s\\): "), "" when
    it names none or several (the source may say), or None when it reads a rate, not a time."""
    group = _capture_span(regex)
    if group is None:
        return "", "the regex has no capture group"
    prefix, suffix = _plain(regex[:group[0]]), _plain(regex[group[1]:])
    if RATE.search(prefix) or RATE.search(suffix):
        return None, f"it reads a rate, not a time ({prefix.strip()!r} ... {suffix.strip()!r})"
    if "|" in regex[group[1]:]:
        return "", "the regex accepts several units"
    found = UNIT_AFTER.match(suffix) or UNIT_BRACKETED.search(suffix) or UNIT_BEFORE.search(prefix)
    return (UNITS[found.group(1)], "") if found else ("", "the regex names no unit")


def _capture_span(regex: str) -> tuple[int, int] | None:
    """Where the first capturing group of `regex` starts and ends (its parentheses included)."""
    depth, start, i = 0, None, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            end = regex.find("]", i + 2)
            i = end + 1 if end > 0 else len(regex)
            continue
        if c == "(":
            if start is None and not regex.startswith("(?", i):
                start, depth = i, 0
            if start is not None:
                depth += 1
        elif c == ")" and start is not None:
            depth -= 1
            if depth == 0:
                return start, i + 1
        i += 1
    return None


OPEN, CLOSE = "\x00", "\x01"  # escaped parentheses while the group syntax is taken off


def _plain(fragment: str) -> str:
    """A regex fragment as the text it matches, roughly: groups, classes of spaces and escapes
    taken off."""
    text = fragment.replace("\\(", OPEN).replace("\\)", CLOSE).replace("(?:", "")
    text = re.sub(r"\\s[*+]?|\[ \][*+]?", " ", text)
    text = re.sub(r"\\(.)", r"\1", text).replace("(", "").replace(")", "")
    return text.replace(OPEN, "(").replace(CLOSE, ")")
