"""Where each mark of a report chart goes: data in, coordinates out (the templates draw the SVG).

Three chart shapes serve the reports' four charts:

- :func:`forest` — rows of a point with a whisker (an interval) in one or more panels side by side:
  the comparison's metric deltas with their 95% CIs (one panel, symmetric about a zero line) and
  the ranking's means with their CIs (a panel per metric, a note — the letters — right of each
  whisker);
- :func:`bars` — one vertical bar per labelled count with its value above (per-query verdicts);
- :func:`heatmap` — a grid of values coloured on a diverging red–yellow–green scale (per-category
  deltas), each value written in its cell, and a colour key.

Every function is pure: plain numbers and strings in, a dict of plain values out — coordinates in
SVG user units (CSS px; the SVG's ``viewBox`` is ``0 0 width height``; a text's y is its middle,
drawn with ``dominant-baseline: central``), rounded to 0.01 so the
same input gives the same bytes, colours as ``#rrggbb``, texts as given (the templates escape
them). Axis ticks are "nice" numbers (1, 2, 2.5 or 5 × 10ᵏ) with their labels, so a reader — or a
test — re-derives every value from a mark's position and two ticks. NaN means "no value": no
point, no whisker side, a "–" cell.

Label widths are estimated from the characters (a wide East Asian character counts as 1 em, Latin
as about 0.6 em): the browser lays the text out in its own fonts — Hangul included — so the
margins leave room for a typical sans-serif rather than measure one font.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CHART_WIDTH",
    "FONT_SIZE",
    "Interval",
    "Panel",
    "bars",
    "diverging_colour",
    "forest",
    "heatmap",
    "nice_ticks",
    "number",
    "text_width",
]

#: Every chart's width: their text sizes match on the page (the SVG scales down on narrow screens).
CHART_WIDTH = 806.0
#: Font size of labels and ticks (px); the CSS sets the same.
FONT_SIZE = 12.0
_ROW = 26.0  # forest row height
_PAD = 10.0
# ColorBrewer RdYlGn (11 classes), the diverging scale matplotlib's "RdYlGn" interpolates.
_RDYLGN = (
    "#a50026", "#d73027", "#f46d43", "#fdae61", "#fee08b", "#ffffbf",
    "#d9ef8b", "#a6d96a", "#66bd63", "#1a9850", "#006837",
)  # fmt: skip
_NO_VALUE_FILL = "#f6f8fa"


def _r(x: float) -> float:
    return round(float(x), 2)


def number(value: float, digits: int, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals, a true minus sign (−), ``+`` when ``signed``; never "−0"."""
    if round(value, digits) == 0:
        value = 0.0
    text = f"{value:+.{digits}f}" if signed and value != 0 else f"{value:.{digits}f}"
    return text.replace("-", "−")


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """Estimated width (px) of ``text`` at ``size`` in a sans-serif font: 1 em per wide or fullwidth
    character (Hangul, CJK), ~⅓ em for narrow Latin glyphs and spaces, ~0.6 em for the rest
    (generous: a label too wide for its margin would be cut at the chart's edge)."""
    em = 0.0
    for ch in text:
        if unicodedata.east_asian_width(ch) in "WF":
            em += 1.0
        elif ch in " .,:;|!'()[]ijlrtf":
            em += 0.34
        elif ch.isupper() or ch in "mw@%&*_—":
            em += 0.8
        else:
            em += 0.62
    return em * size


def nice_ticks(low: float, high: float, target: int = 6, integer: bool = False) -> tuple[list[float], int]:
    """Ticks covering ``[low, high]`` inside it, about ``target`` of them, at a step of 1, 2, 2.5 or
    5 × 10ᵏ (a whole number ≥ 1 when ``integer``), and the decimals their labels need. ``low ==
    high`` gives that one tick."""
    if not high > low:
        return [low], 0 if integer or low == 0 else max(0, 2 - math.floor(math.log10(abs(low))))
    raw = (high - low) / max(target - 1, 1)
    exponent = math.floor(math.log10(raw))
    if integer and raw < 1:
        exponent = 0
    multipliers = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    multiplier = next(m for m in multipliers if m * 10.0**exponent >= raw * 0.999)
    step = multiplier * 10.0**exponent
    ticks = []
    i = math.ceil(low / step - 1e-9)
    while i * step <= high + step * 1e-9:
        ticks.append(0.0 if i == 0 else i * step)
        i += 1
    if multiplier == 10:
        exponent += 1
    decimals = max(0, -exponent) + (1 if multiplier == 2.5 and exponent <= 0 else 0)
    return ticks, decimals


class _Scale:
    """A linear map of the data domain [lo, hi] onto the pixel range [p0, p1]."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float):
        self.lo, self.hi, self.p0, self.p1 = lo, hi, p0, p1

    def __call__(self, value: float) -> float:
        return _r(self.p0 + (value - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0))


@dataclass(frozen=True)
class Interval:
    """One row of a forest panel: a point ``value`` with a whisker from ``low`` to ``high`` (NaN:
    no point / no whisker on that side; an end inside the point, e.g. a rounded CI a hair inside
    the rounded value, draws at the point), its ``colour``, a ``note`` written right of the
    whisker and a ``title`` (the tooltip, and what a screen reader reads)."""

    value: float
    low: float
    high: float
    colour: str
    note: str = ""
    title: str = ""


@dataclass(frozen=True)
class Panel:
    """A forest panel: a row per label, a ``title`` above it, its data ``domain`` (lo, hi) and
    whether a zero line is drawn."""

    rows: Sequence[Interval]
    domain: tuple[float, float]
    title: str = ""
    zero_line: bool = False


def forest(
    labels: Sequence[str],
    panels: Sequence[Panel],
    *,
    axis_label: str = "",
    legend: Sequence[tuple[str, str]] = (),
    width: float = CHART_WIDTH,
) -> dict:
    """Forest plot geometry: ``labels`` (top to bottom) left of one or more ``panels`` that share
    them, each row a point with its whisker. ``legend``: (text, colour) pairs shown top right;
    ``axis_label``: under the (last) panel's ticks.

    Returns ``width``, ``height``; ``labels`` (x, y, text; right-aligned at x); ``panels``, each
    with ``x0``/``x1`` (its pixel extent), ``domain`` (the data values at x0 and x1), ``top``/
    ``bottom``, ``tick_y`` (the tick labels' baseline), ``title`` (x, y, text or None), ``ticks``
    (x, text), ``zero`` (x of the zero line or None) and ``points`` (y, cap_top, cap_bottom; cx;
    x_low, x_high (the whisker, equal to cx on a side without one); colour, note, note_x, title;
    value, low, high as given); ``legend`` (x, dot_x, y, colour, text);
    ``axis_label`` (x, y, text or None). A row with a NaN value has no mark in that panel."""
    has_titles = any(p.title for p in panels)
    top = _PAD + (22.0 if legend or has_titles else 0.0)
    left = min(max((text_width(t) for t in labels), default=0.0) + 2 * _PAD, 0.55 * width)
    bottom_room = 24.0 + (18.0 if axis_label else 0.0)
    height = top + _ROW * len(labels) + bottom_room
    notes = any(r.note for p in panels for r in p.rows)
    gap = 24.0
    right_pad = _PAD + (24.0 if notes else 6.0)
    panel_w = (width - left - right_pad - gap * (len(panels) - 1)) / max(len(panels), 1)
    bottom = top + _ROW * len(labels)
    out_panels = []
    for k, panel in enumerate(panels):
        x0 = left + k * (panel_w + gap)
        x1 = x0 + panel_w
        lo, hi = panel.domain
        scale = _Scale(lo, hi, x0, x1)
        ticks, decimals = nice_ticks(lo, hi, target=max(3, min(7, int(panel_w // 70))))
        points = []
        for i, row in enumerate(panel.rows):
            y = _r(top + _ROW * (i + 0.5))
            if math.isnan(row.value):
                continue
            cx = scale(row.value)
            x_low = cx if math.isnan(row.low) else min(cx, scale(row.low))
            x_high = cx if math.isnan(row.high) else max(cx, scale(row.high))
            points.append(
                {
                    "y": y,
                    "cap_top": _r(y - 4),
                    "cap_bottom": _r(y + 4),
                    "cx": cx,
                    "x_low": x_low,
                    "x_high": x_high,
                    "colour": row.colour,
                    "note": row.note,
                    "note_x": _r(x_high + 6),
                    "title": row.title,
                    "value": row.value,
                    "low": row.low,
                    "high": row.high,
                }
            )
        out_panels.append(
            {
                "x0": _r(x0),
                "x1": _r(x1),
                "domain": (lo, hi),
                "top": _r(top),
                "bottom": _r(bottom),
                "tick_y": _r(bottom + 12),
                "title": {"x": _r((x0 + x1) / 2), "y": _r(top - 10), "text": panel.title}
                if panel.title
                else None,
                "ticks": [{"x": scale(t), "text": number(t, decimals)} for t in ticks],
                "zero": scale(0.0) if panel.zero_line and lo <= 0 <= hi else None,
                "points": points,
            }
        )
    legend_out = []
    x = width - _PAD
    for text, colour in reversed(legend):
        x -= text_width(text, FONT_SIZE) + 4
        legend_out.append({"x": _r(x), "dot_x": _r(x - 8), "y": _r(_PAD + 8), "colour": colour, "text": text})
        x -= 22.0
    legend_out.reverse()
    last = out_panels[-1] if out_panels else {"x0": left, "x1": width - right_pad}
    return {
        "width": _r(width),
        "height": _r(height),
        "labels": [
            {"x": _r(left - _PAD), "y": _r(top + _ROW * (i + 0.5)), "text": text}
            for i, text in enumerate(labels)
        ],
        "panels": out_panels,
        "legend": legend_out,
        "axis_label": {"x": _r((last["x0"] + last["x1"]) / 2), "y": _r(height - 10), "text": axis_label}
        if axis_label
        else None,
    }


def bars(
    labels: Sequence[str],
    values: Sequence[int],
    colours: Sequence[str],
    *,
    axis_label: str = "",
    width: float = CHART_WIDTH,
    height: float = 250.0,
) -> dict:
    """Vertical bar geometry: one bar per label (left to right) of height ``values`` (counts ≥ 0)
    in ``colours``, on a value axis from 0 to 1.18 × the largest value (room for the value written
    above each bar).

    Returns ``width``, ``height``; ``plot`` (x0, x1, top, bottom; y0 is the pixel of 0 =
    ``bottom``); ``domain`` (0, the value at ``top``); ``ticks`` (y, text; whole numbers);
    ``tick_x`` (the ticks' right edge); ``bars`` (x, y, w, h, colour, label, label_x, label_y,
    value, value_y); ``axis_label``
    (x, y, text; drawn rotated) or None."""
    top, bottom = _PAD + 4.0, height - 30.0
    high = max(max(values, default=0) * 1.18, 1.0)
    ticks, _ = nice_ticks(0.0, high, target=6, integer=True)
    tick_texts = [str(int(t)) for t in ticks]
    left = max(text_width(t) for t in tick_texts) + _PAD + (22.0 if axis_label else 0.0)
    x0, x1 = left, width - _PAD
    scale = _Scale(0.0, high, bottom, top)
    band = (x1 - x0) / max(len(values), 1)
    out = []
    for i, (label, value, colour) in enumerate(zip(labels, values, colours, strict=True)):
        cx = x0 + band * (i + 0.5)
        y = scale(value)
        out.append(
            {
                "x": _r(cx - 0.3 * band),
                "y": y,
                "w": _r(0.6 * band),
                "h": _r(bottom - y),
                "colour": colour,
                "label": label,
                "label_x": _r(cx),
                "label_y": _r(bottom + 14),
                "value": int(value),
                "value_y": _r(y - 9),
            }
        )
    return {
        "width": _r(width),
        "height": _r(height),
        "plot": {"x0": _r(x0), "x1": _r(x1), "top": _r(top), "bottom": _r(bottom)},
        "domain": (0.0, high),
        "tick_x": _r(x0 - 6),
        "ticks": [{"y": scale(t), "text": s} for t, s in zip(ticks, tick_texts, strict=True)],
        "bars": out,
        "axis_label": {"x": _r(_PAD + 6), "y": _r((top + bottom) / 2), "text": axis_label}
        if axis_label
        else None,
    }


def diverging_colour(value: float, span: float) -> str:
    """``value`` on the red–yellow–green scale from −``span`` (red) through 0 (pale yellow) to
    +``span`` (green), linearly between the 11 ColorBrewer RdYlGn classes; NaN: light grey."""
    if math.isnan(value):
        return _NO_VALUE_FILL
    t = min(max((value / span + 1.0) / 2.0, 0.0), 1.0) * (len(_RDYLGN) - 1)
    i = min(int(t), len(_RDYLGN) - 2)
    frac = t - i
    lo, hi = _rgb(_RDYLGN[i]), _rgb(_RDYLGN[i + 1])
    mixed = (round(a + (b - a) * frac) for a, b in zip(lo, hi, strict=True))
    return "#" + "".join(f"{c:02x}" for c in mixed)


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _dark(colour: str) -> bool:
    """Whether white text reads better than dark text on ``colour`` (luma below one half)."""
    r, g, b = (c / 255 for c in _rgb(colour))
    return 0.299 * r + 0.587 * g + 0.114 * b < 0.5


def heatmap(
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    values: Sequence[Sequence[float]],
    *,
    span: float,
    digits: int = 3,
    width: float = CHART_WIDTH,
) -> dict:
    """Heat-map geometry: ``values[i][j]`` (NaN: none) of row ``i`` and column ``j``, coloured by
    :func:`diverging_colour` over ±``span`` and written in its cell (signed, ``digits`` decimals,
    "–" when NaN); column labels above, row labels left; a colour key below.

    Returns ``width``, ``height``; ``columns`` (x, y, text); ``rows`` (x, y, text; right-aligned);
    ``cells`` (x, y, w, h, fill, text, text_colour, text_x, text_y, value, row, column);
    ``key`` (swatches: x, y, w, h, fill; ticks: x, y, text) over −span … +span."""
    cell_h = 36.0
    top = _PAD + 26.0
    left = min(max((text_width(t) for t in row_labels), default=0.0) + 2 * _PAD, 0.5 * width)
    cell_w = (width - left - _PAD) / max(len(column_labels), 1)
    grid_bottom = top + cell_h * len(row_labels)
    height = grid_bottom + 44.0
    cells = []
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            x, y = left + cell_w * j, top + cell_h * i
            fill = diverging_colour(value, span)
            nan = math.isnan(value)
            cells.append(
                {
                    "x": _r(x + 1),
                    "y": _r(y + 1),
                    "w": _r(cell_w - 2),
                    "h": _r(cell_h - 2),
                    "fill": fill,
                    "text": "–" if nan else number(value, digits, signed=True),
                    "text_colour": "#8c959f" if nan else ("#ffffff" if _dark(fill) else "#1f2328"),
                    "text_x": _r(x + cell_w / 2),
                    "text_y": _r(y + cell_h / 2),
                    "value": value,
                    "row": row_labels[i],
                    "column": column_labels[j],
                }
            )
    key_w, n_key = min(240.0, width - left - _PAD), 11
    key_x, key_y = width - _PAD - key_w, grid_bottom + 12.0
    swatches = [
        {
            "x": _r(key_x + key_w * k / n_key),
            "y": _r(key_y),
            "w": _r(key_w / n_key + 0.5),
            "h": 8.0,
            "fill": diverging_colour(-span + 2 * span * (k + 0.5) / n_key, span),
        }
        for k in range(n_key)
    ]
    key_ticks = [
        {"x": _r(key_x + key_w * f), "y": _r(key_y + 18), "text": number(v, digits, signed=True)}
        for f, v in ((0.0, -span), (0.5, 0.0), (1.0, span))
    ]
    return {
        "width": _r(width),
        "height": _r(height),
        "columns": [
            {"x": _r(left + cell_w * (j + 0.5)), "y": _r(top - 12), "text": t}
            for j, t in enumerate(column_labels)
        ],
        "rows": [
            {"x": _r(left - _PAD), "y": _r(top + cell_h * (i + 0.5)), "text": t}
            for i, t in enumerate(row_labels)
        ],
        "cells": cells,
        "key": {"swatches": swatches, "ticks": key_ticks},
    }
