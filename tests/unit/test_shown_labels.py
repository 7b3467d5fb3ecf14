"""Chart labels: shortened, never ambiguous, and findable in the release.

A long label keeps its start and end; labels that share both (a survey's "category
number 017 of ...") are shown by where they differ; any still equal carry their position
in the domain, the order of the JSON release's counts.
"""

from __future__ import annotations

from shuffledp.plotting import MAX_LABEL_CHARS, shown_labels


def test_short_labels_are_kept_as_they_are():
    assert shown_labels(["Lyon", "Nice"]) == (["Lyon", "Nice"], False)


def test_labels_sharing_their_start_and_end_are_shown_by_their_difference():
    labels = [f"a rather long label for category number {i:03d} of the survey" for i in range(336)]
    shown, shortened = shown_labels(labels)
    assert shortened
    assert len(set(shown)) == len(shown)
    for i, text in enumerate(shown):
        assert f"{i:03d}" in text and len(text) <= MAX_LABEL_CHARS
    # The 0.2 plot's first shortening kept 'a rather long label for ca…of the survey' for all.
    assert not any(text.startswith("a rather long label for ca") for text in shown)


def test_labels_still_equal_carry_their_position_in_the_domain():
    # The first two differ only deep inside a part longer than a label may be.
    start, end = "p" * 30, "s" * 30
    middle = "m" * 40
    labels = [
        start + "1" + middle + "u" + middle + "a" + end,
        start + "1" + middle + "v" + middle + "a" + end,
        start + "2" + middle + "u" + middle + "b" + end,
    ]
    shown, _ = shown_labels(labels, positions=[7, 3, 12])
    assert len(set(shown)) == 3
    assert shown[0].endswith(" [7]") and shown[1].endswith(" [3]")
    assert not shown[2].endswith("]")
