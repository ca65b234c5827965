#!/usr/bin/env bash
# The specdec gate's steps; the workflows only wire them. Usage: gate.sh STEP
# The measuring job (self-hosted, contents: read, no token, no secret), one leg:
#   setup    fresh venv: every package from the hashed lock (baselines/<machine class>/gate-lock.txt,
#            lock_for_here.py says which), the project from the checkout (versions-before.json); on an
#            upgrading night a second one, .gate-venv-old, that the upgrade leaves as it is
#   upgrade  newest release of the leg's packages and servers (release-changes.json): the only step
#            that resolves releases (also on a night whose lock could not be installed)
#   measure  the budget said, then the leg's benchmarks (status.json, results.json, candidates.json)
#   confirm  re-run flipped comparisons once
#   lock     the environment that ran, every package with its hash (gate-lock.txt, for the accept PR)
#   night    the leg's findings, each in its own word (night.json); fails a required leg that is red
#   summary  the leg's state, findings, release changes and report → $GITHUB_STEP_SUMMARY
#   accept   measure with --specdec-update-baselines; the accepted results go out as candidates.json
# The plan job (hosted): legs     the configured legs as JSON for the matrix ($LEG: one of them, or all), the
#                                 runners of the fleet with their legs ($RUNNER: one label, or all), the
#                                 runs-on labels ([tool.specdec.gate] runs-on, and $RUNNER's own), and
#                                 publish=true when [tool.specdec.gate] publish-site = true
# The verdict job (hosted, the write token, never the upgraded packages; reads only the artifacts):
#   alert-setup   a venv with the project alone, from .github/alert-lock.txt (hashed)
#   verdict       every leg's night.json validated; the night's colour; issues; webhook
#   propose       the night's candidates into baselines/ and the lock, one pull request per machine class
#   site          the scoreboard (pytest-specdec site) of baselines/, tonight's results and the runners' nights,
#                 for the publish job
#   watchdog      red, and one issue, when no night has completed for 48 hours
# The community workflow (hosted, contents: read): validate-submissions   specdec validate on every file
#   under $SUBMITTED (the pull request's community/, checked out as data), by the base branch's code
# Environment: BACKEND and OUT (a leg's report folder) for the leg's steps; ARTIFACTS for the verdict's.
#   SPECDEC_GATE_BASE_PYTHON   the Python 3.11+ that makes the venvs and picks the lock (default python3).
#                              On a Mac runner set it in the runner's .env (macOS's python3 is 3.9):
#                              SPECDEC_GATE_BASE_PYTHON=/opt/homebrew/bin/python3.12
# Used by the act tests to stay offline (never needed on a runner):
#   SPECDEC_GATE_SHARED_SITE   a site-packages folder the venv also sees (a .pth file); with
#                              SPECDEC_GATE_PROJECT=preinstalled the venv gets no pip of its own
#   SPECDEC_GATE_PROJECT=preinstalled   do not pip-install the project itself
#   SPECDEC_GATE_ALERT_LOCK    the hosted jobs' lock (default .github/alert-lock.txt)
#   SPECDEC_GATE_PIP_ARGS      extra pip arguments (e.g. --no-index --find-links DIR)
#   SPECDEC_GATE_PYTEST_ARGS   extra pytest arguments (e.g. a smaller budget)
#   SPECDEC_GH                 the GitHub CLI to call (default gh)
#   SPECDEC_PUSH_URL           where propose pushes (default: this repository on GitHub)
set -euo pipefail
step="$1"
venv=".gate-venv"
python="$venv/bin/python"
gh_cli="${SPECDEC_GH:-gh}"
gate() { "$python" -m pytest_specdec.cli gate "$1" --backend "$BACKEND" --out "$OUT" --python "$python" "${@:2}"; }

# Hashed from the first byte: every package a venv gets comes from a hashed lock (--require-hashes
# --no-deps; a locked sdist built with --no-build-isolation against the lock's '# build' pins, installed
# first), except the project itself, installed from the reviewed checkout with nothing resolved
# or downloaded (--no-deps --no-index, its build backend from the lock: --no-build-isolation). Only
# the upgrade step resolves new releases; the lock step records what ran, with hashes. pip itself
# is the one the interpreter bundles (ensurepip, no download); it is never upgraded here.
base_python="${SPECDEC_GATE_BASE_PYTHON:-python3}"
need_python() {  # before anything reads the platform or makes a venv: one line, not a log line
  if ! "$base_python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2> /dev/null; then
    echo "gate.sh: $base_python is not Python 3.11 or newer ($("$base_python" -V 2>&1 || echo 'not found')): set SPECDEC_GATE_BASE_PYTHON=/opt/homebrew/bin/python3.12 in the runner's .env (brew install python@3.12)" >&2
    exit 2
  fi
}
new_venv() {  # $1: folder
  rm -rf "$1"
  if [ -n "${SPECDEC_GATE_SHARED_SITE:-}" ] && [ "${SPECDEC_GATE_PROJECT:-}" = "preinstalled" ]; then
    # The shared site brings the project and pip along: seeding pip into every venv would take
    # seconds a night for nothing (the venv's own site still receives what pip installs).
    "$base_python" -m venv --without-pip "$1"
  else
    "$base_python" -m venv "$1"
  fi
  if [ -n "${SPECDEC_GATE_SHARED_SITE:-}" ]; then
    echo "import site; site.addsitedir('$SPECDEC_GATE_SHARED_SITE')" \
      > "$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/specdec-shared.pth"
  fi
}
runner_class() {  # a fleet's test-only machine-class for $SPECDEC_GATE_RUNNER's jobs, exported; refused on a runner
  local override
  override="$("$base_python" -c 'import os, sys, tomllib
runners = tomllib.load(open("pyproject.toml", "rb")).get("tool", {}).get("specdec", {}).get("gate", {}).get("runners", {})
print((runners.get(os.environ["SPECDEC_GATE_RUNNER"]) or {}).get("machine-class", ""))')"
  [ -n "$override" ] || return 0
  if [ "${RUNNER_ENVIRONMENT:-}" = "self-hosted" ]; then
    echo "gate.sh: [tool.specdec.gate.runners.$SPECDEC_GATE_RUNNER] machine-class is for the act tests only — on a real runner the machine class is detected: remove it (SPECDEC_MACHINE_CLASS in the runner's .env splits a class on purpose)" >&2
    exit 2
  fi
  export SPECDEC_MACHINE_CLASS="$override"
}
pip_in() {  # $1: venv, then pip install's arguments; each call is said first (the set-up log is audited)
  local venv_dir="$1"
  shift
  echo "gate.sh: pip install $*"
  # shellcheck disable=SC2086
  "$venv_dir/bin/python" -m pip install -q ${SPECDEC_GATE_PIP_ARGS:-} "$@"
}
locked_venv() {  # $1: venv, $2: lock — every package of the lock, hashes checked
  new_venv "$1"
  # The build requirements of the lock's sdists first (its lines marked '# build'), then the lock with
  # --no-build-isolation: an sdist builds against those, never against build tools pip fetched unhashed.
  local build_lock
  build_lock="$(mktemp)"
  grep -E '#[[:space:]]*build[[:space:]]*$' "$2" > "$build_lock" || true
  # --ignore-installed: into this venv from the lock, even where a shared site already has one of that version.
  if [ -s "$build_lock" ] && ! pip_in "$1" --require-hashes --no-deps --ignore-installed -r "$build_lock"; then
    rm -f "$build_lock"
    return 1
  fi
  rm -f "$build_lock"
  pip_in "$1" --require-hashes --no-deps --no-build-isolation -r "$2"
}
project_kind() {  # specdec: this checkout is pytest-specdec; package: a repository with a package of its own; none
  "$base_python" -c 'import pathlib, tomllib
path = pathlib.Path("pyproject.toml")
project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}) if path.is_file() else {}
name = str(project.get("name", "")).lower().replace("_", "-")
print("specdec" if name == "pytest-specdec" else "package" if name else "none")'
}
project_into() {  # $1: venv, $2: alert (the hosted jobs: pytest-specdec only) — nothing resolved, nothing downloaded
  # pytest-specdec's own checkout is the project; any other repository gets pytest-specdec from its lock, and
  # its own package (measuring venvs only) from the checkout, its dependencies and build backend from the lock.
  [ "${SPECDEC_GATE_PROJECT:-}" != "preinstalled" ] || return 0
  local kind
  kind="$(project_kind)"
  if [ "$kind" = "specdec" ] || { [ "$kind" = "package" ] && [ "${2:-}" != "alert" ]; }; then
    pip_in "$1" --no-deps --no-index --no-build-isolation -e . || return 1  # also inside `if !`, where -e is off
  fi
  if ! "$1/bin/python" -c 'import pytest_specdec' 2> /dev/null; then
    echo "gate.sh: pytest-specdec is not in the venv: the lock must pin it (pytest-specdec==VERSION --hash=sha256:...) — see docs/self-hosted-runner.md, 'Add the gate to your project'" >&2
    return 1
  fi
}
hashed_venv() {  # $1: venv, $2: lock, $3: alert for the hosted jobs' venv
  locked_venv "$1" "$2" && project_into "$1" "${3:-}"
}
resolving_venv() {  # $1: venv — no lock could be installed: the upgrade resolves tonight's releases
  new_venv "$1"
  echo "gate.sh: upgrade (no hashed lock was installed): the newest releases, recorded with hashes by the lock step"
  [ "${SPECDEC_GATE_PROJECT:-}" != "preinstalled" ] || return 0
  # pytest-specdec by name in any other repository (before its first release SPECDEC_GATE_PIP_ARGS finds the
  # wheel); the checkout's build backend too, so that the lock step records it and tomorrow's
  # --no-build-isolation finds it (PEP 518's default where pyproject.toml names none).
  local kind build
  kind="$(project_kind)"
  if [ "$kind" = "none" ]; then pip_in "$1" pytest-specdec; return; fi
  build="$("$1/bin/python" -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb")).get("build-system", {}).get("requires", ["setuptools>=40.8.0"]))')"
  # shellcheck disable=SC2086
  if [ "$kind" = "specdec" ]; then pip_in "$1" -e ".[all]" $build; else pip_in "$1" pytest-specdec -e . $build; fi
}

case "$step" in
  setup | upgrade | measure | confirm | lock | night | summary | accept)
    if [ -n "${SPECDEC_GATE_RUNNER:-}" ]; then need_python; runner_class; fi
    ;;
esac

case "$step" in
  legs)
    # runners: one entry per runner of the fleet ([tool.specdec.gate.runners.LABEL]; without one, the one
    # runner "" with every leg), each with its legs and runs-on as JSON text, for the per-runner night.
    "$base_python" - <<'PY'
import json, os, sys, tomllib
gate = tomllib.load(open("pyproject.toml", "rb")).get("tool", {}).get("specdec", {}).get("gate", {})
legs = sorted(gate.get("legs", {}))
wanted = os.environ.get("LEG", "") or "all"
chosen = legs if wanted == "all" else [leg for leg in legs if leg == wanted]
print("legs=" + json.dumps(chosen))
print("publish=" + json.dumps(gate.get("publish-site", False) is True))
fleet, only = gate.get("runners") or {}, os.environ.get("RUNNER", "") or "all"
labels = gate.get("runs-on", ["self-hosted", "macOS", "ARM64"])  # the measuring jobs' runner (gate init --runner)
if not isinstance(labels, list) or not labels or not all(isinstance(x, str) and x.strip() for x in labels):
    sys.exit(f"gate.sh: [tool.specdec.gate] runs-on = {labels!r} must name the runner's labels, e.g. "
             "['self-hosted', 'macOS', 'ARM64'] (pytest-specdec gate init --runner KIND writes them)")
print("runs-on=" + json.dumps([*labels, only] if only != "all" else labels))  # one runner's: the accept workflow
planned = [
    {"runner": label, "legs": json.dumps([leg for leg in table.get("legs", []) if leg in chosen]),
     "runs-on": json.dumps([*labels, label])}
    for label, table in sorted(fleet.items()) if only in ("all", label)
]
planned = [runner for runner in planned if runner["legs"] != "[]"] if fleet else [
    {"runner": "", "legs": json.dumps(chosen), "runs-on": json.dumps(labels)}]
# Nothing planned still gets its verdict: a night that measures nothing is never green.
print("runners=" + json.dumps(planned or [{"runner": "", "legs": "[]", "runs-on": json.dumps(labels)}]))
PY
    ;;
  setup)
    mkdir -p "$OUT"
    rm -rf .gate-venv-old  # never a venv left by an earlier night: it is rebuilt from the lock or absent
    rm -f "$OUT/old-env.txt" "$OUT/resolved.txt" "$OUT/tampered.txt" "$OUT/setup-failed.txt"
    need_python
    lock="$("$base_python" "$(dirname "$0")/lock_for_here.py" baselines)"
    if [ -n "$lock" ] && locked_venv "$venv" "$lock" > "$OUT/lock-install.log" 2>&1; then
      cat "$OUT/lock-install.log"
      project_into "$venv"  # a failure here is the checkout's, never "the lock cannot be installed"
      gate install --lock "$lock"
    else
      if [ -n "$lock" ]; then
        cat "$OUT/lock-install.log"
        said="$(grep -m 1 -E '^ERROR' "$OUT/lock-install.log" || tail -n 1 "$OUT/lock-install.log")"
        # Fail closed: a hash that does not match is red and nothing unhashed is installed; only a locked
        # release that is gone from the index ("no matching distribution": withdrawn) falls back to tonight's.
        if grep -q 'DO NOT MATCH THE HASHES' "$OUT/lock-install.log"; then
          echo "$lock: a package's hash does not match the lock (pip: $(grep -m 1 -E 'Expected sha256|Got' "$OUT/lock-install.log" | tr -s ' ' || echo "$said")) — nothing unhashed was installed; find out who changed the package or the index before the next night" > "$OUT/tampered.txt"
          echo "specdec gate: lock does not match: possible tampering — $(cat "$OUT/tampered.txt")" >&2
          rm -rf "$venv"
          exit 1
        fi
        if ! grep -qE 'No matching distribution found|Could not find a version that satisfies' "$OUT/lock-install.log"; then
          echo "$lock could not be installed (pip: $said) — nothing was installed in its place; fix the lock or the runner" > "$OUT/setup-failed.txt"
          echo "specdec gate: set-up failed — $(cat "$OUT/setup-failed.txt")" >&2
          rm -rf "$venv"
          exit 1
        fi
        # A locked release withdrawn from the index never stops the night: tonight's release is measured (and said).
        echo "last night's environment cannot be rebuilt from $lock (pip: $said; a locked release is no longer on the index) — tonight's releases are installed and measured, and a flip is re-run on the upgraded machine instead" > "$OUT/old-env.txt"
        echo "specdec gate: $(cat "$OUT/old-env.txt")"
      fi
      echo "resolved: no hashed lock was installed tonight" > "$OUT/resolved.txt"
      resolving_venv "$venv"
      gate install ${lock:+--lock "$lock"}
    fi
    if [ "${UPGRADE:-}" = "true" ] && [ ! -f "$OUT/resolved.txt" ]; then
      # The old release beside the new one, from the same hashed lock, for the same-night A/B
      # (only the upgraded .gate-venv moves; .gate-venv-old stays as the lock pins it).
      if ! { hashed_venv .gate-venv-old "$lock" &&
        .gate-venv-old/bin/python -m pytest_specdec.cli gate install --backend "$BACKEND" --out "$OUT/old" \
          --python .gate-venv-old/bin/python --lock "$lock"; } > "$OUT/old-env.log" 2>&1; then
        rm -rf .gate-venv-old
        said="$(grep -m 1 -E '(ERROR|failed)' "$OUT/old-env.log" || tail -n 1 "$OUT/old-env.log")"
        echo "last night's environment cannot be rebuilt ($said) — tonight's release is measured, and a flip is re-run on the upgraded machine instead" > "$OUT/old-env.txt"
        echo "specdec gate: $(cat "$OUT/old-env.txt")"
      fi
      cat "$OUT/old-env.log"
    fi
    ;;
  upgrade)
    mkdir -p "$OUT"
    if [ "${UPGRADE:-}" = "true" ] || [ -f "$OUT/resolved.txt" ]; then
      gate upgrade
    else
      echo "specdec gate: no upgrade tonight (the releases the lock pins are measured)"
    fi
    ;;
  lock | measure | confirm | night)
    mkdir -p "$OUT"
    for refused in "$OUT/tampered.txt" "$OUT/setup-failed.txt"; do  # set-up failed closed: no venv to run
      if [ -f "$refused" ]; then echo "specdec gate: $step: nothing to run — the set-up stopped: $(cat "$refused")" >&2; exit 1; fi
    done
    gate "$step"
    ;;
  summary)
    mkdir -p "$OUT"
    if [ -f "$python" ]; then
      gate summary > "$OUT/summary.md" || echo "specdec gate: no summary (see the steps above)" > "$OUT/summary.md"
    elif [ -f "$OUT/tampered.txt" ]; then
      echo "specdec gate: lock does not match: possible tampering — $(cat "$OUT/tampered.txt")" > "$OUT/summary.md"
    elif [ -f "$OUT/setup-failed.txt" ]; then
      echo "specdec gate: set-up failed — $(cat "$OUT/setup-failed.txt")" > "$OUT/summary.md"
    else
      echo "specdec gate: set-up failed before the gate was installed" > "$OUT/summary.md"
    fi
    cat "$OUT/summary.md"
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OUT/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi
    ;;
  accept)
    mkdir -p "$OUT"
    # Run by a person (the accept workflow) to accept what it measures: an inconclusive result too, as merging
    # the nightly accept pull request does; the pull request it opens lists each one for review.
    SPECDEC_GATE_PYTEST_ARGS="${SPECDEC_GATE_PYTEST_ARGS:-} --specdec-update-baselines --specdec-accept-inconclusive" gate measure
    if ! grep -q '"measurable": true' "$OUT/status.json" 2> /dev/null; then
      echo "specdec gate: $BACKEND was not measured — nothing to accept" >&2
      exit 1
    fi
    machine="$("$python" -c 'from pytest_specdec.hardware import machine_class; print(machine_class())')"
    # The accepted file and its details (<backend>.samples.jsonl), under the artifact's own name.
    "$python" -c 'import sys; from pathlib import Path; from pytest_specdec.store.baseline_files import copy_split
copy_split(Path(sys.argv[1]), Path(sys.argv[2]))' "baselines/$machine/$BACKEND.json" "$OUT/candidates.json"
    gate lock
    ;;
  alert-setup)
    # The hosted jobs' own hashed lock (ubuntu-24.04's Python 3.12; SPECDEC_GATE_ALERT_LOCK: the act tests').
    need_python
    hashed_venv .alert-venv "${SPECDEC_GATE_ALERT_LOCK:-.github/alert-lock.txt}" alert
    ;;
  verdict)
    .alert-venv/bin/python -m pytest_specdec.cli gate verdict --artifacts "$ARTIFACTS" --gh "$gh_cli" --legs "${LEGS:-}" --runner "${RUNNER:-}"
    ;;
  site)
    # The scoreboard from the repository's baselines and tonight's results, for the publish job (hosted).
    results=()
    for file in "$ARTIFACTS"/*/results.json; do [ -f "$file" ] && results+=(--results "$file"); done
    # Each leg's nights on its runner, with the gate's word on each (a flip not confirmed is not a flip).
    for file in "$ARTIFACTS"/*/nights.jsonl; do [ -f "$file" ] && results+=(--history "$file"); done
    .alert-venv/bin/python -m pytest_specdec.cli site specdec-site --baselines baselines "${results[@]}"
    ;;
  validate-submissions)
    # The community workflow: the base branch's specdec reads the pull request's files as data.
    # Only what the pull request adds or changes: a file the base branch holds as it is was checked when it
    # came in (a later protocol or check would otherwise turn every new pull request red).
    submitted="${SUBMITTED:-community}"
    files=()
    while IFS= read -r -d '' file; do
      cmp -s "$file" "community/${file#"$submitted"/}" 2> /dev/null || files+=("$file")
    done < <(find "$submitted" -mindepth 2 -maxdepth 2 -name '*.json' -print0 2>/dev/null | sort -z)
    if [ "${#files[@]}" -eq 0 ]; then echo "no new or changed submission under $submitted/<machine class>/: nothing to validate"; exit 0; fi
    .alert-venv/bin/python -m pytest_specdec.cli validate "${files[@]}"
    ;;
  watchdog)
    .alert-venv/bin/python -m pytest_specdec.cli gate watchdog --gh "$gh_cli" --hours "${SPECDEC_WATCHDOG_HOURS:-48}"
    ;;
  propose)
    rm -f .accepted-machine
    .alert-venv/bin/python -m pytest_specdec.cli gate accept-candidates --artifacts "$ARTIFACTS" --machine-file .accepted-machine
    if [ ! -s .accepted-machine ]; then
      echo "specdec gate: nothing awaits acceptance — no pull request"
      exit 0
    fi
    back="$(git rev-parse --abbrev-ref HEAD)"
    # One pull request per machine class: a fleet's chips are accepted (and reviewed) apart.
    for machine in $(cat .accepted-machine); do  # machine classes are slugs: no spaces
      branch="specdec/accept-$machine${RUNNER:+-$RUNNER}"  # two runners of one class: a pull request each
      git checkout -q -B "$branch" "$back"
      git add "baselines/$machine"
      git -c user.name="specdec gate" -c user.email="specdec-gate@users.noreply.github.com" \
        commit -q -m "Accept the baselines the gate measured on $machine (run ${GITHUB_RUN_ID:-local})"
      git push -q -f "${SPECDEC_PUSH_URL:-https://x-access-token:${GH_TOKEN}@${GITHUB_SERVER_URL#https://}/${GITHUB_REPOSITORY}.git}" "$branch"
      git checkout -q "$back"
      open="$("$gh_cli" pr list --head "$branch" --state open --json number --jq '.[0].number // empty')"
      if [ -n "$open" ]; then
        echo "specdec gate: updated the accept pull request #$open ($branch)"
      else
        cat "$ARTIFACTS"/*/report.md 2> /dev/null | head -c 60000 > pr-body.md || true  # GitHub refuses bodies over 65536
        "$gh_cli" pr create --head "$branch" --base "${GITHUB_REF_NAME:-main}" \
          --title "specdec: accept the gate's baselines on $machine" --body-file pr-body.md
      fi
    done
    ;;
  *)
    echo "gate.sh: unknown step '$step' (legs, setup, upgrade, measure, confirm, night, summary, accept, alert-setup, verdict, propose, watchdog)" >&2
    exit 2
    ;;
esac
