"""`neardup report --html`: the page as a person sees it, rendered by a real headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from neardup import api
from neardup.html import GROUPS_PER_PAGE, HtmlReport, render
from neardup.tuning import NEAREST_SPLIT
from tests.runner import neardup

RECORDS = {
    "1": "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101",
    "2": "Bella Napoli Trattoria 418 Harbor St. Portland, ME 04101",
    "10": "Bella Napoli Trattoria 418 Harbor Street Portland ME 04101",
    "3": "Golden Lotus Dim Sum 1209 Grant Ave San Francisco CA 94133",
    "4": "Golden Lotus Dim Sum Restaurant 1209 Grant Avenue San Francisco CA 94133",
    "5": "Thai Orchid Kitchen 58 Elm Street Northampton MA 01060",
    "<i>6</i>": "Thai Orchid Kitchen 58 Elm St Northampton MA 01060",  # an id is only text
    "<!--<script>": "Thai Orchid Kitchen 58 Elm St. Northampton MA 01060",  # not page syntax
}


def browser() -> str | None:
    return next(
        (path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None
    )


@pytest.fixture
def page(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "records.txt").write_text("".join(f"{i} {t}\n" for i, t in RECORDS.items()))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert neardup("index", "records.txt", "--store", url, cwd=tmp_path).returncode == 0
    written = neardup("report", "--store", url, "--html", "report.html", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert written.stdout == ""  # with --html and no -o, the pairs are not printed
    return tmp_path / "report.html", url


def test_the_page_stands_alone(page: tuple[Path, str]) -> None:
    text = page[0].read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing from the network
    assert "@import" not in text and "url(" not in text
    assert "<i>6</i>" not in text  # escaped in the page's data too


@pytest.fixture
def chromium() -> str:
    """Chromium's path; without it the test fails under CI and is skipped elsewhere."""
    found = browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium: `make test` installs Debian's package when run as root")
        pytest.skip("no Chromium here (apt-get install chromium)")
    return found


def test_a_threshold_read_from_the_contents_shows_their_chart_too() -> None:
    """Where the threshold came from each content's nearest similarity, the page draws that
    histogram as well, with the threshold on it; any other way, the pairs' chart alone."""
    nearest = [0] * 25 + [10] * 25
    report = HtmlReport(
        store="sqlite:///x.db",
        records=3,
        settings="char:4",
        threshold=0.56,
        threshold_source=f"auto: {NEAREST_SPLIT}",
        histogram=[100 - n for n in range(50)],
        histogram_of="candidate pairs",
        pairs=[],
        groups=[],
        contents={},
        nearest=nearest,
    )
    shown = render(report)
    assert "Each content's nearest similarity (log scale)" in shown
    assert shown.count('class="bar"') == 100 and 'id="nearest-threshold-line"' in shown
    plain = render(replace(report, threshold_source="auto: the valley below the hump at 0.91"))
    assert "Each content's nearest" not in plain and plain.count('class="bar"') == 50


def test_a_browser_shows_the_reports_figures_and_differences(
    page: tuple[Path, str], chromium: str
) -> None:
    path, url = page
    pairs = api.report(url)
    groups = api.clusters(pairs)
    shot = path.with_suffix(".png")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600"]
    dom = subprocess.run(
        [*common, "--enable-logging=stderr", "--v=0", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    subprocess.run([*common, f"--screenshot={shot}", path.as_uri()],
                   capture_output=True, timeout=120, check=True)  # fmt: skip
    shown = dom.stdout
    figures = dict(re.findall(r'<span id="count-([a-z-]+)">([\d,]+)</span>', shown))
    assert figures["records"] == str(len(RECORDS))
    assert figures["pairs"] == str(len(pairs))
    assert figures["groups"] == str(len(groups))
    # The histogram is of every candidate pair the report measured, with its threshold.
    measured = api.last_report(url)
    assert "Similarities of the candidate pairs" in shown
    assert shown.count('class="bar"') == len(measured.histogram)
    assert f'<strong id="threshold">{measured.threshold:g}</strong>: {measured.how}' in shown
    assert 'id="threshold-line"' in shown
    sections = re.findall(r'<section class="group[^"]*">(.*?)</section>', shown, flags=re.S)
    assert len(sections) == min(len(groups), GROUPS_PER_PAGE)
    assert "<del>street</del>" in shown and "<ins>st</ins>" in shown  # 1 against 2, by word
    # 1 and 10 hold one text: one line, its copies named on it.
    assert '<span class="id">1</span>' in sections[0] and '"id">10<' not in sections[0]
    assert "2 exact copies (also 10)" in sections[0]
    assert sections[0].index('"id">1<') < sections[0].index('"id">2<')
    assert "&lt;i&gt;6&lt;/i&gt;" in shown and "<i>6</i>" not in shown
    assert "&lt;!--&lt;script&gt;" in shown
    assert "CONSOLE" not in dom.stderr, dom.stderr  # no errors, no logging from the page
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def dom_of(chromium: str, url: str) -> str:
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600"]
    return subprocess.run(
        [*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    ).stdout


def test_a_link_opens_a_search_and_the_records_own_texts_are_shown(
    page: tuple[Path, str], tmp_path: Path, chromium: str
) -> None:
    path, url = page
    found = dom_of(chromium, path.as_uri() + "#search=golden%20lotus")
    sections = re.findall(r'<section class="group[^"]*">(.*?)</section>', found, flags=re.S)
    assert len(sections) == 1 and '"id">3<' in sections[0]
    assert re.search(r'<span id="found">1 of \d+ groups match</span>', found)
    by_id = neardup("report", "--store", url, "--html", "own.html", "--texts-from",
                    "records.txt", cwd=tmp_path)  # fmt: skip
    assert by_id.returncode == 0, by_id.stderr
    own = dom_of(chromium, (tmp_path / "own.html").as_uri())
    assert "<ins>St. Portland,</ins>" in own  # the record as its file has it, not normalised
    assert "as each record's file has it" in own
