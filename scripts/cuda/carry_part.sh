#!/usr/bin/env bash
# Step 2 on the CUDA machine: keep one carried part of the Gemma GGUF in /tmp/gemma
# (run once per part: scripts/cuda/carry_part.sh 00, then 01, …; each call carries .gemma/).
set -euo pipefail
cp .gemma/gemma.part"$1" /tmp/gemma/
ls -la /tmp/gemma; tail -n 3 /tmp/build.log || true; cat /tmp/gguf.log || true
