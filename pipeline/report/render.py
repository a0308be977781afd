"""A small document model — sections of paragraphs, tables and figures — rendered twice.

The HTML is self-contained (figures embedded as base64 PNG data URIs, CSS
inline, no scripts, nothing fetched), so it can be mailed or archived as one
file; the Markdown holds the same tables and refers to the PNGs next to it.
Links (trajectory pages) are relative and point into ``trajectories/`` beside it.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Link:
    """A table cell or paragraph that links elsewhere (a trajectory page), relative to the report."""

    text: str
    href: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclass
class Image:
    path: Path  # PNG written next to the report
    caption: str


@dataclass
class Section:
    title: str
    blocks: list[str | Table | Image | Link] = field(default_factory=list)  # a str is a paragraph


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1080px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figcaption { font-size: .85em; color: #555; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
p.headline { font-size: 1.15em; background: #f5f8ff; border-left: 4px solid #1f77b4; padding: .6em .9em; }
.caption { font-size: .85em; color: #555; }
"""


def _md_cell(text: str | Link) -> str:
    if isinstance(text, Link):
        return f"[{_md_cell(text.text)}]({text.href})"
    return str(text).replace("|", "\\|").replace("\n", " ")


# Cells that start with a number ("46.1% [40.2, 52.0]", "+3.5 pts", "1,204") are right-aligned.
_NUMERIC = re.compile(r"^[+-]?\d[\d,]*(\.\d+)?%?( |$)")


def _is_num(text: str) -> bool:
    return bool(_NUMERIC.match(str(text).strip()))


def to_markdown(title: str, sections: list[Section]) -> str:
    out = [f"# {title}", ""]
    for s in sections:
        out += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, Table):
                if b.caption:
                    out += [f"*{b.caption}*", ""]
                out.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
                out.append("|" + "|".join("---" for _ in b.headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
                out.append("")
            elif isinstance(b, Image):
                out += [f"![{b.caption}]({b.path.name})", "", f"*{b.caption}*", ""]
            elif isinstance(b, Link):
                out += [_md_cell(b), ""]
            else:
                out += [b, ""]
    return "\n".join(out).rstrip() + "\n"


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _html_cell(c: object) -> str:
    e = html.escape
    if isinstance(c, Link):
        return f'<td><a href="{e(c.href)}">{e(c.text)}</a></td>'
    return f'<td class="num">{e(str(c))}</td>' if _is_num(c) else f"<td>{e(str(c))}</td>"


def to_html(title: str, sections: list[Section], headline: str = "") -> str:
    """The page; the paragraph equal to ``headline`` is styled as the headline (id="headline")."""
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    for s in sections:
        out.append(f"<section><h2>{e(s.title)}</h2>")
        for b in s.blocks:
            if isinstance(b, Table):
                if b.caption:
                    out.append(f'<p class="caption">{e(b.caption)}</p>')
                out.append(
                    "<table><thead><tr>"
                    + "".join(f"<th>{e(h)}</th>" for h in b.headers)
                    + "</tr></thead><tbody>"
                )
                for row in b.rows:
                    cells = "".join(_html_cell(c) for c in row)
                    out.append(f"<tr>{cells}</tr>")
                out.append("</tbody></table>")
            elif isinstance(b, Image):
                out.append(
                    f'<figure><img src="{_data_uri(b.path)}" alt="{e(b.caption)}">'
                    f"<figcaption>{e(b.caption)}</figcaption></figure>"
                )
            elif isinstance(b, Link):
                out.append(f'<p><a href="{e(b.href)}">{e(b.text)}</a></p>')
            elif headline and b == headline:
                out.append(f'<p class="headline" id="headline">{e(b)}</p>')
            else:
                out.append(f"<p>{e(b)}</p>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
