"""The synthetic models: deterministic, truncation-aligned, loadable layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_specdec.embedded import models


def test_building_twice_gives_identical_files(tmp_path: Path) -> None:
    first = models.materialize("embedded:draft-aligned", tmp_path / "a")
    second = models.materialize("embedded:draft-aligned", tmp_path / "b")
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_aligned_draft_is_the_targets_first_layer() -> None:
    target = models.layer_weights(models.EMBEDDED_MODELS["target"], 64)
    draft = models.layer_weights(models.EMBEDDED_MODELS["draft-aligned"], 64)
    unrelated = models.layer_weights(models.EMBEDDED_MODELS["draft-unrelated"], 64)
    for name, tensor in draft.items():
        np.testing.assert_array_equal(tensor, target[name])
    assert not np.array_equal(
        unrelated["model.layers.0.mlp.up_proj.weight"], draft["model.layers.0.mlp.up_proj.weight"]
    )
    assert len([n for n in target if n.endswith("q_proj.weight")]) == models.EMBEDDED_MODELS["target"].num_layers


def test_eos_is_unreachable_and_config_matches(tmp_path: Path) -> None:
    path = models.materialize("embedded:target", tmp_path)
    config = json.loads((path / "config.json").read_text())
    assert config["eos_token_id"] == models.EOS_TOKEN_ID
    weights = models.layer_weights(models.EMBEDDED_MODELS["target"], config["vocab_size"])
    assert not weights["lm_head.weight"][models.EOS_TOKEN_ID].any()


def test_unknown_embedded_name_lists_the_known_ones() -> None:
    with pytest.raises(models.UnknownEmbeddedModel, match="known: embedded:target"):
        models.embedded_spec("embedded:huge")
