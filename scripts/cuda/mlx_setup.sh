#!/usr/bin/env bash
# mlx on the CUDA machine, step 1, in three calls within the machine's warm window (each
# carries one folder of .mlxw/, made by mlx_prepare.sh): `mlx_setup.sh callA`, `callB`, then
# `mlx_setup.sh callC`, which joins the mlx-cuda-13 wheel, checks its sha256 and installs
# it with the mlx-lm stack into /tmp/site. Wheels in if-missing/ go in only where the image
# has no such distribution (a carried numpy or pydantic must not shadow the image's own).
set -euo pipefail
call=.mlxw/$1
mkdir -p /tmp/site /tmp/mlx /tmp/specdec-cache
python3 - "$call" <<'PY'
import pathlib, subprocess, sys
from importlib import metadata
folder = pathlib.Path(sys.argv[1])
wanted = list((folder / "always").glob("*.whl"))
for wheel in sorted((folder / "if-missing").glob("*.whl")) if (folder / "if-missing").is_dir() else []:
    name = wheel.name.split("-")[0].replace("_", "-")
    try:
        print(f"image has {name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        wanted.append(wheel)
if wanted:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--target", "/tmp/site", *map(str, wanted)], check=True)
print("installed:", " ".join(w.name.split("-")[0] for w in wanted))
PY
[ "$1" = callB ] || cp "$call"/mlx.part* /tmp/mlx/  # callB carries no part of the big wheel; the others must
cp "$call"/mlx-*.whl /tmp/mlx/ 2>/dev/null || true  # mlx's Python bindings (mlx[cuda13] = mlx + mlx-cuda-13)
if [ -f "$call/mlx.sha256" ]; then
  wheel=/tmp/mlx/$(cat "$call/mlx.name")
  ls /tmp/mlx/mlx.part* | sort -V | xargs cat > "$wheel"
  echo "$(cat "$call/mlx.sha256")  $wheel" | sha256sum -c - || { echo "the joined mlx wheel does not match: re-carry"; exit 1; }
  # One pip call for both: each fills part of the mlx/ folder (bindings; libmlx.so for CUDA 13).
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site /tmp/mlx/mlx-*.whl "$wheel"
  PYTHONPATH=/tmp/site python3 -c "import mlx.core as mx, mlx_lm; print('mlx', mx.__version__, mx.default_device())"
fi
python3 -c "import sys, pytest, numpy, scipy; print(sys.version.split()[0], pytest.__version__, numpy.__version__, scipy.__version__)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
