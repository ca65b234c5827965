#!/usr/bin/env bash
# Fair arms on the device machine's quiet CPU cores (issue #52): the plugin's llama-cpp arms against
# bare llama-cpp-python loops, second-model draft, at each thread count given (default 4 8).
# Carry .whl/ (scripts/cuda/prepare.sh's wheels plus a CPU llama-cpp-python wheel, e.g.
# ../shared/wheels/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl). Usage:
#   scripts/cuda/cpu_agreement.sh LABEL [THREADS...]   (tables to $OUT/agreement-LABEL-N.log)
set -uo pipefail
label=$1; shift
threads=("${@:-4 8}")
ls /tmp/site/llama_cpp >/dev/null 2>&1 || \
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${WHEELS:-.whl}"/*.whl 2>&1 | tail -2
export PYTHONPATH=$PWD:/tmp/site SPECDEC_CACHE_DIR=/tmp/specdec-cache PYTHONUNBUFFERED=1
nproc; lscpu | grep -E "Model name|^CPU\(s\)" || true
for n in ${threads[@]}; do
  python3 -c "import llama_cpp, runpy, sys
sys.argv = ['arm_agreement.py', '--backend', 'llama-cpp', '--profile', 'embedded', '--category', 'code',
            '--spec', 'draft', '--threads', '$n', '--rounds', '48', '--max-rounds', '${MAX_ROUNDS:-240}',
            '--max-tokens', '64', '--label', 'quiet 16-core x86-64, $label', '--raw', '${OUT:-/tmp}/rounds-$label-$n.json'] + '${EXTRA:-}'.split()
runpy.run_path('studies/arm_agreement.py', run_name='__main__')" 2>&1 | grep -v "^  round" | tee "${OUT:-/tmp}/agreement-$label-$n.log"
done
