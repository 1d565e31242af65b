"""appgate/diffs.py: a forged variant kept as a unified diff applies only where it still means what
it meant (context and removed lines exactly as written, an offset allowed, no fuzz)."""
from __future__ import annotations

import difflib

import pytest

from appgate import diffs

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 41))


def made(original: str, changed: str, path: str = "main.cu") -> str:
    return "".join(difflib.unified_diff(original.splitlines(keepends=True), changed.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))


def test_a_diff_made_from_two_texts_gives_back_the_second_and_only_the_files_it_names():
    changed = ORIGINAL.replace("line 5\n", "#ifdef FORGED\nfast 5\n#else\nline 5\n#endif\n").replace("line 30\n", "")
    assert diffs.apply({"main.cu": ORIGINAL, "other.h": "x\n"}, made(ORIGINAL, changed)) == {"main.cu": changed}


def test_a_hunk_whose_lines_moved_applies_at_its_offset():
    changed = ORIGINAL.replace("line 20\n", "line twenty\n")
    moved = "new first line\nnew second line\n" + ORIGINAL
    assert diffs.apply({"main.cu": moved}, made(ORIGINAL, changed))["main.cu"] == \
        "new first line\nnew second line\n" + changed


def test_a_hunk_whose_context_changed_is_refused_with_the_line_that_differs():
    patch = made(ORIGINAL, ORIGINAL.replace("line 20\n", "line twenty\n"))
    edited = ORIGINAL.replace("line 19\n", "line nineteen\n")
    with pytest.raises(ValueError, match=r"main.cu: the hunk at line 17 does not match the file: line 19 is "
                                         r"'line nineteen', the patch expects 'line 19'"):
        diffs.apply({"main.cu": edited}, patch)


@pytest.mark.parametrize("patch, message", [
    ("", "no file in the patch"),
    ("--- main.cu\n+++ main.cu\n@@ -1 +1 @@\n-a\n+b\n", r"expected '\+\+\+ b/<path>'"),
    ("--- a/main.cu\n+++ b/main.cu\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n", "cut short"),
    ("--- a/main.cu\n+++ b/main.cu\n@@ -1 +1 @@\n-line 1\n+one\n--- a/main.cu\n+++ b/main.cu\n", "patched twice"),
])
def test_malformed_patches_are_refused_saying_why(patch, message):
    with pytest.raises(ValueError, match=message):
        diffs.apply({"main.cu": ORIGINAL}, patch)


def test_a_file_outside_the_baseline_is_refused():
    with pytest.raises(ValueError, match="secret.txt is not one of the application's baseline files"):
        diffs.apply({"main.cu": ORIGINAL}, made("a\n", "b\n", "secret.txt"))


def test_a_latin_1_source_is_patched_and_written_back_byte_for_byte_but_for_the_hunk(tmp_path):
    """HeCBench's eigenvalue sources carry a Latin-1 (c) sign: a patch must apply to them and every
    line it leaves alone must keep its bytes (the baseline is checked byte-identical upstream)."""
    original = "/* \xa9 2009 NVIDIA */\n" + ORIGINAL
    source = tmp_path / "main.cu"
    source.write_bytes(original.encode("latin-1"))
    with pytest.raises(UnicodeDecodeError):
        source.read_text(encoding="utf-8")
    text = diffs.read_source(source)
    patched = diffs.apply({"main.cu": text}, made(original, original.replace("line 7\n", "line seven\n")))["main.cu"]
    diffs.write_source(source, patched)
    assert source.read_bytes() == original.replace("line 7\n", "line seven\n").encode("latin-1")
    with pytest.raises(ValueError, match="main.cu is latin-1, which cannot hold '→'"):
        diffs.write_source(source, patched + "// → \n")


def test_a_utf_8_source_stays_utf_8(tmp_path):
    source = tmp_path / "main.cu"
    source.write_bytes("// © → ok\n".encode())
    diffs.write_source(source, diffs.read_source(source) + "x\n")
    assert source.read_bytes() == "// © → ok\nx\n".encode()
