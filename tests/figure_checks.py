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
* every tick label lies inside the figure, and no two tick labels of one axis
  overlap, horizontal or rotated (a rotated label is a rotated rectangle: two
  overlap when no axis separates them);
* every bar on an axis of named categories (tick labels given as text) has
  its name: a labelled tick at its centre, on its axis or on one shared with
  it (a chart that labels every fourth bar of 87 names 22 of them);
* no series hides under another: no bar or marker series lies entirely
  under the opaque bars of another series drawn above it.
"""

from __future__ import annotations

import math
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


def _corners(text: Any, renderer: Any) -> list[tuple[float, float]]:
    """The rotated rectangle ``text`` covers, in pixels: its four corners.

    A rotated text is drawn as its unrotated box turned about its centre, and
    ``get_window_extent`` is the axis-aligned box around that: same centre.
    """
    box = text.get_window_extent(renderer)
    angle = math.radians(text.get_rotation())
    rotation = text.get_rotation()
    text.set_rotation(0)
    try:
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(rotation)
    cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    c, s = math.cos(angle), math.sin(angle)
    half_w, half_h = flat.width / 2, flat.height / 2
    return [
        (cx + c * dx - s * dy, cy + s * dx + c * dy)
        for dx, dy in ((-half_w, -half_h), (half_w, -half_h), (half_w, half_h), (-half_w, half_h))
    ]


def _quads_overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    """Whether two convex quadrilaterals overlap by more than a pixel (separating axes)."""
    for quad in (a, b):
        for (x0, y0), (x1, y1) in zip(quad, quad[1:] + quad[:1], strict=True):
            length = math.hypot(x1 - x0, y1 - y0)
            if length == 0:
                continue
            nx, ny = (y0 - y1) / length, (x1 - x0) / length
            pa = [nx * x + ny * y for x, y in a]
            pb = [nx * x + ny * y for x, y in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= 1.0:
                return False  # this axis separates them (up to a pixel)
    return True


def _labelled_ticks(ax: Any, which: str) -> list[float]:
    """Where ``ax`` and the axes sharing its ``which`` axis show a tick label (data units)."""
    shared = ax.get_shared_y_axes() if which == "y" else ax.get_shared_x_axes()
    out = []
    for sibling in shared.get_siblings(ax):
        axis = sibling.yaxis if which == "y" else sibling.xaxis
        for tick in axis._update_ticks():
            if any(lab.get_visible() and lab.get_text() for lab in (tick.label1, tick.label2)):
                out.append(float(tick.get_loc()))
    return out


def _named_categories(axis: Any) -> bool:
    """Whether ``axis`` names categories: ticks placed by hand, some labelled with words."""
    from matplotlib.ticker import FixedLocator

    if not isinstance(axis.get_major_locator(), FixedLocator):
        return False
    for tick in axis._update_ticks():
        text = tick.label1.get_text().replace("\N{MINUS SIGN}", "-").replace(",", "")
        try:
            float(text)
        except ValueError:
            if text:
                return True
    return False


def _unlabelled_bars(ax: Any) -> dict[str, int]:
    """Bars on an axis of named categories without a labelled tick at their centre."""
    from matplotlib.container import BarContainer

    missing: dict[str, int] = {}
    for container in ax.containers:
        if not isinstance(container, BarContainer) or not container.patches:
            continue
        which = "y" if container.orientation == "horizontal" else "x"
        if not _named_categories(ax.yaxis if which == "y" else ax.xaxis):
            continue  # a numeric axis (a histogram's): its bars need no names
        ticks = _labelled_ticks(ax, which)
        for bar in container.patches:
            if which == "y":
                centre, half = bar.get_y() + bar.get_height() / 2, abs(bar.get_height()) / 2
            else:
                centre, half = bar.get_x() + bar.get_width() / 2, abs(bar.get_width()) / 2
            if not any(abs(centre - t) <= half * (1 + 1e-6) for t in ticks):  # edges count
                missing[which] = missing.get(which, 0) + 1
    return missing


def _series(ax: Any, renderer: Any) -> list[tuple[str, float, bool, list[Any]]]:
    """Each bar or marker series of ``ax``: name, drawing order, opaque, its elements' boxes."""
    from matplotlib.container import BarContainer
    from matplotlib.lines import Line2D
    from matplotlib.transforms import Bbox

    order = {id(artist): i for i, artist in enumerate(ax.get_children())}
    out = []
    for container in ax.containers:
        if isinstance(container, BarContainer) and container.patches:
            first = container.patches[0]
            opaque = (first.get_alpha() is None or first.get_alpha() >= 0.99) and (
                first.get_facecolor()[3] >= 0.99
            )
            boxes = [bar.get_window_extent(renderer) for bar in container.patches]
            rank = first.get_zorder() * 1e6 + order.get(id(first), 0)
            out.append((f"bars {container.get_label()!r}", rank, opaque, boxes))
    for line in ax.lines:
        if not isinstance(line, Line2D) or line.get_marker() in (None, "None", "", " "):
            continue
        if line.get_linestyle() not in ("None", "", " "):
            continue  # a line through its markers shows where it goes
        points = line.get_transform().transform(line.get_xydata())
        boxes = [Bbox.from_bounds(x, y, 0, 0) for x, y in points]
        rank = line.get_zorder() * 1e6 + order.get(id(line), 0)
        out.append((f"markers {line.get_label()!r}", rank, False, boxes))
    return out


def _hidden_series(ax: Any, renderer: Any) -> list[str]:
    """The series of ``ax`` drawn entirely under the opaque bars of another."""

    def inside(box: Any, cover: Any) -> bool:
        return _inside(box, cover, tolerance=0.5)

    series = _series(ax, renderer)
    hidden = []
    for name, rank, _, boxes in series:
        for other, other_rank, opaque, covers in series:
            if other == name or not opaque or other_rank <= rank:
                continue
            if boxes and all(any(inside(b, c) for c in covers) for b in boxes):
                hidden.append(f"{name} hidden under {other}")
    return hidden


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
            along = 0 if axis_name == "x" else 1  # labels in their order along the axis
            turned = sorted(
                ((t.get_text(), _corners(t, renderer)) for t in shown if t.get_rotation() != 0),
                key=lambda item: sum(corner[along] for corner in item[1]),
            )
            for j, (text_a, a) in enumerate(turned):
                for text_b, b in turned[j + 1 : j + 4]:  # the near neighbours, which can touch
                    if _quads_overlap(a, b):
                        problems.append(
                            f"rotated {axis_name} tick labels {text_a!r} and {text_b!r} "
                            f"of axes {i} overlap"
                        )
        for axis_name, count in _unlabelled_bars(ax).items():
            problems.append(f"{count} bars of axes {i} have no label on the {axis_name} axis")
        problems += [f"{what} in axes {i}" for what in _hidden_series(ax, renderer)]
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
