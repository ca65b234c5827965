#!/usr/bin/env bash
# The specdec gate's steps; the workflows only wire them. Usage: gate.sh STEP
#   setup    check gh, fresh venv, the project, the leg's packages as pinned by
#            baselines/<machine class>/gate-lock.txt (versions-before.json)
#   upgrade  newest release of the leg's packages and servers (release-changes.json)
#   measure  the leg's benchmarks; a required leg that cannot be measured fails here
#   summary  the leg's state, release changes, erosion and report → $GITHUB_STEP_SUMMARY
#   confirm | alert | notify   re-run flips once; open/comment the issue; webhook
#   accept   measure and accept the results as baselines, pin the packages (gate-lock.txt)
#   propose  commit baselines/ on a branch, push it, open a pull request with gh
# Environment: BACKEND, OUT (this leg's report folder).
# Used by the act tests to stay offline (never needed on a runner):
#   SPECDEC_GATE_BASE_PYTHON   interpreter that makes the venv (default python3)
#   SPECDEC_GATE_SHARED_SITE   a site-packages folder the venv also sees (a .pth file)
#   SPECDEC_GATE_PROJECT=preinstalled   do not pip-install the project itself
#   SPECDEC_GATE_PIP_ARGS      extra pip arguments (e.g. --no-index --find-links DIR)
#   SPECDEC_GATE_PYTEST_ARGS   extra pytest arguments (e.g. a smaller budget)
#   SPECDEC_GH                 the GitHub CLI to call (default gh)
#   SPECDEC_PUSH_URL           where propose pushes (default: this repository on GitHub)
set -euo pipefail
step="$1"
venv=".gate-venv"
python="$venv/bin/python"
gh_cli="${SPECDEC_GH:-gh}"
mkdir -p "$OUT"
gate() { "$python" -m pytest_specdec.cli gate "$1" --backend "$BACKEND" --out "$OUT" --python "$python" --gh "$gh_cli" "${@:2}"; }

case "$step" in
  setup)
    # The alert step opens issues with the GitHub CLI: check it now, not at the first flip.
    if ! command -v "$gh_cli" > /dev/null 2>&1; then
      echo "gate.sh: the GitHub CLI '$gh_cli' is not on PATH — brew install gh, then gh auth login (see docs/self-hosted-runner.md)" >&2
      exit 1
    fi
    if ! "$gh_cli" auth status > /dev/null 2>&1 && [ -z "${GH_TOKEN:-}${GITHUB_TOKEN:-}" ]; then
      echo "gate.sh: gh is not authenticated — run gh auth login, or give the step GH_TOKEN" >&2
      exit 1
    fi
    rm -rf "$venv"
    "${SPECDEC_GATE_BASE_PYTHON:-python3}" -m venv "$venv"
    if [ -n "${SPECDEC_GATE_SHARED_SITE:-}" ]; then
      echo "import site; site.addsitedir('$SPECDEC_GATE_SHARED_SITE')" \
        > "$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/specdec-shared.pth"
    fi
    if [ "${SPECDEC_GATE_PROJECT:-}" != "preinstalled" ]; then
      "$python" -m pip install -q --upgrade pip
      # shellcheck disable=SC2086
      "$python" -m pip install -q ${SPECDEC_GATE_PIP_ARGS:-} -e '.[all]'
    fi
    gate install
    ;;
  upgrade | lock | measure | confirm | alert | notify)
    gate "$step"
    ;;
  summary)
    if [ -f "$python" ]; then
      gate summary > "$OUT/summary.md" || echo "specdec gate: no summary (see the steps above)" > "$OUT/summary.md"
    else
      echo "specdec gate: set-up failed before the gate was installed" > "$OUT/summary.md"
    fi
    cat "$OUT/summary.md"
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OUT/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi
    ;;
  accept)
    SPECDEC_GATE_PYTEST_ARGS="${SPECDEC_GATE_PYTEST_ARGS:-} --specdec-update-baselines" gate measure
    if ! grep -q '"measurable": true' "$OUT/status.json" 2> /dev/null; then
      echo "specdec gate: $BACKEND was not measured — nothing accepted, nothing pinned" >&2
      exit 1
    fi
    gate lock
    ;;
  propose)
    if ! grep -q '"measurable": true' "$OUT/status.json" 2> /dev/null; then
      echo "specdec gate: $BACKEND was not measured — nothing to accept, no pull request" >&2
      exit 1
    fi
    branch="specdec/accept-${BACKEND}-${GITHUB_RUN_ID:-local}-${GITHUB_RUN_ATTEMPT:-1}"
    git checkout -q -b "$branch"
    git add baselines
    if git diff --cached --quiet; then
      echo "specdec gate: the accepted baselines are what the repository holds — no pull request"
      exit 0
    fi
    git -c user.name="specdec gate" -c user.email="specdec-gate@users.noreply.github.com" \
      commit -q -m "Accept $BACKEND baselines measured by the gate (run ${GITHUB_RUN_ID:-local})"
    git push -q "${SPECDEC_PUSH_URL:-https://x-access-token:${GH_TOKEN}@${GITHUB_SERVER_URL#https://}/${GITHUB_REPOSITORY}.git}" "$branch"
    head -c 60000 "$OUT/report.md" > "$OUT/pr-body.md"  # GitHub refuses bodies over 65536 characters
    "$gh_cli" pr create --head "$branch" --base "${GITHUB_REF_NAME:-main}" \
      --title "specdec: accept $BACKEND baselines (run ${GITHUB_RUN_ID:-local})" --body-file "$OUT/pr-body.md"
    ;;
  *)
    echo "gate.sh: unknown step '$step' (setup, upgrade, measure, summary, confirm, alert, notify, accept, propose)" >&2
    exit 2
    ;;
esac
