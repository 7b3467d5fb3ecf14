"""Every figure the package writes during the tests is rendered and measured for readability.

:func:`install` (called by ``tests/conftest.py``) wraps
``shuffledp._files.save_figure``, through which every figure of the package
is written (``shuffledp.plotting.save_readable``): after the file is written
the figure is drawn again with the Agg renderer and :func:`readability_problems`
measures it. A problem fails the test that drew the figure; :data:`CHECKED`
records every figure measured, so a test can assert that its figures were.

Readable means, at the figure's default size:

* every title (the suptitle, every axes title) lies inside the figure, and no
  two titles overlap;
* every legend lies inside the figure and covers no data: its box overlaps
  none of the bars, lines, markers, bands, error bars or annotations of any
  axes (each taken where it is drawn, clipped to its axes), nor a title;
* every tick label lies inside the figure, and no two horizontal tick labels
  of one axis overlap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: (path, problems) of every figure measured, in order.
CHECKED: list[tuple[Path, list[str]]] = []

#: Overlaps smaller than this (pixels²) are a shared edge, not a cover.
_TOUCH = 2.0


def _inside(box: Any, outer: Any, tolerance: float = 1.0) -> bool:
    return bool(
        box.x0 >= outer.x0 - tolerance
        and box.y0 >= outer.y0 - tolerance
        and box.x1 <= outer.x1 + tolerance
        and box.y1 <= outer.y1 + tolerance
    )


def _overlap(a: Any, b: Any) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(0.0, width) * max(0.0, height)


def _titles(fig: Any) -> list[tuple[str, Any]]:
    out = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        out.append(("suptitle", suptitle))
    for i, ax in enumerate(fig.axes):
        for text in (ax.title, ax._left_title, ax._right_title):
            if text.get_text():
                out.append((f"title of axes {i}", text))
    return out


def _data_boxes(ax: Any, renderer: Any) -> list[tuple[str, Any]]:
    """Where each data artist of ``ax`` is drawn (clipped to the axes when it is clipped)."""
    from matplotlib.transforms import Bbox

    artists = [*ax.patches, *ax.lines, *ax.collections, *ax.texts]
    out = []
    for artist in artists:
        if not artist.get_visible() or artist is ax.patch:
            continue
        try:
            box = artist.get_window_extent(renderer)
        except Exception:  # an artist that cannot say where it is drawn is not data here
            continue
        if box is None or not (box.width > 0 or box.height > 0):
            continue
        if artist.get_clip_on():
            clipped = Bbox.intersection(box, ax.bbox)
            if clipped is None:
                continue
            box = clipped
        label = artist.get_label() if hasattr(artist, "get_label") else ""
        out.append((f"{type(artist).__name__} {label!r}".strip(), box))
    return out


def readability_problems(fig: Any) -> list[str]:
    """Draw ``fig`` (Agg) and return what makes it unreadable (empty: readable)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    problems = []
    titles = _titles(fig)
    for name, text in titles:
        box = text.get_window_extent(renderer)
        if not _inside(box, frame):
            problems.append(
                f"{name} {text.get_text()!r} is clipped: {box.bounds} outside {frame.bounds}"
            )
    for i, (name_a, a) in enumerate(titles):
        for name_b, b in titles[i + 1 :]:
            if _overlap(a.get_window_extent(renderer), b.get_window_extent(renderer)) > _TOUCH:
                problems.append(f"{name_a} and {name_b} overlap")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    legends += list(fig.legends)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if not _inside(box, frame):
            problems.append(f"a legend is clipped: {box.bounds} outside {frame.bounds}")
        for i, ax in enumerate(fig.axes):
            for what, data in _data_boxes(ax, renderer):
                if _overlap(box, data) > _TOUCH:
                    problems.append(f"a legend covers {what} of axes {i}")
        for name, text in titles:
            if _overlap(box, text.get_window_extent(renderer)) > _TOUCH:
                problems.append(f"a legend covers the {name}")
    for i, ax in enumerate(fig.axes):
        for axis_name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = [
                t
                for t in (*axis.get_ticklabels(), *axis.get_ticklabels(minor=True))
                if t.get_visible() and t.get_text() and t.get_rotation() == 0
            ]
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
            drawn = axis._update_ticks()  # the ticks inside the view, which are drawn
            shown = [
                label
                for tick in drawn
                for label in (tick.label1, tick.label2)
                if label.get_visible() and label.get_text()
            ]
            for t in shown:
                if not _inside(t.get_window_extent(renderer), frame):
                    problems.append(
                        f"{axis_name} tick label {t.get_text()!r} of axes {i} is clipped"
                    )
            for j, (text_a, a) in enumerate(boxes):
                for text_b, b in boxes[j + 1 :]:
                    if _overlap(a, b) > _TOUCH:
                        problems.append(
                            f"{axis_name} tick labels {text_a!r} and {text_b!r} of axes {i} overlap"
                        )
    return problems


def install() -> None:
    """Measure every figure ``shuffledp._files.save_figure`` writes; fail on a problem."""
    from shuffledp import _files

    original = _files.save_figure
    if getattr(original, "_checked", False):
        return

    def save_and_check(figure: Any, path: str | Path, **options: Any) -> Path:
        written = original(figure, path, **options)
        problems = readability_problems(figure)
        CHECKED.append((Path(path), problems))
        if problems:
            raise AssertionError(f"{Path(path).name} is not readable: " + "; ".join(problems))
        return written

    save_and_check._checked = True  # type: ignore[attr-defined]
    _files.save_figure = save_and_check  # type: ignore[assignment]


def checked(path: Path) -> bool:
    """Whether the figure at ``path`` was measured (and found readable) in this session."""
    return any(p.resolve() == Path(path).resolve() and not problems for p, problems in CHECKED)
