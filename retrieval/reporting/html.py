"""A self-contained HTML page: figures embedded as base64 PNG, a summary table, the manifest.
No external CSS, scripts or images: the file can be mailed or attached to a ticket as is."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.numfmt import format_number

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1500px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 2em;
  border-bottom: 1px solid #ddd; }
.meta { color: #555; font-size: 0.9em; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.t { text-align: left; }
tr.hl td { background: #eaf6ea; font-weight: 600; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.8em; }
"""


@dataclass(frozen=True)
class Section:
    """One figure of a report: file-name stem, heading, PNG bytes, caption."""

    name: str
    title: str
    png: bytes
    caption: str = ""


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[Any]]
    highlight: list[bool] | None = None
    caption: str = ""


def fmt_cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return format_number(v)
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={fmt_cell(x)}" for k, x in v.items()) or "-"
    if isinstance(v, list | tuple):
        return ", ".join(fmt_cell(x) for x in v)
    return str(v)


def table_html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = []
    for i, row in enumerate(t.rows):
        cls = ' class="hl"' if t.highlight and t.highlight[i] else ""
        cells = "".join(
            f'<td class="t">{html.escape(fmt_cell(c))}</td>' if not isinstance(c, int | float)
            or isinstance(c, bool) else f"<td>{html.escape(fmt_cell(c))}</td>"
            for c in row
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    cap = f"<p class='meta'>{html.escape(t.caption)}</p>" if t.caption else ""
    return f"{cap}<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render(
    *,
    title: str,
    meta: Sequence[str],
    sections: Sequence[Section],
    tables: Sequence[tuple[str, Table]],
    manifest: Mapping[str, Any],
) -> str:
    """The whole page as one string."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        *[f"<div class='meta'>{html.escape(m)}</div>" for m in meta],
    ]
    for heading, t in tables:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append(table_html(t))
    if sections:
        parts.append("<h2>Plots</h2>")
    for s in sections:
        data = base64.b64encode(s.png).decode("ascii")
        parts.append(
            f"<figure id='{html.escape(s.name)}'><img alt='{html.escape(s.title)}' "
            f"src='data:image/png;base64,{data}'>"
            f"<figcaption><b>{html.escape(s.title)}</b>"
            f"{'. ' + html.escape(s.caption) if s.caption else ''}</figcaption></figure>"
        )
    parts.append("<h2>Manifest</h2>")
    text = json.dumps(manifest, indent=2, default=str)
    parts.append(f"<pre>{html.escape(text, quote=False)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


__all__ = ["Section", "Table", "fmt_cell", "render", "table_html"]
