"""A drawn figure checked by machine, with matplotlib's own extents after drawing.

:func:`check_figure` draws a :class:`~matplotlib.figure.Figure` on an Agg canvas (as ``savefig`` does for
the PNG; the build saves without ``bbox_inches``, so the figure's edge is the saved edge) and returns a
list of :class:`Finding`, one per defect a reader would see:

- ``overlap``: two visible texts (tick labels, axis labels, titles, legend texts, annotations) overlap;
- ``clipped``: a text, a legend or an axes reaches past the figure's edge (cut off in the saved file);
- ``degenerate-axes``: an axes narrower or shorter than :data:`MIN_AXES_FRACTION` of the figure;
- ``no-legend-entry``: a plotted series (line, collection, errorbar or bar container) whose label is in no
  legend, or whose distinguishing style (a colour, line style or marker that differs between the series
  of its axes) no legend entry explains;
- ``legend-covers``: a legend's box covers a data point or a text outside the legend;
- ``ambiguous-legend``: two entries of one legend with different labels look alike (colour, line style and
  dash pattern, marker and its fill, or a patch's fill, edge and hatch): a reader cannot tell which is which;
- ``emulated-unlabelled``: a text names an emulated medium (e.g. tmpfs standing in for PMEM) and no text
  of the figure says it is emulated;
- ``averages-interaction``: the figure averages over a factor whose interaction with the contrast it shows
  is significant (a rule on the figure's data, not its drawing: :func:`dbmatrix.publish.registry.
  design_findings`).

Pure: it reads the figure and returns values; the only change is the canvas it draws on, which is put
back. Reference lines drawn in axes coordinates (``axhline``/``axvline``/``axhspan``: "dashed: no effect")
are not series; the captions explain them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection, LineCollection, PathCollection
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer, Container, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

# The narrowest panel the figures mean to draw is one of four side by side across the text width (about a
# fifth of the figure once the shared y labels take their room) or one of four stacked in a column-width
# figure. Below an eighth of the figure a panel has room for two or three 7 pt tick labels at most: the
# "sliver" a reader cannot read values from.
MIN_AXES_FRACTION = 0.125
# Extents closer than this (pixels at the figure's dpi) count as touching, not overlapping: matplotlib's
# text boxes include the font's line gap, so neighbouring tick labels of a well-spaced axis may share a pixel.
TOLERANCE_PX = 1.0

# Neighbouring tick labels of one axis closer than this share of their font size read as one label: a word
# space is about a quarter of an em, so "1", "4" and "16" closer than that print as "1416".
MIN_TICK_GAP_EM = 0.25

KINDS = ("overlap", "clipped", "degenerate-axes", "no-legend-entry", "legend-covers", "ambiguous-legend",
         "emulated-unlabelled", "averages-interaction")


@dataclass(frozen=True)
class Finding:
    """One defect of a drawn figure: the figure's name, the rule (one of :data:`KINDS`), the artists
    involved (described so a reader can find them) and what was measured."""

    figure: str
    kind: str
    artists: tuple[str, ...]
    detail: str

    def __str__(self) -> str:
        return f"{self.figure}: {self.kind}: {' | '.join(self.artists)} ({self.detail})"


# ------------------------------------------------------------------------------------ drawing


def _draw(fig: Figure) -> RendererBase:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _describe(artist: object) -> str:
    if isinstance(artist, Text):
        role = getattr(artist, "_check_role", "text")
        ax = getattr(artist, "_check_axes", None)  # a tick label's axes (its own .axes may be unset)
        where = f" of axes {_axes_name(ax)}" if isinstance(ax, Axes) else ""
        return f"{role} {artist.get_text()!r}{where}"
    if isinstance(artist, Legend):
        return "legend [" + ", ".join(t.get_text() for t in artist.get_texts()) + "]"
    if isinstance(artist, Axes):
        return f"axes {_axes_name(artist)}"
    label = getattr(artist, "get_label", lambda: "")()
    return f"{type(artist).__name__} {label!r}"


def _axes_name(ax: Axes) -> str:
    bits = [b for b in (ax.get_title(loc="left") or ax.get_title(), ax.get_ylabel(), ax.get_xlabel()) if b]
    return repr(bits[0]) if bits else f"#{ax.figure.axes.index(ax)}" if ax.figure else "?"


def _role(t: Text, role: str) -> Text:
    """Tag a text with its role (tick label, title, ...) for the findings' descriptions."""
    setattr(t, "_check_role", role)  # noqa: B010  (a plain attribute on a matplotlib artist)
    return t


def _tick_labels(ax: Axes) -> list[Text]:
    """The tick labels matplotlib draws (ticks inside the view interval, label shown, text not empty)."""
    out = []
    for axis, name in ((ax.xaxis, "x tick label"), (ax.yaxis, "y tick label")):
        if not axis.get_visible():
            continue
        drawn: Any = axis._update_ticks()  # type: ignore[union-attr]  # the ticks drawn (public lists hold more)
        for tick in drawn:
            for lab in (tick.label1, tick.label2):
                if lab.get_visible() and lab.get_text().strip():
                    _role(lab, name)
                    setattr(lab, "_check_axes", ax)  # noqa: B010
                    out.append(lab)
    return out


def _texts(fig: Figure) -> list[Text]:
    """Every visible, non-empty text the figure draws, each with a role for the findings."""
    out: list[Text] = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out += _tick_labels(ax)
        a: Any = ax
        for t, role in ((ax.xaxis.label, "x label"), (ax.yaxis.label, "y label"),
                        (ax.title, "title"), (a._left_title, "title"), (a._right_title, "title"),
                        (ax.xaxis.offsetText, "x offset"), (ax.yaxis.offsetText, "y offset")):
            out.append(_role(t, role))
        out += [_role(t, "annotation") for t in ax.texts]
    out += [_role(t, "figure text") for t in fig.texts]
    for sup, role in (("_suptitle", "suptitle"), ("_supxlabel", "supxlabel"), ("_supylabel", "supylabel")):
        t = getattr(fig, sup, None)
        if isinstance(t, Text):
            out.append(_role(t, role))
    for leg in _legends(fig):
        out += [_role(t, "legend text") for t in [*leg.get_texts(), leg.get_title()]]
    seen: set[int] = set()
    uniq = []
    for t in out:
        if id(t) in seen or not t.get_visible() or not t.get_text().strip():
            continue
        seen.add(id(t))
        uniq.append(t)
    return uniq


def _legends(fig: Figure) -> list[Legend]:
    legs = [leg for leg in fig.legends if leg.get_visible()]
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None and leg.get_visible() and ax.get_visible():
            legs.append(leg)
    return legs


def _overlap(a: Bbox, b: Bbox, tol: float = TOLERANCE_PX) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tol)


# ------------------------------------------------------------------------------------ rules


def _text_overlaps(name: str, fig: Figure, texts: list[tuple[Text, Bbox]]) -> list[Finding]:
    out = []
    for i, (ta, ba) in enumerate(texts):
        for tb, bb in texts[i + 1:]:
            if _overlap(ba, bb):
                w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
                h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
                out.append(Finding(name, "overlap", (_describe(ta), _describe(tb)),
                                   f"{w:.0f}x{h:.0f} px in common"))
            elif (role := getattr(ta, "_check_role", "")).endswith("tick label") and ta.axes is tb.axes \
                    and getattr(tb, "_check_role", "") == role:
                along = 0 if role.startswith("x") else 1
                lo, hi = (ba, bb) if ba.get_points()[0][along] <= bb.get_points()[0][along] else (bb, ba)
                gap = hi.get_points()[0][along] - lo.get_points()[1][along]
                em = float(ta.get_fontsize()) * fig.dpi / 72
                across = min(ba.get_points()[1][1 - along], bb.get_points()[1][1 - along]) \
                    - max(ba.get_points()[0][1 - along], bb.get_points()[0][1 - along])
                if across > 0 and 0 <= gap < MIN_TICK_GAP_EM * em:
                    out.append(Finding(name, "overlap", (_describe(ta), _describe(tb)),
                                       f"{gap:.1f} px apart, less than {MIN_TICK_GAP_EM} em: they read as one"))
    return out


def _clipped(name: str, fig: Figure, renderer: RendererBase, texts: list[tuple[Text, Bbox]]) -> list[Finding]:
    edge = fig.bbox
    out = []

    def outside(b: Bbox) -> str:
        parts = [side for side, d in (("left", edge.x0 - b.x0), ("bottom", edge.y0 - b.y0),
                                      ("right", b.x1 - edge.x1), ("top", b.y1 - edge.y1)) if d > TOLERANCE_PX]
        return ", ".join(parts)

    for t, b in texts:
        if t.get_clip_on() and t.get_clip_box() is not None and t.get_clip_box() != fig.bbox:
            continue  # clipped to its axes on purpose (e.g. an annotation inside the plot)
        if side := outside(b):
            out.append(Finding(name, "clipped", (_describe(t),), f"past the figure's {side} edge"))
    for leg in _legends(fig):
        if side := outside(leg.get_window_extent(renderer)):
            out.append(Finding(name, "clipped", (_describe(leg),), f"past the figure's {side} edge"))
    for ax in fig.axes:
        if ax.get_visible() and (side := outside(ax.get_window_extent(renderer))):
            out.append(Finding(name, "clipped", (_describe(ax),), f"plot area past the figure's {side} edge"))
    return out


def _degenerate(name: str, fig: Figure, renderer: RendererBase) -> list[Finding]:
    out = []
    W, H = fig.bbox.width, fig.bbox.height
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        b = ax.get_window_extent(renderer)
        fw, fh = b.width / W, b.height / H
        if fw < MIN_AXES_FRACTION or fh < MIN_AXES_FRACTION:
            out.append(Finding(name, "degenerate-axes", (_describe(ax),),
                               f"{fw:.2f} of the figure's width x {fh:.2f} of its height; "
                               f"minimum {MIN_AXES_FRACTION}"))
    return out


@dataclass(frozen=True)
class _Series:
    artist: object
    ax: Axes
    label: str
    color: str | None
    linestyle: str | None
    marker: str | None
    points: np.ndarray  # display coordinates of its data points


def _line_style(line: Line2D | None) -> tuple[str | None, str | None, str | None]:
    if line is None:
        return None, None, None
    style = line.get_linestyle()
    ls = None if style in ("None", "none", "", " ") or line.get_linewidth() == 0 else str(style)
    marker = line.get_marker()
    mk = None if marker in ("None", "none", "", " ", None) else str(marker)
    return to_hex(line.get_color()), ls, mk


def _points(artist: object, ax: Axes) -> np.ndarray:
    if isinstance(artist, Line2D):
        x, y = np.asarray(artist.get_xdata(), dtype=float), np.asarray(artist.get_ydata(), dtype=float)
        xy = np.column_stack([x, y]) if x.size else np.empty((0, 2))
        return artist.get_transform().transform(xy) if len(xy) else xy
    if isinstance(artist, PathCollection):  # scatter points (a filled area or a bar has no points)
        off = np.asarray(artist.get_offsets(), dtype=float).reshape(-1, 2)
        return artist.get_offset_transform().transform(off) if len(off) else off
    return np.empty((0, 2))


def _is_reference(artist: object, ax: Axes) -> bool:
    """axhline/axvline/axhspan: drawn partly in axes coordinates, explained by the caption."""
    tr = getattr(artist, "get_transform", None)
    return tr is not None and tr() != ax.transData and isinstance(artist, Line2D)


def _series(fig: Figure) -> list[_Series]:
    out: list[_Series] = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        owned: set[int] = set()
        for c in ax.containers:
            owned |= {id(a) for a in _container_children(c)}
            label = str(c.get_label() or "")
            if isinstance(c, ErrorbarContainer):
                data_line = c.lines[0]
                color, ls, mk = _line_style(data_line)
                pts = _points(data_line, ax) if data_line is not None else np.empty((0, 2))
            elif isinstance(c, BarContainer):
                color = _first_color(c.patches[0].get_facecolor()) if c.patches else None
                ls, mk = None, None
                pts = np.array([ax.transData.transform((p.get_x() + p.get_width() / 2, p.get_y() + p.get_height()))
                                for p in c.patches]) if c.patches else np.empty((0, 2))
            else:
                continue
            out.append(_Series(c, ax, label, color, ls, mk, pts))
        for line in ax.lines:
            if id(line) in owned or not line.get_visible() or _is_reference(line, ax):
                continue
            if np.asarray(line.get_xdata()).size == 0:
                continue
            color, ls, mk = _line_style(line)
            out.append(_Series(line, ax, str(line.get_label() or ""), color, ls, mk, _points(line, ax)))
        for coll in ax.collections:
            if id(coll) in owned or not coll.get_visible() or isinstance(coll, LineCollection):
                continue
            pts = _points(coll, ax)
            if not len(pts) and not str(coll.get_label() or "").strip("_"):
                continue
            color = _first_color(coll.get_facecolor())
            out.append(_Series(coll, ax, str(coll.get_label() or ""), color, None, None, pts))
    return out


def _container_children(c: Container) -> list[object]:
    kids: list[object] = []
    for part in c:
        if isinstance(part, (list, tuple)):
            kids += list(part)
        elif part is not None:
            kids.append(part)
    return kids


def _first_color(value: object) -> str | None:
    """The first colour of a facecolor value (one RGBA, or an array of them; None when empty)."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 2:
        arr = arr[0] if len(arr) else np.empty(0)
    return to_hex((float(arr[0]), float(arr[1]), float(arr[2]))) if arr.size in (3, 4) else None


def _legend_styles(fig: Figure, series: list[_Series]) -> tuple[set[str], set[str | None], set[str | None],
                                                                set[str | None]]:
    """Labels, colours, line styles and markers of every legend entry of the figure: a labelled series'
    own style when its label is in a legend (an errorbar entry's handle is its bar, not its marker), a
    proxy handle's (``Line2D([], [], ...)``, a patch) otherwise."""
    labels: set[str] = set()
    colors: set[str | None] = set()
    styles: set[str | None] = set()
    markers: set[str | None] = set()
    for leg in _legends(fig):
        labels |= {t.get_text() for t in leg.get_texts()}
        for h in leg.legend_handles:
            if isinstance(h, Line2D):
                c, ls, mk = _line_style(h)
            elif isinstance(h, Collection):
                c, ls, mk = _first_color(h.get_facecolor()) or _first_color(h.get_edgecolor()), None, None
            elif h is not None and hasattr(h, "get_facecolor"):
                c, ls, mk = _first_color(getattr(h, "get_facecolor")()), None, None  # noqa: B009
            else:
                continue
            colors.add(c)
            styles.add(ls)
            markers.add(mk)
    for s in series:
        if s.label in labels:
            colors.add(s.color)
            styles.add(s.linestyle)
            markers.add(s.marker)
    return labels, colors, styles, markers


def _unlabelled(name: str, fig: Figure) -> list[Finding]:
    series = _series(fig)
    labels, colors, styles, markers = _legend_styles(fig, series)
    out = []
    for s in series:
        if s.label and not s.label.startswith("_"):
            if s.label not in labels:
                out.append(Finding(name, "no-legend-entry", (_describe(s.artist), f"in axes {_axes_name(s.ax)}"),
                                   "its label is in no legend"))
            continue
        peers = [p for p in series if p.ax is s.ax]
        missing = []
        for attr, known in (("color", colors), ("linestyle", styles), ("marker", markers)):
            value = getattr(s, attr)
            values = {getattr(p, attr) for p in peers if getattr(p, attr) is not None}
            if value is None or len(values) < 2:
                continue  # the same for every series of the axes: it tells nothing apart
            if value not in known:
                missing.append(f"{attr} {value}")
        if missing:
            out.append(Finding(name, "no-legend-entry", (_describe(s.artist), f"in axes {_axes_name(s.ax)}"),
                               "a distinguishing " + ", ".join(missing) + " no legend entry explains"))
    return out


def _legend_covers(name: str, fig: Figure, renderer: RendererBase,
                   texts: list[tuple[Text, Bbox]]) -> list[Finding]:
    out = []
    series = _series(fig)
    for leg in _legends(fig):
        box = leg.get_window_extent(renderer)
        own = {id(t) for t in [*leg.get_texts(), leg.get_title()]}
        for t, b in texts:
            if id(t) not in own and _overlap(box, b):
                out.append(Finding(name, "legend-covers", (_describe(leg), _describe(t)), "box over the text"))
        for s in series:
            p = s.points
            if not len(p):
                continue
            inside = ((p[:, 0] > box.x0 + TOLERANCE_PX) & (p[:, 0] < box.x1 - TOLERANCE_PX)
                      & (p[:, 1] > box.y0 + TOLERANCE_PX) & (p[:, 1] < box.y1 - TOLERANCE_PX))
            if inside.any():
                out.append(Finding(name, "legend-covers", (_describe(leg), _describe(s.artist)),
                                   f"{int(inside.sum())} data point(s) under the box"))
    return out


def _look(h: object) -> tuple[object, ...] | None:
    """What a reader sees of a legend handle (None: nothing drawn, e.g. a text-only entry)."""
    if isinstance(h, Line2D):
        color, ls, mk = _line_style(h)
        if ls is None and mk is None:
            return None
        dashes = getattr(h, "_dash_pattern", None) if ls is not None else None
        face = h.get_markerfacecolor()
        fill = to_hex(face, keep_alpha=True) if mk is not None and str(face).lower() != "none" else None
        return ("line", color, ls, str(dashes), mk, fill)
    if isinstance(h, Collection):
        return ("collection", _first_color(h.get_facecolor()), _first_color(h.get_edgecolor()))
    if h is not None and hasattr(h, "get_facecolor"):
        hatch = getattr(h, "get_hatch", lambda: None)()
        return ("patch", _first_color(getattr(h, "get_facecolor")()),  # noqa: B009
                _first_color(getattr(h, "get_edgecolor", lambda: ())()), hatch)
    return None


def _ambiguous(name: str, fig: Figure) -> list[Finding]:
    # an errorbar entry's legend handle is its bar: its look is its data line's (marker, fill)
    markers = {s.label: s.artist.lines[0] for s in _series(fig) if isinstance(s.artist, ErrorbarContainer)}
    out = []
    for leg in _legends(fig):
        seen: dict[tuple[object, ...], str] = {}
        for h, t in zip(leg.legend_handles, leg.get_texts(), strict=False):
            look = _look(markers.get(t.get_text(), h))
            if look is None:
                continue
            label = t.get_text()
            if look in seen and seen[look] != label:
                out.append(Finding(name, "ambiguous-legend", (_describe(leg),),
                                   f"{seen[look]!r} and {label!r} look alike"))
            seen.setdefault(look, label)
    return out


def _emulated(name: str, texts: list[tuple[Text, Bbox]], emulated: Iterable[str]) -> list[Finding]:
    words = [t.get_text() for t, _ in texts]
    out = []
    for medium in sorted(set(emulated)):
        pat = re.compile(rf"(?<![\w-]){re.escape(medium)}(?![\w-])", re.IGNORECASE)
        naming = [t for t, _ in texts if pat.search(t.get_text())]
        if not naming:
            continue
        if not any(pat.search(w) and "emulated" in w.lower() for w in words):
            out.append(Finding(name, "emulated-unlabelled", tuple(_describe(t) for t in naming[:3]),
                               f"{medium} is emulated and no text of the figure says so"))
    return out


# ------------------------------------------------------------------------------------ the check


def check_figure(fig: Figure, name: str, *, emulated: Iterable[str] | Mapping[str, str] = ()) -> list[Finding]:
    """Every finding of the rules on the drawn figure `fig` (called `name` in the findings). `emulated`:
    the media drawn that are emulated (names as the figure prints them, e.g. ``tmpfs``)."""
    old = fig.canvas
    try:
        renderer = _draw(fig)
        texts = [(t, t.get_window_extent(renderer)) for t in _texts(fig)]
        findings = (_text_overlaps(name, fig, texts) + _clipped(name, fig, renderer, texts)
                    + _degenerate(name, fig, renderer) + _unlabelled(name, fig)
                    + _legend_covers(name, fig, renderer, texts) + _ambiguous(name, fig)
                    + _emulated(name, texts, emulated))
    finally:
        fig.set_canvas(old)
    return findings


def format_findings(findings: Iterable[Finding]) -> str:
    lines = [str(f) for f in findings]
    return "\n".join(lines) if lines else "0 findings"
