"""Integer values are labels (matched to integer labels); a numpy integer array given to a
protocol is bin indices, and the error says so."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shuffledp import FlipProtocol
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data import encoding
from shuffledp.data.encoding import encode_values


@pytest.fixture(params=["pyarrow", "numpy"])
def arrow(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(encoding, "_pyarrow", lambda: None)
    return request.param


@pytest.mark.parametrize("domain", [["1", "2", "10"], [1, 2, 10], [np.int64(1), 2, 10]])
def test_integer_values_match_integer_labels(domain, arrow):
    for values in (
        pd.Series([10, 1, 2, 10]),
        pd.Series([10, 1, 2, 10], dtype="Int64"),
        pd.Series([10, 1, 2, 10], dtype="category"),
        np.array([10, 1, 2, 10], dtype=np.uint16),
        [10, 1, 2, 10],
    ):
        got = encode_values(values, domain)
        assert got.indices.tolist() == [2, 0, 1, 2], type(values)
        assert got.domain == ["1", "2", "10"]


def test_arrow_integers_and_negative_labels():
    domain = ["-1", "0", "1"]
    assert encode_values(pa.array([1, -1, 0]), domain).indices.tolist() == [2, 0, 1]
    chunked = pa.chunked_array([[0], [1, 1]], type=pa.int8())
    assert encode_values(chunked, domain).indices.tolist() == [1, 2, 2]
    inferred = encode_values(pd.Series([10, 2, 2]), infer_domain=True)
    assert inferred.domain == ["2", "10"] and inferred.indices.tolist() == [1, 0, 0]


def test_what_integers_cannot_match_is_said(arrow):
    with pytest.raises(InvalidParameterError, match=r"holds integers.*has none \('a', 'b'"):
        encode_values(pd.Series([1, 2]), ["a", "b"])
    # "01" is another label than 1 (labels are matched exactly)
    with pytest.raises(DataError, match="value '1' in the input"):
        encode_values(pd.Series([1, 2]), ["01", "2"])
    with pytest.raises(DataError, match="missing"):
        encode_values(pd.Series([1, None], dtype="Int64"), ["1", "2"])
    with pytest.raises(InvalidParameterError, match=r"text labels \(str\) or integers, got"):
        encode_values(np.array(["1", 1.5], dtype=object), ["1", "2"])


def test_float_columns_get_the_int64_hint():
    with pytest.raises(InvalidParameterError, match=r"\.astype\('Int64'\)"):
        encode_values(pd.Series([1, np.nan]), ["1", "2"])
    with pytest.raises(InvalidParameterError, match=r"\.astype\('Int64'\)"):
        encode_values(np.array([1.0, 2.0]), ["1", "2"])


def test_protocol_takes_integer_labels_and_integer_indices():
    protocol = FlipProtocol.calibrated(4000, [1, 2, 3], 1.0, 1e-6)
    assert protocol.labels == ("1", "2", "3")
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 3, size=4000)
    labels = pd.Series(indices + 1)  # the labels 1, 2, 3 of those bins
    by_labels = protocol.run(labels, path="count", seed=4)
    # Bin indices go to a protocol built on the domain's size (no labels to confuse them with).
    plain = FlipProtocol.calibrated(4000, 3, 1.0, 1e-6)
    by_indices = plain.run(indices, path="count", seed=4)
    assert np.array_equal(by_labels.statistic, by_indices.statistic)
    assert list(by_labels.estimate.domain) == ["1", "2", "3"]
    # The same integers as a numpy array could be labels or positions: refused, not guessed.
    with pytest.raises(DataError, match=r"ambiguous: an integer array holds bin indices"):
        protocol.run(labels.to_numpy(), path="count")
    with pytest.raises(DataError, match=r"ambiguous"):
        protocol.run(indices, path="count")
    # Labels no integer value matches ("01", "+2", " 3"): an integer array can only be indices.
    padded = FlipProtocol.calibrated(4000, ["01", "+2", " 3"], 1.0, 1e-6)
    by_padded = padded.run(indices, path="count", seed=4)
    assert np.array_equal(by_padded.statistic, by_indices.statistic)
    # Out of range on a size-only protocol: the error says what an integer array means.
    with pytest.raises(DataError, match=r"holds bin indices, positions 0 to 2 of the domain"):
        plain.run(labels.to_numpy(), path="count")
