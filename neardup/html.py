"""The report as one self-contained HTML page: no network, no external scripts or fonts.

The groups travel as JSON inside the page and are drawn a page of groups at a time, so a report
of 100,000 pairs opens as fast as one of ten. Word-level differences from each group's first
record are computed here (the same diff as ``neardup explain``) and marked with ``<del>`` and
``<ins>`` in the page.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .explain import word_diff
from .report import REVIEW_MARGIN, Pair, for_review, ordered_pair
from .tuning import NEAREST_SPLIT

BINS = 20
GROUPS_PER_PAGE = 50
CONTEXT = 6  # unchanged words shown next to a change


@dataclass(frozen=True)
class HtmlReport:
    store: str
    records: int  # in the store
    settings: str  # the fingerprint settings and the match rules, in words
    threshold: float | None
    threshold_source: str  # how the threshold was chosen
    # Pairs per similarity bin over [0, 1]: every candidate pair the report measured, or,
    # for a report that kept no such count (an exact one), the reported pairs.
    histogram: Sequence[int]
    histogram_of: str  # "candidate pairs" or "reported pairs"
    pairs: Sequence[Pair]
    groups: Sequence[Sequence[str]]
    contents: Mapping[str, str]  # normalised content by id, for every grouped record
    # Each record's own text, as its file has it (report --texts-from): shown and compared
    # instead of the normalised content when given.
    originals: Mapping[str, str] | None = None
    left_out: str | None = None  # what the report left out of its candidates, past its budget
    missed: str | None = None  # what its candidates may miss (the estimated candidate recall)
    unsure: str | None = None  # how to place a threshold that no valley showed
    # Contents by the similarity of their nearest other one, when the threshold was read from
    # them (see neardup.tuning.choose_threshold).
    nearest: Sequence[int] | None = None


def render(report: HtmlReport) -> str:
    """The page."""
    review = for_review(report.pairs, report.threshold)
    shown = report.originals or report.contents
    data = {
        "groups": [_group(members, report.contents, shown, review) for members in report.groups],
        "perPage": GROUPS_PER_PAGE,
    }
    summary = [
        ("records", f"{report.records:,}"),
        ("pairs", f"{len(report.pairs):,}"),
        ("groups", f"{len(report.groups):,}"),
        ("to review", f"{len(review):,}"),
    ]
    threshold = "none" if report.threshold is None else f"{report.threshold:g}"
    return _PAGE.format(
        title=html.escape(f"neardup report: {report.store}"),
        store=html.escape(report.store),
        summary="".join(
            f'<div class="figure"><span id="count-{name.replace(" ", "-")}">{value}</span>'
            f"<small>{name}</small></div>"
            for name, value in summary
        ),
        settings=html.escape(report.settings),
        threshold=threshold,
        threshold_source=html.escape(report.threshold_source),
        left_out=f'<p id="left-out">The report {html.escape(report.left_out)}.</p>'
        if report.left_out
        else "",
        missed=f'<p id="missed">The {html.escape(report.missed)}.</p>' if report.missed else "",
        unsure=f'<p id="unsure">{html.escape(report.unsure[:1].upper() + report.unsure[1:])}.</p>'
        if report.unsure
        else "",
        margin=f"{REVIEW_MARGIN:g}",
        histogram_of=report.histogram_of,
        histogram=_histogram(report.histogram, report.threshold, report.histogram_of)
        + _nearest_chart(report),
        texts="as each record's file has it"
        if report.originals
        else ("normalised, as the store keeps them (report --texts-from shows each record's own)"),
        data=json.dumps(data, ensure_ascii=False).translate(_SCRIPT_SAFE),
        script=_SCRIPT,
        style=_STYLE,
    )


# Inside a <script> block "<!--", "<script" and "</script" change how the page is parsed, so the
# data's <, > and & go as JSON escapes (with U+2028 and U+2029, which old parsers end lines at).
_SCRIPT_SAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _group(
    members: Sequence[str],
    contents: Mapping[str, str],
    shown: Mapping[str, str],
    review: set[tuple[str, str]],
) -> dict[str, object]:
    """A group for the page: its first record whole, each other one as word changes from it,
    unchanged runs cut to :data:`CONTEXT` words next to the changes (as a diff shows them).
    Exact copies (the same content) are one row with the ids of the others, so 68 copies of
    one ad take one line. ``shown`` is the text shown and compared for each id."""
    copies: dict[str, list[str]] = {}  # content: its ids, in the group's order
    for member in members:
        copies.setdefault(contents.get(member, ""), []).append(member)
    heads = [ids[0] for ids in copies.values()]
    first = shown.get(heads[0], "")
    rows: list[dict[str, object]] = [{"id": heads[0], "diff": [["equal", first]]}]
    for head in heads[1:]:
        changes = word_diff(first, shown.get(head, ""))
        diff = [
            ["equal", _context(c.a, n == 0, n == len(changes) - 1)]
            if c.op == "equal"
            else [c.op, c.a, c.b]
            for n, c in enumerate(changes)
        ]
        rows.append({"id": head, "diff": diff, "review": ordered_pair(heads[0], head) in review})
    for row in rows:
        row["copies"] = copies[contents.get(str(row["id"]), "")][1:]
    return {"members": rows, "size": len(members), "review": any(r.get("review") for r in rows)}


def _context(words: str, first: bool, last: bool) -> str:
    """An unchanged run with only the words next to a change: at a text's start or end,
    CONTEXT words on the changed side; between two changes, CONTEXT on each side."""
    split = words.split()
    if len(split) <= 2 * CONTEXT + 1:
        return words
    if first and last:  # no change at all
        return " ".join([*split[:CONTEXT], "…"])
    head = [] if first else split[:CONTEXT]
    tail = [] if last else split[-CONTEXT:]
    return " ".join([*head, "…", *tail])


def pair_histogram(similarities: Sequence[float], bins: int = BINS) -> list[int]:
    """How many of these similarities fall in each of ``bins`` equal bins of [0, 1]."""
    counts = [0] * bins
    for s in similarities:
        counts[min(int(s * bins), bins - 1)] += 1
    return counts


def _nearest_chart(report: HtmlReport) -> str:
    """The contents by their nearest similarity, under a heading, when the threshold was read
    from them; else nothing."""
    if report.nearest is None or NEAREST_SPLIT not in report.threshold_source:
        return ""
    of = "contents, at the nearest other one"
    chart = _histogram(report.nearest, report.threshold, of, "nearest-threshold-line")
    return f"\n<h2>Each content's nearest similarity (log scale)</h2>\n{chart}"


def _histogram(
    counts: Sequence[int], threshold: float | None, of: str, line_id: str = "threshold-line"
) -> str:
    """An SVG bar chart of pairs by similarity over [0, 1], the threshold drawn as a line. The
    heights are on a log scale: unrelated candidates outnumber near-duplicates by orders of
    magnitude, and both humps must show."""
    tallest = math.log1p(max(counts, default=0)) or 1.0
    width, height, bar = 600, 160, 600 / max(len(counts), 1)
    bars = "".join(
        f'<rect class="bar" x="{n * bar + 0.5:.1f}" '
        f'y="{height - math.log1p(c) / tallest * height:.1f}" width="{max(bar - 1, 1):.1f}" '
        f'height="{math.log1p(c) / tallest * height:.1f}">'
        f"<title>{n / len(counts):.2f} to {(n + 1) / len(counts):.2f}: {c:,} {of}</title></rect>"
        for n, c in enumerate(counts)
    )
    line = ""
    if threshold is not None:
        x = threshold * width
        line = (
            f'<line id="{line_id}" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height}"/>'
            f'<text x="{x + 4:.1f}" y="12">threshold {threshold:g}</text>'
        )
    axis = "".join(
        f'<text x="{t * width:.0f}" y="{height + 14}" text-anchor="middle">{t:g}</text>'
        for t in (0, 0.25, 0.5, 0.75, 1)
    )
    return (
        f'<svg viewBox="-10 0 {width + 20} {height + 20}" role="img" '
        f'aria-label="similarities of the {of}">{bars}{line}{axis}</svg>'
    )


_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #222; }
.figures { display: flex; gap: 2rem; margin: 1rem 0; }
.figure span { display: block; font-size: 1.8rem; font-weight: 600; }
svg { width: 100%; max-width: 40rem; }
.bar { fill: #4a78b5; }
#threshold-line, #nearest-threshold-line { stroke: #c0392b; stroke-width: 2; }
svg text { font-size: 11px; fill: #555; }
.group { border: 1px solid #ddd; border-radius: 6px; margin: 0.8rem 0; padding: 0.5rem 0.8rem; }
.group.review { border-color: #e0a100; }
.member { font-family: ui-monospace, monospace; font-size: 13px; margin: 0.2rem 0; }
.member .id { display: inline-block; min-width: 7rem; color: #666; }
.member.kept .id::after { content: " kept"; color: #2a7d2a; }
.member.review::before { content: "review "; color: #b07800; font-weight: 600; }
del { background: #fbd3d0; text-decoration: line-through; }
ins { background: #cdeccd; text-decoration: none; }
nav button { margin-right: 0.5rem; }
nav input[type=number] { width: 4rem; } nav label { margin-left: 1rem; }
.copies { display: block; margin-left: 7rem; color: #666; font-family: system-ui, sans-serif; }
"""

_SCRIPT = """
"use strict";
const data = JSON.parse(document.getElementById("report-data").textContent);
let page = 0;
let shown = data.groups.map((group, n) => [group, n]);  // the groups the search keeps
const pages = () => Math.max(1, Math.ceil(shown.length / data.perPage));
function words(parent, tag, text) {
  if (!text) { return; }
  const node = document.createElement(tag);
  node.textContent = text;
  parent.append(node, " ");
}
function member(row, index) {
  const line = document.createElement("div");
  line.className = "member" + (index === 0 ? " kept" : "") + (row.review ? " review" : "");
  const id = document.createElement("span");
  id.className = "id";
  id.textContent = row.id;
  line.append(id);
  for (const [op, a, b = ""] of row.diff) {
    if (op === "equal") { words(line, "span", a); continue; }
    words(line, "del", a);
    words(line, "ins", b);
  }
  if (row.copies.length) {
    const more = document.createElement("span");
    more.className = "copies";
    const listed = row.copies.slice(0, 20).join(", ");
    const rest = row.copies.length > 20 ? `, … ${row.copies.length - 20} more` : "";
    more.textContent = `${row.copies.length + 1} exact copies (also ${listed}${rest})`;
    line.append(more);
  }
  return line;
}
function matches(group, query) {
  const has = text => text.toLowerCase().includes(query);
  return group.members.some(row => [row.id, ...row.copies].some(has)
    || row.diff.some(part => has(part.slice(1).join(" "))));
}
function draw() {
  const list = document.getElementById("groups");
  list.replaceChildren();
  const start = page * data.perPage;
  shown.slice(start, start + data.perPage).forEach(([group, number]) => {
    const box = document.createElement("section");
    box.className = "group" + (group.review ? " review" : "");
    const title = document.createElement("h3");
    title.textContent = `group ${number + 1} (${group.size} records)`;
    box.append(title, ...group.members.map(member));
    list.append(box);
  });
  document.getElementById("page").textContent = `page ${page + 1} of ${pages()}`;
  const all = data.groups.length;
  document.getElementById("found").textContent =
    shown.length === all ? "" : `${shown.length} of ${all} groups match`;
  document.getElementById("jump").value = page + 1;
}
function go(to) {
  page = Math.min(pages() - 1, Math.max(0, to));
  draw();
}
function search(query) {
  const wanted = query.trim().toLowerCase();
  shown = data.groups.map((group, n) => [group, n])
    .filter(([group]) => !wanted || matches(group, wanted));
  go(0);
}
document.getElementById("previous").addEventListener("click", () => go(page - 1));
document.getElementById("next").addEventListener("click", () => go(page + 1));
document.getElementById("jump")
  .addEventListener("change", event => go(Number(event.target.value) - 1));
document.getElementById("search").addEventListener("input", event => search(event.target.value));
// A link can open a page or a search: report.html#page=3, report.html#search=bakery.
const asked = new URLSearchParams(location.hash.slice(1));
if (asked.has("search")) {
  document.getElementById("search").value = asked.get("search");
  search(asked.get("search"));
}
go(Number(asked.get("page") || 1) - 1);
"""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>neardup report</h1>
<p>Store <code>{store}</code>. {settings}.</p>
<div class="figures">{summary}</div>
<p>Threshold <strong id="threshold">{threshold}</strong>: {threshold_source}. Pairs less than
{margin} above it are flagged for review. Texts are shown {texts}; in each group, the words
that differ from its first record are struck out (<del>first record</del>) or added
(<ins>this record</ins>), and exact copies share one line.</p>
{left_out}
{missed}
{unsure}
<h2>Similarities of the {histogram_of} (log scale)</h2>
{histogram}
<h2>Groups, largest first</h2>
<nav><button id="previous">previous</button><button id="next">next</button>
<span id="page"></span> <label>go to page <input id="jump" type="number" min="1"></label>
<label>find <input id="search" type="search" placeholder="an id or words"></label>
<span id="found"></span></nav>
<div id="groups"></div>
<script id="report-data" type="application/json">{data}</script>
<script>{script}</script>
</body>
</html>
"""
