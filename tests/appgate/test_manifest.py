"""Manifest validation: every problem named with its field path, all at once; nothing recorded
for an invalid manifest."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from appgate.manifest import MAX_DEPTH, MAX_MANIFEST_BYTES, ManifestError, load_manifest
from appgate.services import register
from ledger.models import Event

SOURCE = "int main(void) { return 0; }\n"
ROOT = Path(__file__).resolve().parents[2]


def write_app(tmp_path, program: str = SOURCE, **changes):
    """A valid manifest for `program` (src/main.c) in tmp_path, with top-level blocks replaced or removed."""
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "main.c").write_text(program)
    manifest = {
        "name": "tiny-app",
        "domain": "testing",
        "real_program": {"description": "a program that only exits", "language": "c", "entry": "src/main.c"},
        "provenance": {"upstream": "bundled", "version": "1.0", "licence": "MIT", "authors": "tests"},
        "source": {"path": ".", "baseline_files": {"src/main.c": hashlib.sha256(program.encode()).hexdigest()}},
        "build": {"command": "cc {switch} -o {out} src/main.c"},
        "switch": {"kind": "build_flag", "baseline": "-DBASELINE", "candidate": "-DFORGED"},
        "run": {"command": "{out} {args}"},
        "datasets": [{"name": "one", "args": "1"}],
        "correctness": {"own_check": {"result_pattern": "PASSED", "failure_pattern": "FAILED"},
                        "compare": [{"source": "stdout", "pattern": r"sum=(\S+)"}]},
        "timing": {"source": "wall"},
        "hotspot": {"source": "none"},
        "architecture": "cpu",
    }
    for key, value in changes.items():
        if value is None:
            manifest.pop(key)
        else:
            manifest[key] = value
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


def problems(path) -> list[str]:
    with pytest.raises(ManifestError) as error:
        load_manifest(path)
    return error.value.problems


def test_a_valid_manifest_loads(tmp_path):
    loaded = load_manifest(write_app(tmp_path))
    assert loaded.name == "tiny-app" and loaded.source_dir == tmp_path.resolve()


def test_a_manifest_without_a_real_program_is_refused_as_a_proxy(tmp_path):
    found = problems(write_app(tmp_path, real_program=None))
    assert any(p.startswith("real_program: missing") and "proxy" in p for p in found)


def test_several_errors_are_reported_at_once_with_their_paths(tmp_path):
    found = problems(write_app(tmp_path, build={"command": 7, "timeout_s": "soon"}, datasets="all", hotspot=None))
    joined = "\n".join(found)
    assert "build.command:" in joined and "build.timeout_s:" in joined
    assert "datasets:" in joined and "hotspot: Field required" in joined
    assert len(found) >= 4


def test_an_old_single_mode_correctness_block_says_how_to_write_the_two_checks(tmp_path):
    found = problems(write_app(tmp_path, correctness={"mode": "builtin", "result_pattern": "PASSED", "failure_pattern": "F"}))
    assert any(p.startswith("correctness.mode: the single-mode correctness block was replaced by two checks")
               and "correctness.own_check" in p and "correctness.no_comparison" in p for p in found), found


@pytest.mark.parametrize("correctness, expected", [
    ({"own_check": {"result_pattern": "PASSED", "failure_pattern": "FAILED"}},
     "correctness.compare: required: an independent comparison"),
    ({"own_check": {"result_pattern": "PASSED", "failure_pattern": "FAILED"}, "no_comparison": "no output at all here",
      "compare": [{"source": "file", "file": "out.txt"}]}, "correctness.no_comparison: only without correctness.compare"),
    ({"no_comparison": "the program prints nothing comparable"}, "correctness: no check at all"),
    ({"compare": [{"source": "stdout", "file": "out.txt"}]}, "correctness.compare.0: a stdout comparison needs a pattern"),
    ({"compare": [{"source": "file", "file": "out.txt", "norm": "exact", "tolerance": 1e-6}]},
     "correctness.compare.0.tolerance: an exact comparison has no tolerance"),
])
def test_correctness_needs_an_independent_comparison_or_a_reason_for_none(tmp_path, correctness, expected):
    found = problems(write_app(tmp_path, correctness=correctness))
    assert any(p.startswith(expected) for p in found), found


def test_a_comparison_alone_or_a_stated_reason_for_none_is_a_valid_correctness_block(tmp_path):
    assert load_manifest(write_app(tmp_path, correctness={"compare": [{"source": "file", "file": "out.txt", "norm": "l2_rel",
                                                                        "tolerance": 1e-9}]}))
    loaded = load_manifest(write_app(tmp_path, correctness={"own_check": {"result_pattern": "OK", "failure_pattern": "BAD"},
                                                            "no_comparison": "prints only its own verdict"}))
    assert loaded.manifest.correctness.compare == []


def test_an_upper_case_name_is_refused_with_the_lower_case_one_to_use(tmp_path):
    found = problems(write_app(tmp_path, name="MD5Hash"))
    assert len(found) == 1 and found[0].startswith("name: 'MD5Hash' is not a name here") and found[0].endswith("use 'md5hash'")


def test_a_time_unit_or_match_applies_to_a_pattern_only(tmp_path):
    found = problems(write_app(tmp_path, timing={"source": "wall", "unit": "ms"}))
    assert found == ["timing: unit and match apply to a pattern only (source is 'wall')"]


@pytest.mark.parametrize("field, value, expected", [
    ("source", {"path": "../elsewhere", "baseline_files": {"src/main.c": "0" * 64}}, "source.path: '../elsewhere' leaves"),
    ("real_program", {"description": "a program that only exits", "language": "c", "entry": "/etc/passwd"},
     "real_program.entry: '/etc/passwd' is not a path inside"),
    ("datasets", [{"name": "one", "inputs": ["../../secret.bin"]}], "datasets.0.inputs.0: '../../secret.bin' is not a path inside"),
    ("correctness", {"compare": [{"source": "file", "file": "/tmp/out.txt"}]},
     "correctness.compare.0.file: '/tmp/out.txt' must be a relative path"),
])
def test_unsafe_paths_are_refused(tmp_path, field, value, expected):
    found = problems(write_app(tmp_path, **{field: value}))
    assert any(p.startswith(expected) for p in found), found


def test_semantic_checks(tmp_path):
    found = problems(write_app(
        tmp_path,
        provenance={"upstream": "somewhere", "version": "1", "licence": "Proprietary", "authors": "x"},
        build={"command": "cc -o prog src/main.c {unknown}"},
        timing={"source": "pattern", "pattern": "time=(\\d+)(x)"},
        switch={"kind": "env", "baseline": "0", "candidate": "0"},
    ))
    joined = "\n".join(found)
    for expected in ("provenance.licence: 'Proprietary'", "provenance.upstream:", "build.command: unknown placeholder {unknown}",
                     "build.command: must write the variant's binary to {out}", "timing.pattern: needs exactly one group",
                     "switch.name: an env switch needs", "switch.candidate: must differ"):
        assert expected in joined, (expected, found)


def test_unknown_fields_and_wrong_types(tmp_path):
    found = problems(write_app(tmp_path, architecture="tpu", extra_block={"x": 1}))
    assert any(p.startswith("architecture:") for p in found) and "extra_block: unknown field" in found


def test_an_invalid_manifest_records_nothing(ledger, tmp_path):
    before = Event.objects.count()
    with pytest.raises(ManifestError):
        register(write_app(tmp_path, real_program=None), "user:test")
    assert Event.objects.count() == before


def test_registering_twice_records_once_and_a_changed_manifest_again(ledger, tmp_path):
    path = write_app(tmp_path)
    assert register(path, "user:test")[1] is not None
    assert register(path, "user:test")[1] is None
    path.write_text(path.read_text().replace("domain: testing", "domain: testing again"))
    assert register(path, "user:test")[1] is not None
    assert Event.objects.filter(type="AppRegistered").count() == 2


def test_a_manifest_too_large_is_refused_before_parsing(tmp_path):
    path = write_app(tmp_path)
    path.write_text(path.read_text() + "extra: " + "[" * 100_000 + "]" * 100_000 + "\n")  # 100k deep, 200 kB
    assert problems(path) == [f"(file): larger than {MAX_MANIFEST_BYTES} bytes"]


def test_deep_nesting_is_refused_cleanly_within_the_size_limit(tmp_path):
    path = write_app(tmp_path)
    path.write_text(path.read_text() + "extra: " + "[" * 30_000 + "]" * 30_000 + "\n")  # yaml.safe_load: RecursionError
    assert path.stat().st_size <= MAX_MANIFEST_BYTES
    assert problems(path) == [f"(file): nested deeper than {MAX_DEPTH} levels"]


def test_yaml_aliases_are_refused(tmp_path):
    path = write_app(tmp_path)
    path.write_text(path.read_text().replace("domain: testing", "domain: &d testing\nextra: *d"))
    assert problems(path) == ["(file): YAML aliases (*name) are not allowed in a manifest"]


def test_a_pattern_the_safe_engine_cannot_run_is_refused(tmp_path):
    found = problems(write_app(tmp_path, correctness={"own_check": {"result_pattern": r"(PASS)\1", "failure_pattern": "(?<=not )F"},
                                                      "no_comparison": "a test of the pattern engine"}))
    assert [p.split(":")[0] for p in found] == ["correctness.own_check.result_pattern", "correctness.own_check.failure_pattern"]
    assert all("RE2" in p for p in found)


# Python's re takes exponential time on these against "aaa...a!"; RE2 linear time.
REDOS = r"(a+)+$"
REDOS_CHECK = """
import sys
import django
django.setup()
from appgate import runner
from appgate.manifest import load_manifest
loaded = load_manifest(sys.argv[1])
output = runner.RunResult(True, 0, 0.1, "a" * 100_000 + "!")
print(runner.own_verdict(loaded, output), runner.seconds_of(loaded, output), runner.hotspot_of(loaded, output))
"""


def test_a_redos_pattern_does_not_hang_the_gate_on_a_long_output(tmp_path):
    """The gate's verdict and clocks on a 100 kB output with catastrophic-backtracking patterns.
    In a child process with a time limit, so that a backtracking engine fails this test instead
    of hanging the suite."""
    path = write_app(tmp_path, correctness={"own_check": {"result_pattern": REDOS, "failure_pattern": r"(a|aa)+$"},
                                            "compare": [{"source": "stdout", "pattern": REDOS}]},
                     timing={"source": "pattern", "pattern": REDOS}, hotspot={"source": "pattern", "pattern": REDOS})
    try:
        done = subprocess.run([sys.executable, "-c", REDOS_CHECK, str(path)], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"})
    except subprocess.TimeoutExpired:
        pytest.fail("matching the manifest's patterns against the output hung")
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip()
    assert printed.startswith("(False, \"the program did not report its verification result (own_check.result_pattern); "
                              "output tail: 'aaa") and printed.endswith("aaa!'\") None None")  # the tail shown, no clock read
