#!/usr/bin/env bash
# Run ON the GPU device machine: the App Agent with the `patch` proposer on every forged HeCBench
# program (fixtures/forged/hecbench/<app>/: candidate.patch, candidate.yaml; <app> the application's
# name without "hecbench-", e.g. matrixt-cuda for upstream's src/matrixT-cuda), each gated against
# its own upstream code (issue 18, docs/appgate.md#forged-programs), in one call of at most 10
# minutes, resumable by the next.
#
#   here:    the same preparation as scripts/h200_triage.sh (device_wheels, pack_suite.py, a trusted key)
#   device:  run(command="bash scripts/h200_forge_apps.sh [PREFIX]",
#                carry=["device_wheels", "device_carry/bwrap", "device_carry/keys", "device_carry/hecbench"])
#
# PREFIX (default docs/benchmarks/hecbench_triage_h200_4): the ledger export to continue, without
# its suffix (PREFIX.jsonl), restored first: the triage's ledger, whose M1 profiles the agent takes
# (the same baseline files: no profiling again); a later call gives the previous call's export.
# Programs that already have a gate verdict in it are not gated again (an inconclusive one is, and a
# self-checked one whose comparison was declared since). The import re-registers
# the forged programs whose manifests changed (a comparison or datasets declared in fixtures/suites/hecbench/).
# Writes to $OUT: hecbench_forged_h200.jsonl (the whole ledger's export, signed with the carried
# key), hecbench_forged_h200.json (per forged program: state, verdict, headline, CI, REAL) and
# hecbench_forged_h200.log. FORGE_SECONDS (default 540): the call's budget; no program starts with
# less than FORGE_MIN_S (default 100) left, and each is cut at FORGE_PROGRAM_S (default 150) or at the
# time left less 40 s, whichever comes first (one slow program must not take the whole call: adam-cuda's
# 'large' run, a ~14 s CPU check each, took 430 s of the first call of 2026-12-02 and was cut). The agent
# gets three quarters of FORGE_PROGRAM_S as --gate-budget (not of the time left: a verdict about the
# program, not about the call): a program whose gate would need more by M1's wall
# time per run stops after M1 (RESEARCH, over_budget). A program whose runs an earlier M1 timed (in
# the export resumed) is planned instead: its cap is what its runs need, a quarter more and 60 s for
# M1 and the builds (at least FORGE_PROGRAM_S), and it waits for a later call when that is more than
# the time left less 40 s; where the call has the time, the cap also holds a second timing attempt of
# the program's longest dataset (appgate.agent.retry_seconds: hmm's noisy first attempt in session 24
# left no time for one); its --gate-budget is that cap less 20 s (the budget counts from the agent's
# start, M1 included: session 23's new M1s ran 25-31% longer than their plans' and came 1-4% over a budget that kept a fixed 60 s for M1),
# and the gate starts no second timing attempt that would not end within it.
# FORGE_ONLY="a-cuda b-cuda": these forged programs only, in this order (default: every one, those
# with a declared comparison first); FORGE_SKIP="a-cuda": these left out, e.g. a program whose runs
# are too long for the call (lif-cuda's upstream make-run: a CPU check of about a minute a run, ~18 runs).
# FORGE_PROFILE="a-cuda b-cuda" (optional, names as in FORGE_ONLY): after the loop, before the export,
# `appgate profile --profiler ncu` on each: its registered baseline built and run once on its first
# dataset under ncu, recorded as AppBaselineProfiled, whose speed of light is the application table's
# baseline quality; no state or milestone changes (docs/appgate.md#baseline-quality). None starts with
# less than FORGE_MIN_S left; each is cut like a program of the loop (FORGE_PROGRAM_S, or the time left
# less 40 s), its profiled run 30 s before that. For a call of profiles alone, name programs that have a
# verdict in FORGE_ONLY too: the loop gates none of them again.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${FORGE_SECONDS:-540}
least=${FORGE_MIN_S:-100}
each=${FORGE_PROGRAM_S:-150}
resume=${1:-docs/benchmarks/hecbench_triage_h200_4}
out=${OUT:-.}
tarball=device_carry/hecbench/hecbench.tar.xz
[ -f "$tarball" ] || { echo "$tarball is missing: run scripts/pack_suite.py here and carry device_carry/hecbench" >&2; exit 1; }
[ -f "$resume.jsonl" ] || { echo "$resume.jsonl is missing: give a committed ledger export without its suffix" >&2; exit 1; }
key=$(ls device_carry/keys/publication.key device_carry/keys/*.seed 2>/dev/null | head -1)
[ -n "$key" ] || { echo "a trusted publication key is needed in device_carry/keys/ to sign the export" >&2; exit 1; }
source scripts/device_env.sh || exit 1
LEDGER_SIGNING_KEY=$(cat "$key")
export LEDGER_SIGNING_KEY
corpus=$(mktemp -d /tmp/hecbench-XXXXXX)
tar -xJf "$tarball" -C "$corpus" || exit 1
export FORGESTENCIL_SUITE_ROOTS="hecbench=$corpus"
log="$out/hecbench_forged_h200.log"
manifests="$FORGESTENCIL_VAR_DIR/forged"
# those with a declared comparison first (they can end REAL); the self-checked ones after
forged=${FORGE_ONLY:-$(cd fixtures/forged/hecbench && for app in */; do app=${app%/}
    grep -qs no_comparison "../../suites/hecbench/compare/$app.yaml" && echo "2 $app" || echo "1 $app"; done | sort | cut -d' ' -f2)}
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    nvcc --version | tail -1
    echo "forged programs: $(echo $forged); resume: $resume"
} 2>&1 | tee "$log"
python3 manage.py migrate --noinput -v 0 || exit 1
python3 manage.py ledger restore "$resume.jsonl" 2>&1 | tail -1 | tee -a "$log" || exit 1
# every packed program, as the triage imported them (unchanged manifests record nothing): a forged
# folder is named by its application (hecbench-<folder>), which upstream's name need not spell alike
python3 manage.py appgate --actor agent:h200-forge suite import "$corpus" --suite hecbench --arch sm_90 \
    --only "$(paste -sd, "$corpus/PACKED")" --out "$manifests" 2>/dev/null | head -1 | tee -a "$log"
# Line 1: the programs with a verdict (not again; an inconclusive one is, and a self-checked one
# whose comparison has since been declared, e.g. with a probe: docs/appgate.md#probes); line 2:
# name=runs:retry, the gate's runs and a noisy dataset's second attempt, in seconds, by each forged
# program's last M1 that timed its runs (appgate.agent.planned_gate_seconds), so that such a program (one stopped after M1 by --gate-budget
# in an earlier call, say) is given the cap it needs, or left for the next call when that is more than
# the call has left, instead of being started and cut (session 21 lost 207 s to attention-cuda so).
# -v 0: Django's shell otherwise prints a line about its automatic imports first (that line re-gated
# dpid-cuda on 2026-12-02).
{ read -r gated; read -r planned; } < <(python3 manage.py shell -v 0 -c "
from math import ceil
from pathlib import Path
import yaml
from appgate.agent import planned_gate_seconds
from appgate.models import AppRow
def compared(name):
    declared = Path('fixtures/suites/hecbench/compare') / (name.removeprefix('hecbench-') + '.yaml')
    return declared.is_file() and isinstance(yaml.safe_load(declared.read_text()), list)
print(' '.join(name for name, verdict in AppRow.objects.exclude(verdict__in=('', 'inconclusive')).values_list('name', 'verdict')
               if not (verdict == 'self-checked' and compared(name))))
plans = {app: planned_gate_seconds(app) for app in ('hecbench-' + program for program in '''$forged'''.split())}
print(' '.join(f'{app}={ceil(plan[0])}:{ceil(plan[1])}' for app, plan in plans.items() if plan))")
for program in $forged; do
    app="hecbench-$program"
    case " ${FORGE_SKIP:-} " in *" $program "*) echo "$app: skipped (FORGE_SKIP)" | tee -a "$log"; continue ;; esac
    case " $gated " in *" $app "*) echo "$app: gated in $resume, not again" | tee -a "$log"; continue ;; esac
    left=$((budget - SECONDS))
    if [ "$left" -lt "$least" ]; then
        echo "$app: left for the next call ($left s left)" | tee -a "$log"
        continue
    fi
    cap=$((left - 40 < each ? left - 40 : each))
    gate_budget=$((each * 3 / 4))
    plan=$(printf '%s\n' $planned | sed -n "s/^$app=//p")
    if [ -n "$plan" ]; then
        runs=${plan%%:*}
        retry=${plan#*:}
        # known runs: a quarter more (M1's wall time moves between calls) and 60 s for M1 and the builds
        need=$((runs * 5 / 4 + 60))
        if [ "$need" -gt $((budget - 40)) ]; then
            echo "$app: not gated: its gate needs about $need s by its last M1, more than a call of $budget s holds" | tee -a "$log"
            continue
        elif [ "$need" -gt $((left - 40)) ]; then
            echo "$app: left for the next call (its gate needs about $need s by its last M1, $left s left)" | tee -a "$log"
            continue
        fi
        cap=$((need > cap ? need : cap))
        # and a noisy dataset's second attempt where the call has the time (the gate starts none
        # that would not end by its budget, so a short estimate costs an attempt, never a cut run)
        with_retry=$((need + retry))
        [ "$with_retry" -le $((left - 40)) ] && cap=$((with_retry > cap ? with_retry : cap))
        gate_budget=$((cap - 20))  # counted from the agent's start: M1 and the builds come out of it
    fi
    echo "[$SECONDS s] $app (cut at $cap s)" | tee -a "$log"
    # M1 (the baseline's build and one run a dataset) and the candidate's build take the rest of the cap
    timeout --kill-after=10 $cap python3 manage.py appgate --actor agent:h200-forge agent "$manifests/$app.yaml" \
        --gate-budget $gate_budget --proposer patch --patch "fixtures/forged/hecbench/$program" 2>&1 | tail -8 | tee -a "$log"
    # cut by `timeout` (124, or 137 when killed), it died holding its gate run: close it, and its
    # state goes back from IN_PROGRESS
    [ "${PIPESTATUS[0]}" -ge 124 ] && python3 manage.py reap 2>&1 | tee -a "$log"
done
for program in ${FORGE_PROFILE:-}; do
    app="hecbench-$program"
    left=$((budget - SECONDS))
    if [ "$left" -lt "$least" ]; then
        echo "$app: not profiled, left for the next call ($left s left)" | tee -a "$log"
        continue
    fi
    cap=$((left - 40 < each ? left - 40 : each))
    echo "[$SECONDS s] $app: baseline profile (cut at $cap s)" | tee -a "$log"
    timeout --kill-after=10 $cap python3 manage.py appgate --actor agent:h200-forge profile --profiler ncu \
        --timeout $((cap - 30)) "$manifests/$app.yaml" 2>&1 | tail -3 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -ge 124 ] && python3 manage.py reap 2>&1 | tee -a "$log"  # its lease's scratch
done
python3 manage.py ledger export --out "$out/hecbench_forged_h200.jsonl" 2>&1 | tail -1 | tee -a "$log"
python3 manage.py shell -v 0 -c "
import json
from appgate.models import AppRow
names = ['hecbench-' + p for p in '''$forged'''.split()]
rows = {row.name: {'state': row.state, 'code': row.state_code, 'verdict': row.verdict, 'status': row.status,
                   'headline': row.headline, 'ci': row.headline_ci, 'real': row.real, 'amdahl_ceiling': row.amdahl_ceiling,
                   'reason': row.state_reason} for row in AppRow.objects.filter(name__in=names)}
json.dump(rows, open('$out/hecbench_forged_h200.json', 'w'), indent=1, sort_keys=True)
for name, row in sorted(rows.items()):
    print(name, row['state'], row['verdict'] or '-', row['headline'], 'REAL' if row['real'] else '')
" 2>&1 | tee -a "$log"
echo "${SECONDS} s in all" | tee -a "$log"
