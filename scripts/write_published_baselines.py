"""Write the document's figures as published baselines: ``python scripts/write_published_baselines.py``."""

from __future__ import annotations

from pathlib import Path

from pytest_specdec.seed.published import published_files
from pytest_specdec.store.files import dumps, write_atomically

ROOT = Path(__file__).resolve().parents[1] / "baselines"

for stored in published_files():
    path = ROOT / stored.machine_class / f"{stored.backend}.json"
    write_atomically(path, dumps(stored))
    print(f"wrote {path} ({len(stored.entries)} entries)")
