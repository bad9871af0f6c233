"""Charts for the review page, drawn on the server as inline SVG: no chart library, nothing fetched.

Colours come from the page's stylesheet through CSS classes (``cat-PATIENT``, ``bar``), so the
markup holds no style attribute (the page's Content-Security-Policy allows none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

ROW = 22  # pixels per bar


def bars(items: Sequence[tuple[str, float]], css: Callable[[str], str] = lambda _: "bar", width: int = 560, label: str = "") -> Markup:
    """Horizontal bars, one per (label, value), longest first as given, each with its value."""
    if not items:
        return Markup('<p class="empty">nothing to show</p>')
    top = max(value for _, value in items) or 1
    left, right = 150, 70
    span = width - left - right
    height = ROW * len(items) + 4
    parts = [_svg(width, height, label)]
    for i, (name, value) in enumerate(items):
        y = i * ROW + 2
        length = max(1.0, span * value / top) if value else 0.0
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(name)}</text>'
            f'<rect class="{escape(css(name))}" x="{left}" y="{y + 2}" width="{length:.1f}" height="{ROW - 6}">'
            f'<title>{escape(name)}: {value:,.0f}</title></rect>'
            f'<text x="{left + length + 6:.1f}" y="{y + 15}">{value:,.0f}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def curve(points: Sequence[dict], threshold: float | None, width: int = 560, height: int = 360) -> Markup:
    """Recall against precision of the union as the classifier's threshold moves (an evaluate report's
    "curve"), the model's threshold ringed; the axes span the points' range, not 0 to 1."""
    points = [p for p in points if "union_recall" in p and "union_precision" in p]
    if not points:
        return Markup('<p class="empty">no threshold curve in the evaluation report</p>')
    pad, inner_w, inner_h = 56, width - 80, height - 90
    xs = [p["union_precision"] for p in points]
    ys = [p["union_recall"] for p in points]
    x0, x1 = _range(xs)
    y0, y1 = _range(ys)

    def at(p: dict) -> tuple[float, float]:
        return pad + inner_w * (p["union_precision"] - x0) / (x1 - x0), 20 + inner_h * (1 - (p["union_recall"] - y0) / (y1 - y0))

    ordered = sorted(points, key=lambda p: p["threshold"])
    path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(map(at, ordered)))
    parts = [_svg(width, height, "recall against precision by threshold"),
             f'<line class="axis" x1="{pad}" y1="{20 + inner_h}" x2="{pad + inner_w}" y2="{20 + inner_h}"/>',
             f'<line class="axis" x1="{pad}" y1="20" x2="{pad}" y2="{20 + inner_h}"/>']
    for k in range(5):
        xv, yv = x0 + (x1 - x0) * k / 4, y0 + (y1 - y0) * k / 4
        parts.append(f'<text class="tick" x="{pad + inner_w * k / 4:.1f}" y="{38 + inner_h}" text-anchor="middle">{xv:.3f}</text>')
        parts.append(f'<text class="tick" x="{pad - 6}" y="{24 + inner_h * (1 - k / 4):.1f}" text-anchor="end">{yv:.3f}</text>')
    parts.append(f'<text x="{pad + inner_w / 2:.1f}" y="{height - 12}" text-anchor="middle">precision (union)</text>')
    middle = 20 + inner_h / 2
    parts.append(f'<text x="14" y="{middle:.1f}" transform="rotate(-90 14 {middle:.1f})" text-anchor="middle">recall (union)</text>')
    parts.append(f'<path class="line" d="{path}"/>')
    for p in ordered:
        x, y = at(p)
        chosen = threshold is not None and abs(p["threshold"] - threshold) < 1e-9
        said = f'threshold {p["threshold"]:.2f}: recall {p["union_recall"]:.4f}, precision {p["union_precision"]:.4f}'
        kind, radius = ("chosen", 6) if chosen else ("point", 3)
        parts.append(f'<circle class="{kind}" cx="{x:.1f}" cy="{y:.1f}" r="{radius}"><title>{said}</title></circle>')
        if chosen:  # its label on the side with room
            left = x > pad + inner_w * 0.7
            anchor = f'x="{x - 9:.1f}" text-anchor="end"' if left else f'x="{x + 9:.1f}"'
            parts.append(f'<text class="note" {anchor} y="{y - 8:.1f}">threshold {p["threshold"]:.2f}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _svg(width: int, height: int, label: str) -> str:
    return f'<svg class="chart" role="img" aria-label="{escape(label)}" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'


def _range(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    margin = max((high - low) * 0.08, 0.002)
    return low - margin, high + margin
