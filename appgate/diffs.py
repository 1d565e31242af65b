"""A unified diff applied to an application's baseline files, strictly: every hunk's context and
removed lines must be in the file as written (at the hunk's line, or later than the previous
hunk: an offset, never a fuzz), or the patch is refused with the first line that differs. A
forged variant kept as a patch against the upstream checkout (fixtures/forged/) must mean what
it meant when it was written, or not apply at all. Free of Django.
"""
from __future__ import annotations

import re
from pathlib import Path


def read_source(path: Path) -> str:
    """A source file's text, newlines read as `read_text` reads them (a CRLF file, like hmm's
    ViterbiGPU.cu, as LF: the shipped patches are written so). Upstream sources are not all UTF-8
    (HeCBench's eigenvalue is Latin-1: a (c) sign in a comment); such a file is read as Latin-1, one
    character per byte, so that patches apply to it as text and `write_source` gives its bytes back."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return path.read_text(encoding="latin-1")


def write_source(path: Path, text: str) -> None:
    """Write `text` over `path` in the encoding of the file it replaces (UTF-8 for a new one), so an
    unchanged line keeps its bytes; a character that encoding lacks is a ValueError."""
    encoding = "utf-8"
    if path.exists():
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            encoding = "latin-1"
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as error:
        raise ValueError(f"{path.name} is {encoding}, which cannot hold {error.object[error.start:error.end]!r}") from None
    path.write_bytes(data)


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse(text: str) -> dict[str, list[tuple[int, list[str], list[str]]]]:
    """Per file (the path after `+++ b/`), its hunks: (first old line, old lines, new lines)."""
    files: dict[str, list[tuple[int, list[str], list[str]]]] = {}
    lines = text.splitlines(keepends=True)
    i, current = 0, None
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            path = lines[i + 1][4:].split("\t")[0].strip()
            if not path.startswith("b/"):
                raise ValueError(f"line {i + 2}: expected '+++ b/<path>' (a patch made with -p1 paths), got {path!r}")
            current = path[2:]
            if current in files:
                raise ValueError(f"line {i + 2}: {current} is patched twice")
            files[current] = []
            i += 2
            continue
        match = _HUNK.match(line)
        if match:
            if current is None:
                raise ValueError(f"line {i + 1}: a hunk before any '--- a/' '+++ b/' header")
            old_count = int(match.group(2) or 1)
            new_count = int(match.group(4) or 1)
            old, new, i = [], [], i + 1
            while (len(old) < old_count or len(new) < new_count) and i < len(lines):
                body = lines[i]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                tag, rest = body[:1], body[1:]
                if tag in (" ", "\n"):
                    rest = rest if tag == " " else "\n"
                    old.append(rest)
                    new.append(rest)
                elif tag == "-":
                    old.append(rest)
                elif tag == "+":
                    new.append(rest)
                else:
                    raise ValueError(f"line {i + 1}: not a line of a hunk: {body[:60]!r}")
                i += 1
            if len(old) != old_count or len(new) != new_count:
                raise ValueError(f"{current}: a hunk at old line {match.group(1)} is cut short")
            files[current].append((int(match.group(1)), old, new))
            continue
        i += 1  # text between files (diff command lines, comments)
    if not files:
        raise ValueError("no file in the patch ('--- a/<path>' then '+++ b/<path>')")
    return files


def apply(originals: dict[str, str], text: str, *, unique: bool = False) -> dict[str, str]:
    """The patched texts of the files the patch changes (of `originals`: path -> text), or
    ValueError naming the file, the hunk and what differs. `unique`: each hunk's lines must stand
    in the file as many times as the patch has hunks with those lines, once for most (a probe: a
    candidate must not choose, by copying them into code that never runs, where the probe lands)."""
    patched: dict[str, str] = {}
    for path, hunks in parse(text).items():
        if path not in originals:
            raise ValueError(f"{path} is not one of the application's baseline files ({', '.join(sorted(originals))})")
        lines = originals[path].splitlines(keepends=True)
        out: list[str] = []
        at = 0  # the next line of the original not yet copied
        for start, old, new in hunks:
            where = _find(lines, old, max(start - 1, 0), at)
            if where is None:
                raise ValueError(f"{path}: the hunk at line {start} does not match the file: "
                                 f"{_first_difference(lines, old, max(start - 1, at))}")
            if unique:
                found = sum(lines[k:k + len(old)] == old for k in range(len(lines) - len(old) + 1))
                patched_here = sum(other == old for _, other, _ in hunks)
                if found != patched_here:
                    raise ValueError(f"{path}: the lines of the hunk at line {start} stand {found} times in the file, "
                                     f"the patch changes them at {patched_here} place(s)")
            out += lines[at:where] + new
            at = where + len(old)
        patched[path] = "".join(out + lines[at:])
    return patched


def _find(lines: list[str], old: list[str], hint: int, after: int) -> int | None:
    """Where `old` stands in `lines`, at or after `after`: at the hunk's own line first, then the
    nearest offset from it."""
    def holds(at: int) -> bool:
        return at >= after and lines[at:at + len(old)] == old
    if holds(hint):
        return hint
    for offset in range(1, len(lines) + 1):
        for at in (hint - offset, hint + offset):
            if 0 <= at <= len(lines) - len(old) and holds(at):
                return at
    return None


def _first_difference(lines: list[str], old: list[str], at: int) -> str:
    for k, expected in enumerate(old):
        found = lines[at + k] if at + k < len(lines) else "<end of file>"
        if found != expected:
            return f"line {at + k + 1} is {found.rstrip()!r}, the patch expects {expected.rstrip()!r}"
    return "the lines differ"
