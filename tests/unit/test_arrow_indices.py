"""Arrow dictionary indices read from their buffers agree with pyarrow's own conversion."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

from shuffledp.data.encoding import _arrow_indices  # noqa: E402


@pytest.mark.parametrize("with_nulls", [True, False])
def test_indices_with_nulls_and_offsets_match_fill_null(with_nulls: bool) -> None:
    rng = np.random.default_rng(5)
    labels = rng.choice(["x", "y", "z", "w"], size=203).tolist()
    if with_nulls:
        for i in rng.choice(203, size=40, replace=False):
            labels[i] = None
    encoded = pc.dictionary_encode(pa.array(labels))
    for start in (0, 1, 7, 8, 9, 64, 150, 203):
        for length in (0, 1, 13, 203):
            part = encoded.indices.slice(start, length)  # offsets not on a byte of the bitmap
            expected = pc.fill_null(part, -1).to_numpy(zero_copy_only=False).astype(np.int64)
            got = _arrow_indices(pa, part)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, expected)
