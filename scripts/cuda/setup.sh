#!/usr/bin/env bash
# Step 1 on the CUDA machine: wheels, background CUDA build, synthetic 1B GGUF pair.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/build /tmp/wheel /tmp/gemma /tmp/specdec-cache
tar xzf .whl/llama_cpp_python-0.3.36-src.tar.gz -C /tmp/build
cp -r . /tmp/repo  # the repository folder is laid afresh at every call
cd /tmp/build/llama_cpp_python-0.3.36
CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90" setsid nohup \
  python3 -m pip wheel --no-build-isolation --no-deps -w /tmp/wheel . > /tmp/build.log 2>&1 &
cd /tmp/repo
SPECDEC_CACHE_DIR=/tmp/specdec-cache PYTHONPATH=/tmp/repo:/tmp/site setsid nohup python3 -c "
from pytest_specdec.embedded.gguf_writer import materialize_gguf
for name in ('embedded:target-1b', 'embedded:draft-1b-aligned', 'embedded:target', 'embedded:draft-aligned'):
    print(materialize_gguf(name), flush=True)
" > /tmp/gguf.log 2>&1 &
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
echo "setup started"
