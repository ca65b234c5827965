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
    "$python" -m pip install -q --upgrade mlx mlx-lm llama-cpp-python ollama httpx
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
