#!/usr/bin/env bash
# mlx on the CUDA machine, step 0, on this machine (it reaches PyPI): .mlxw/callA, callB and
# callC, one per call, each under the run tool's 64 MiB with the working tree (~7 MB): the
# mlx-cuda-13 wheel (~90 MB) in two parts (callA, callC; callC has its sha256), and the
# wheels the mlx backend needs there without their dependencies: always/ (the mlx-lm stack,
# installed whatever the image has) and if-missing/ (installed only where the image lacks
# them: a carried numpy or pydantic must not shadow the image's own).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .mlxw /tmp/specdec-mlxw && mkdir -p .mlxw/callA/if-missing .mlxw/callB/always .mlxw/callC/always /tmp/specdec-mlxw
get() { python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.12 \
          --platform manylinux_2_35_x86_64 --platform manylinux2014_x86_64 --platform any -d "$@"; }
get /tmp/specdec-mlxw "mlx-cuda-13==0.32.4"  # libmlx.so built for CUDA 13 (~90 MB)
get .mlxw/callA "mlx==0.32.4"  # mlx's Python bindings: mlx[cuda13] is these two
# Three calls of under 64 MiB each, the working tree included: half the wheel in callA and callC.
get .mlxw/callB/always "tokenizers==0.23.3" hf-xet "transformers==5.24.0"
get .mlxw/callC/always "mlx-lm==0.32.2" "huggingface-hub==2.4.0" safetensors gguf \
    httpx2 httpcore2 h11 anyio idna truststore  # huggingface-hub 2 imports httpcore2
get .mlxw/callA/if-missing sentencepiece protobuf regex typer click fsspec tqdm httpx2 shellingham rich \
    markdown-it-py mdurl pygments pydantic pydantic-core annotated-types typing-extensions typing-inspection \
    filelock packaging pyyaml jinja2 markupsafe tabulate
wheel=$(ls /tmp/specdec-mlxw/mlx_cuda_13-*.whl)
split -d -a 2 -n 2 "$wheel" /tmp/specdec-mlxw/mlx.part
mv /tmp/specdec-mlxw/mlx.part00 .mlxw/callA/ && mv /tmp/specdec-mlxw/mlx.part01 .mlxw/callC/
sha256sum "$wheel" | cut -d' ' -f1 > .mlxw/callC/mlx.sha256  # the last call joins and checks
basename "$wheel" > .mlxw/callC/mlx.name
du -sh .mlxw/*
tree=$(git ls-files -z | du -cb --files0-from=- | tail -n 1 | cut -f 1)
for call in .mlxw/call*; do  # the run tool carries 64 MiB a call, the tracked tree included
  size=$(( tree + $(du -sb "$call" | cut -f 1) ))
  [ "$size" -le $(( 64 << 20 )) ] || { echo "$call and the tree are $size bytes, over 64 MiB: move wheels to another call"; exit 1; }
done
