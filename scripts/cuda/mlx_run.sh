#!/usr/bin/env bash
# mlx on the CUDA machine, step 2: the mlx claim on each profile named (embedded,
# embedded-1b; gemma needs /tmp/gemma/gemma-3-270m-q4_k_m.gguf joined as run.sh joins it), accepted as NVIDIA-H200
# baselines, then the plugin's arms against bare mlx-lm loops (studies/arm_agreement.py).
# ROUNDS (default 128) sets the agreement's rounds before its first look at the intervals (it then runs on until
# they are narrower than 2 %, or 240 rounds, or ROUNDS where that is more); AGREE_ONLY=1 skips the claim and its
# baselines.
set -uo pipefail
rounds=${ROUNDS:-128}
export PYTHONPATH=/tmp/repo:/tmp/site SPECDEC_CACHE_DIR=/tmp/specdec-cache PYTHONUNBUFFERED=1
rm -rf /tmp/repo && cp -r . /tmp/repo && cd /tmp/repo
for profile in "$@"; do
  extra=()
  if [ "$profile" = gemma ]; then  # the joined GGUF, converted here (no PyPI package on this machine)
    target=/tmp/gemma/mlx-target draft=/tmp/gemma/mlx-draft-15
    python3 -c "from pathlib import Path; from pytest_specdec.embedded.gemma_mlx import convert, early_exit
t = Path('$target'); convert(Path('/tmp/gemma/gemma-3-270m-q4_k_m.gguf'), t); early_exit(t, 15, Path('$draft'))"
    extra=(--specdec-model="$target" --specdec-draft="$draft")
  fi
  [ "${AGREE_ONLY:-0}" = 1 ] || python3 -m pytest -p pytest_specdec.plugin -p no:cacheprovider -q benchmarks/test_claim_d_mlx_draft.py --backend=mlx \
    --specdec-profile="$profile" "${extra[@]}" --specdec-update-baselines \
    --specdec-json="$OUT/mlx-$profile.json" 2>&1 | tail -n 40 | tee "$OUT/mlx-$profile.log"
  agree=(--backend mlx --profile "$profile" --category copy --rounds "$rounds" --max-rounds $((rounds > 240 ? rounds : 240))
         --max-tokens 64)
  [ "$profile" = gemma ] && agree+=(--model "$target" --draft "$draft")
  python3 -m studies.arm_agreement "${agree[@]}" --raw "$OUT/agree-mlx-$profile-rounds.json" 2>&1 | grep -v "^  round" | tee "$OUT/agree-mlx-$profile.log"
done
cp baselines/NVIDIA-H200/mlx.json "$OUT/" 2>/dev/null || true
cp baselines/history/NVIDIA-H200.jsonl "$OUT/history-NVIDIA-H200.jsonl" 2>/dev/null || true
