"""Which import orders let a CUDA ``Llama(...)`` start? Each order runs in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ORDERS = {
    "numpy, then llama_cpp, then Llama()": "import numpy; import llama_cpp; llama_cpp.Llama({path!r}, n_gpu_layers=-1, verbose=False)",
    "scipy, then llama_cpp, then Llama()": "import scipy.stats; import llama_cpp; llama_cpp.Llama({path!r}, n_gpu_layers=-1, verbose=False)",
    "llama_cpp, then numpy, then Llama()": "import llama_cpp; import numpy; llama_cpp.Llama({path!r}, n_gpu_layers=-1, verbose=False)",
    "llama_cpp, Llama(), then scipy": "import llama_cpp; llama_cpp.Llama({path!r}, n_gpu_layers=-1, verbose=False); import scipy.stats",
}


def main() -> int:
    model = sorted(Path(sys.argv[1]).glob("target-*.gguf"))[0]
    for label, code in ORDERS.items():
        done = subprocess.run([sys.executable, "-c", code.format(path=str(model))], capture_output=True, check=False)
        print(f"{label}: exit status {done.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
