"""A model is keyed by its name and digest, not the path it was loaded from: the same GGUF elsewhere on a CI runner
finds its baseline, and the files and history lines written with paths are read with the keys their results have now."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pytest_specdec.store.baselines import BaselineStore, baseline_key, read_baseline_file
from pytest_specdec.store.nights import read_nights
from pytest_specdec.store.records import ComparisonRecord

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "baselines" / "NVIDIA-H200" / "llama-cpp.json"


def test_the_shipped_baselines_written_with_a_tmp_path_are_found_from_another_folder(tmp_path: Path) -> None:
    stored = json.loads(SHIPPED.read_text(encoding="utf-8"))["entries"]
    (old_key,) = [k for k in stored if "/tmp/gemma/gemma-3-270m-q4_k_m.gguf" in k and "[code]" in k]
    copy = tmp_path / "baselines" / "NVIDIA-H200"
    copy.mkdir(parents=True)
    shutil.copy(SHIPPED, copy / "llama-cpp.json")
    loaded = read_baseline_file(copy / "llama-cpp.json", "NVIDIA-H200", "llama-cpp")
    entry = loaded.entries[old_key.replace("/tmp/gemma/", "")]
    elsewhere = replace(entry.result, target="/home/runner/models/gemma-3-270m-q4_k_m.gguf")
    assert BaselineStore(tmp_path / "baselines", "NVIDIA-H200").lookup(elsewhere) == entry
    assert (copy / "llama-cpp.json").read_bytes() == SHIPPED.read_bytes(), "reading rewrites nothing"


def test_another_file_of_the_same_name_is_told_apart_by_its_digest(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    record = replace(make_record("code", 1.5, "holds", None), target="/a/model.gguf", draft=None)
    assert baseline_key(replace(record, target="/b/model.gguf")) == baseline_key(record)
    assert baseline_key(replace(record, model_digest="ffff")) != baseline_key(record)


def test_history_lines_written_with_paths_read_with_the_keys_of_now(tmp_path: Path) -> None:
    line = {"time": "2026-12-01T02:00:00+00:00", "backend": "llama-cpp", "release": "llama-cpp-python 0.3.16",
            "key": "t.py::t [code, γ=3, /tmp/gemma/g.gguf @d339]", "speedup": {"estimate": 1.0, "low": 0.9,
            "high": 1.1, "confidence": 0.98, "n": 8}, "machine_class": "M", "nodeid": "t.py::t", "category": "code",
            "verdict": "holds"}  # fmt: skip
    (tmp_path / "M.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    (night,) = read_nights(tmp_path / "M.jsonl")
    assert night.key == "t.py::t [code, γ=3, g.gguf @d339]"


def test_the_nearest_accepted_key_names_what_changed_and_not_a_folder_the_model_moved_from(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    from pytest_specdec.store.baselines import BaselineEntry
    from pytest_specdec.store.records import Provenance

    old = replace(make_record("code", 1.5, "holds", None), target="/a/model.gguf", draft=None)
    store = BaselineStore(tmp_path, "M")
    store.write("mlx", {baseline_key(old): BaselineEntry(old, Provenance.MEASURED, "2026-12-01")})
    moved = replace(old, target="/b/model.gguf", conditions=old.conditions.with_(num_draft=4))
    assert store.nearest(moved) == (baseline_key(old), "γ=3 → γ=4")
    assert store.nearest(old) is None, "its own key is no other key"
