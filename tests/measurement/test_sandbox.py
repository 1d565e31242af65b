"""Hostile candidates against the real sandbox (issue 14), on the CPU backend.

Each kernel of tests/measurement/hostile/ attacks from inside a check child: the service's
environment, the signing key and the var dir, the database's ports and socket, writes outside its
scratch (the build cache included), a daemon that outlives the check, more memory than allowed,
a loop that never ends. Each must fail, and the gate must record a rejecting verdict (the worker
carries on). A kernel whose attack works writes what it got into its whole output, so its
rejection reason is not `unwritten_output`; one whose attack fails writes nothing (see
hostile/common.h). Tiny case, one short protocol: a failed check ends a measurement before timing.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings

from ledger.checkpoints import signing_key
from ledger.models import Event
from measurement.backends import cpu
from measurement.backends.base import Kernel, Variant, unwritten
from measurement.harness import buildcache, codegen, isolation, sandbox
from measurement.harness.cases import parse_case
from measurement.harness.judge import judge_checks
from measurement.harness.plan import ProtocolSettings, check_plan
from measurement.harness.protocol import check_variant
from measurement.harness.session_info import baseline_session
from measurement.services import MeasurementError, gate_candidate
from tests.measurement.hostile import probe

HOSTILE = Path(__file__).parent / "hostile"
REPO = Path(__file__).resolve().parents[2]
CASE = "star_1/16x16x16/f32"
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1, check_timeout=60, timing_timeout=120)
NONCE = secrets.token_hex(4)  # names what the kernels plant and start (their sources are recorded: no secret)
SECRET = secrets.token_hex(8)  # in every secret below, and nowhere in any source
# The children's limit in this module: a check child of this case peaked at 0.76 GiB of address
# space here; each OpenMP thread adds a stack and a malloc arena (up to 72 MiB) on bigger machines.
MEMORY = (2 << 30) + (os.cpu_count() or 1) * (160 << 20)
SECRETS = {"DATABASE_URL": f"postgres://ledger:pw-{SECRET}@127.0.0.1:5432/ledger", "CELERY_BROKER_URL": f"redis://:{SECRET}@127.0.0.1/0",
           "SECRET_KEY": f"django-{SECRET}", "LEDGER_SIGNING_KEY": f"seed-{SECRET}"}


@pytest.fixture(scope="module")
def world():
    """A world-readable var dir outside every other hidden folder (only the sandbox's var-dir
    rule hides it: its key is 0644 on purpose), the service's secrets in the environment, the
    memory limit, and the build cache warm for CASE (so no check waits on a compiler)."""
    var = Path(tempfile.mkdtemp(prefix=".sandbox-test-var-", dir=REPO))
    patch = pytest.MonkeyPatch()
    try:
        var.chmod(0o755)
        for name, text in (("checkpoint-signing.key", f"KEY-{SECRET}"), ("ledger.sqlite3", f"SQLITE-{SECRET}")):
            (var / name).write_text(text)
            (var / name).chmod(0o644)
        service_key = Path(settings.LEDGER_SIGNING_KEY_FILE)
        signing_key()  # the service's own key exists (0600 in its 0700 var dir)
        for name, value in {**SECRETS, "FORGESTENCIL_VAR_DIR": str(var), sandbox.MEMORY_ENV: str(MEMORY)}.items():
            patch.setenv(name, value)
        case = parse_case(CASE)
        assert isolation.run_isolated(baseline_session, ("cpu", CASE, check_plan(case, "cpu", 1)), 300).ok
        yield {"var": var, "service_key": service_key.read_text().strip(), "names": (f"fsd{NONCE}", f"fss{NONCE}")}
    finally:
        patch.undo()
        for pid in alive(f"fsd{NONCE}", f"fss{NONCE}"):  # only if a test failed: never leave them running
            os.kill(pid, 9)
        for planted in planted_files(var):
            planted.unlink()
        shutil.rmtree(var)


def planted_files(var: Path) -> list[Path]:
    """What write_outside.c would leave on this machine if it could write there."""
    folders = (REPO, var, buildcache.cache_dir(), Path("/var/tmp"), Path.home())
    return [path for folder in folders for path in folder.glob(f"planted-{NONCE}*")]


def source(name: str, **values: str) -> str:
    text = (HOSTILE / f"{name}.c").read_text().replace('#include "common.h"', (HOSTILE / "common.h").read_text())
    defaults = {"REPO": str(REPO), "SERVICE_VAR": str(settings.VAR_DIR), "CACHE": str(buildcache.cache_dir()),
                "HOME": os.path.expanduser("~"), "NONCE": NONCE, "DAEMON": f"fsd{NONCE}", "SPINNER": f"fss{NONCE}",
                "BYTES": str(2 * MEMORY), "VAR": os.environ["FORGESTENCIL_VAR_DIR"]}
    for key, value in {**defaults, **values}.items():
        text = text.replace(f"@{key}@", value)
    return text


def alive(*names: str) -> list[int]:
    """Pids of live processes on this machine whose name is one of `names` (a zombie is dead: it
    only waits to be reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() in names \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def survivors(*names: str, within: float = 15.0) -> list[int]:
    """`alive(*names)` once they had `within` seconds to finish dying. A killed sandbox's processes
    are gone when the run returns on a quiet machine, but under load the kernel may still be
    tearing them down; an attacker's daemon that escaped lives on (it sleeps forever), so the
    test still fails on one."""
    deadline = time.monotonic() + within
    while (found := alive(*names)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def leaked(text: str, world) -> list[str]:
    return [secret for secret in (SECRET, world["service_key"]) if secret in text]


def gate(name: str, protocol: ProtocolSettings = QUICK, **values: str):
    return gate_candidate(CASE, "cpu", Kernel(source(name, **values), {"threads": 1}), "agent:adversary", protocol=protocol)


pytestmark = pytest.mark.one_database  # what is judged is the sandbox, not SQL: once per ./dev test


@pytest.mark.parametrize("attack", ["read_environment", "read_files", "connect", "write_outside", "allocate"])
def test_each_attack_fails_and_the_gate_records_a_rejecting_verdict(ledger, world, attack):
    outcome = gate(attack)
    assert outcome.verdict == "rejected" and outcome.reasons == ["unwritten_output"], outcome.detail
    assert outcome.verdict_event.data["verdict"] == "rejected"
    isolation_record = outcome.measured_event.data["description"]["isolation"]
    assert isolation_record["mode"] == "bubblewrap" and isolation_record["uid"] == f"separate host uid {sandbox.SANDBOX_UID}"
    assert not leaked(json.dumps([outcome.measured_event.data, outcome.verdict_event.data]), world)
    assert planted_files(world["var"]) == []


def test_what_a_kernel_copies_into_its_output_holds_no_secret(world):
    """Exfiltration through the only channel a kernel has: the output array the parent reads back."""
    case = parse_case(CASE)
    specs = check_plan(case, "cpu", 7)
    for attack in ("read_environment", "read_files"):
        variant = Variant("candidate", Kernel(source(attack), {"threads": 1}), "candidate")
        outcome = isolation.run_isolated(check_variant, ("cpu", CASE, variant, specs), 60)
        assert outcome.ok, outcome.error
        for spec, run in zip(specs, outcome.value):
            assert unwritten(run.output)[case.with_shape(spec.shape).region].all(), f"{attack} got something into {run.label}"
            assert not leaked(run.output.tobytes().decode("latin-1"), world)


def test_a_daemon_and_a_spinning_child_die_with_the_check(ledger, world):
    outcome = gate("daemon")
    assert outcome.reasons == ["unwritten_output"], outcome.detail
    assert survivors(*world["names"]) == []


def test_a_kernel_that_never_returns_times_out_and_its_child_dies_with_it(ledger, world):
    hasty = ProtocolSettings(**{**QUICK.__dict__, "check_timeout": 5})
    outcome = gate("spin", hasty)
    assert outcome.reasons == ["timeout"] and outcome.verdict_event.data["state"] == "runtime_error"
    assert survivors(*world["names"]) == []


@pytest.mark.parametrize("key", ["var", "service"])
def test_compilation_in_the_sandbox_cannot_include_the_signing_key(ledger, world, key):
    path = world["var"] / "checkpoint-signing.key" if key == "var" else Path(settings.LEDGER_SIGNING_KEY_FILE)
    outcome = gate("include_key", KEY=str(path))
    assert outcome.reasons == ["compilation_failure"] and "No such file or directory" in outcome.detail
    assert not leaked(json.dumps([outcome.measured_event.data, outcome.verdict_event.data]), world)


def test_a_harness_child_is_another_uid_without_capabilities_or_the_services_environment(world):
    outcome = isolation.run_isolated(probe.identity, (), 60)
    assert outcome.ok, outcome.error
    child = outcome.value
    assert (child["uid"], child["gid"], child["groups"]) == (sandbox.SANDBOX_UID, sandbox.SANDBOX_UID, [])
    assert child["cap_eff"] == "0000000000000000" and child["no_new_privs"] == "1"
    assert child["pid"] == 1 and child["cwd"] == "/tmp"  # pid 1 of its own namespace, in its private scratch
    assert not set(child["environment"]) & (set(SECRETS) | {"FORGESTENCIL_VAR_DIR"})
    assert not leaked(json.dumps(child["environment"]), world)


def test_a_package_on_an_import_path_under_tmp_is_found_by_the_children(world, monkeypatch):
    """On the GPU machine the project's packages live in /tmp/forgestencil-site (scripts/
    device_env.sh), and /tmp is the child's private scratch: pystencils was then missing in every
    child and silently left out of the baselines. Import paths are bound back read-only."""
    folder = Path(tempfile.mkdtemp(prefix="forgestencil-site-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        (folder / f"site_probe_{NONCE}.py").write_text(f"VALUE = 'found-{NONCE}'\n")
        (folder / f"site_probe_{NONCE}.py").chmod(0o644)
        monkeypatch.syspath_prepend(str(folder))
        outcome = isolation.run_isolated(probe.imported, (f"site_probe_{NONCE}",), 60)
        assert outcome.ok, outcome.error
        assert outcome.value == f"found-{NONCE}"
        assert str(folder) not in sandbox.hidden_roots() and "/tmp" not in sandbox.exposed()
    finally:
        shutil.rmtree(folder)


def _measure_in_a_daemon(queue) -> None:
    outcome = isolation.run_isolated(probe.identity, (), 120)
    queue.put((outcome.ok, outcome.error, outcome.value["uid"] if outcome.ok else None))


def test_harness_children_start_from_a_daemonic_process():
    """A Celery prefork worker is a daemonic process, which multiprocessing forbids to have
    children: the sandbox's server is a plain subprocess, started anew in the forked process."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=_measure_in_a_daemon, args=(queue,), daemon=True)
    worker.start()
    ok, error, uid = queue.get(timeout=300)
    worker.join(60)
    assert ok, error
    assert uid == sandbox.SANDBOX_UID


def test_a_swapped_cache_artefact_is_refused_and_rebuilt(world, monkeypatch):
    """Issue 14: swapping the cached baseline library moved the public bound. The swap here would
    leave the straightforward kernel's output unwritten; the load checks the digest first. The
    swap is made in a build cache of this test's own: the suite's other run, beside this one,
    shares the default cache and would find the artefact refused while it is swapped."""
    cache = Path(tempfile.mkdtemp(prefix=".sandbox-test-cache-", dir=REPO))
    try:
        cache.chmod(0o755)
        monkeypatch.setenv(buildcache.CACHE_ENV, str(cache))
        case = parse_case(CASE)
        straightforward = codegen.straightforward_c(case)
        genuine = cpu.compile_shared(straightforward)
        assert genuine.parent == cache
        swapped = cpu.compile_shared(codegen.empty_c(case)).read_bytes()
        genuine.write_bytes(swapped)
        specs = check_plan(case, "cpu", 3)
        variant = Variant("straightforward", Kernel(straightforward, {}), "baseline")
        outcome = isolation.run_isolated(check_variant, ("cpu", CASE, variant, specs), 300)
        assert outcome.ok, outcome.error
        assert judge_checks(case, specs, outcome.value).correct
        assert genuine.read_bytes() != swapped and buildcache.verified(genuine.name.removesuffix(".so")) == genuine
    finally:
        shutil.rmtree(cache)


def test_no_cache_artefact_can_be_written_by_a_child(world):
    """After every attack above: each artefact of the cache still matches its record."""
    records = list(buildcache.cache_dir().glob("*.json"))
    assert records
    assert all(buildcache.verified(record.stem) is not None for record in records)


def test_without_bubblewrap_the_gate_refuses_and_records_nothing(ledger, world, monkeypatch):
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    before = Event.objects.count()
    with pytest.raises(MeasurementError, match="install bubblewrap"):
        gate("connect")
    assert Event.objects.count() == before


def test_the_unsafe_opt_out_is_recorded_on_the_measurement(ledger, world, monkeypatch):
    monkeypatch.setenv(sandbox.UNSAFE_ENV, "1")
    outcome = gate_candidate(CASE, "cpu", Kernel("void stencil( { broken"), "agent:x", protocol=QUICK)
    assert outcome.reasons == ["compilation_failure"]
    assert outcome.measured_event.data["description"]["isolation"]["mode"] == "unsafe-no-sandbox"


def test_a_leaky_self_test_is_refused():
    """The server's probe child reports what it sees; anything of the service's in it stops the sandbox."""
    options = {"separate_uid": True, "cache": sandbox.CACHE_IN_VIEW, "probe": {"environment": {"PATH": "/bin"}}}
    report = {"uid": 0, "gid": 0, "cap_eff": "000001ffffffffff", "no_new_privs": "0", "interfaces": ["lo", "eth0"],
              "hidden": {"/tmp": ["forgestencil-test-x"]}, "cache_writable": True, "environment": ["PATH", "DATABASE_URL"]}
    problems = sandbox.Server._problems(report, options)
    assert len(problems) == 6 and any("DATABASE_URL" in p for p in problems) and any("eth0" in p for p in problems)


def test_a_probe_child_that_fails_says_why():
    """A probe that dies in its confinement reports the error, not only its exit code (CI saw 'the probe child exited
    with 70' once, under load, and nothing more)."""
    from measurement.harness import sandbox_server
    from measurement.harness.framing import read_frame

    child = sandbox_server.Confined({"sandboxed": False}, sandbox_server._self_test, b"{}", {}, 10, broker=False)
    report = json.loads(read_frame(child.result, 1 << 20))  # no "limits": confinement fails before the probe runs
    os.close(child.result)
    assert child.finish() == 70 and report["error"] == "the probe child failed: KeyError('limits')"


def test_application_builds_and_runs_are_confined(world, tmp_path):
    """The application gate's hands (appgate.runner): a build that includes the signing key fails
    without printing it; a run that attacks gets nothing, and its daemon dies with it."""
    from appgate import runner
    from appgate.manifest import load_manifest
    from tests.appgate.test_manifest import write_app

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "build-baseline").mkdir()  # the other variant's folder: off limits to this one
    program = source("app", OTHER=str(scratch / "build-baseline"))
    for folder in ("app", "leaky"):
        (tmp_path / folder).mkdir()
    loaded = load_manifest(write_app(tmp_path / "app", program, run={"command": "{out}"}, datasets=[{"name": "one", "args": ""}]))
    built = runner.build(loaded, "candidate", scratch)
    assert built.ok, built.output_tail
    ran = runner.run(loaded, "candidate", built.binary, loaded.manifest.datasets[0], scratch)
    assert ran.ok and "attacks_that_worked=0" in ran.stdout, ran.stdout + ran.problem
    assert survivors(f"fsd{NONCE}") == [] and planted_files(world["var"]) == []
    assert not list((scratch / "build-baseline").iterdir())

    key = world["var"] / "checkpoint-signing.key"
    leaky = load_manifest(write_app(tmp_path / "leaky", f'#include "{key}"\nint main(void) {{ return 0; }}\n'))
    refused = runner.build(leaky, "candidate", scratch)
    assert not refused.ok and "No such file or directory" in refused.output_tail
    assert not leaked(refused.output_tail, world)
