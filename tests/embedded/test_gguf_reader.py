"""The array-backed GGUF reader reads what ``gguf.GGUFReader`` reads, from a plain read-only array."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gguf", reason="GGUF files are read with the gguf package")

from gguf import GGUFReader

from pytest_specdec.embedded import gguf_writer, models
from pytest_specdec.embedded.gguf_reader import open_gguf


def test_fields_and_tensors_are_the_stock_readers() -> None:
    path = gguf_writer.materialize_gguf(models.DEFAULT_TARGET)
    ours, stock = open_gguf(path), GGUFReader(path)
    assert type(ours.data) is np.ndarray, "the file is seen as a base array, not np.memmap"
    assert not ours.data.flags.writeable
    assert list(ours.fields) == list(stock.fields)
    for name, field in stock.fields.items():
        mine = ours.fields[name]
        assert (mine.offset, mine.types, mine.data) == (field.offset, field.types, field.data), name
        assert all(np.array_equal(a, b) for a, b in zip(mine.parts, field.parts, strict=True)), name
    assert [t.name for t in ours.tensors] == [t.name for t in stock.tensors]
    assert all(np.array_equal(a.data, b.data) for a, b in zip(ours.tensors, stock.tensors, strict=True))
    assert len(ours.fields["tokenizer.ggml.tokens"].data) == models.build_tokenizer().get_vocab_size()
