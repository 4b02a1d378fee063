"""A tiny SVG writer for the docs pictures: labelled grids of coloured cells, and bar charts."""

from __future__ import annotations

from html import escape

# one colour per rank (colour-blind-safe palette, Okabe-Ito)
PALETTE = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999"]
CELL, GAP, LABEL = 26, 2, 120


def text(
    x: float, y: float, s: object, size: int = 12, anchor: str = "start", weight: str = "normal"
) -> str:
    return (
        f'<text x="{x}" y="{y}" font-family="monospace" font-size="{size}" '
        f'text-anchor="{anchor}" font-weight="{weight}">{escape(str(s))}</text>'
    )


def rect(x: float, y: float, w: float, h: float, fill: str, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="3,2" fill-opacity="0.45"' if dashed else ""
    return f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" stroke="#333"{dash}/>'


def document(width: float, height: float, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f'<rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>\n"
    )


def grid(
    rows: list[tuple[str, list[tuple[object, int, bool]]]], title: str, legend: list[str]
) -> str:
    """Rows of cells: ``(row label, [(cell text, colour index, dashed), ...])``; a legend of colours.

    A cell whose text is ``None`` is left empty (a row may start further right).
    """
    cells_width = LABEL + max(len(cells) for _, cells in rows) * (CELL + GAP) + 20
    width = max(
        cells_width, len(title) * 8 + 20, len(legend) * 110 + 20
    )  # 13px monospace ~ 8px/char
    body = [text(10, 20, title, 13, weight="bold")]
    y = 36
    for label, cells in rows:
        if label:
            body.append(text(10, y + CELL * 0.68, label))
        for k, (s, colour, dashed) in enumerate(cells):
            if s is None:  # an empty slot: the row starts further right
                continue
            x = LABEL + k * (CELL + GAP)
            body.append(rect(x, y, CELL, CELL, PALETTE[colour % len(PALETTE)], dashed))
            body.append(text(x + CELL / 2, y + CELL * 0.68, s, 11, "middle"))
        y += CELL + GAP + (6 if not label else 0)
    y += 10
    for k, name in enumerate(legend):
        x = 10 + k * 110
        body.append(rect(x, y, 14, 14, PALETTE[k % len(PALETTE)]))
        body.append(text(x + 20, y + 12, name))
    return document(width, y + 30, body, title)


def bars(groups: dict[str, dict[str, float]], title: str, unit: str) -> str:
    """A grouped horizontal bar chart: ``groups[group][series] = value``."""
    series = sorted({s for g in groups.values() for s in g})
    top = max((v for g in groups.values() for v in g.values()), default=1.0) or 1.0
    scale, bar = 360 / top, 16
    body = [text(10, 20, title, 13, weight="bold")]
    y = 36
    for group, values in groups.items():
        body.append(text(10, y + 12, group, weight="bold"))
        y += 18
        for s in series:
            if s in values:
                v = values[s]
                body.append(text(10, y + 12, s))
                body.append(
                    rect(
                        LABEL + 80,
                        y,
                        max(v * scale, 1),
                        bar,
                        PALETTE[series.index(s) % len(PALETTE)],
                    )
                )
                body.append(
                    text(
                        LABEL + 86 + v * scale,
                        y + 12,
                        f"{v:,.0f} {unit}" if float(v).is_integer() else f"{v:,.2f} {unit}",
                    )
                )
                y += bar + 4
        y += 8
    return document(LABEL + 80 + 360 + 140, y + 10, body, title)
