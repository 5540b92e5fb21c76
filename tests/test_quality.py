"""Measuring quality: LSH tuning, the exact report, eval, presets and the corpus generator."""

from __future__ import annotations

import csv
import io
import json
import random
import sys
import threading
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from neardup import api
from neardup.errors import NeardupError
from neardup.evaluate import evaluate, pairs_of, read_pairs
from neardup.exact import exact_pairs
from neardup.fingerprint import (
    FingerprintParams,
    Numerals,
    fingerprint_batch,
    jaccard,
    pair_similarities,
    shingle_numbers,
    shingle_sets,
)
from neardup.generate import write_corpus
from neardup.indexer import index_records
from neardup.output import histogram_text, store_tuning, write_pairs
from neardup.readers import Record, RecordReader
from neardup.report import Pair, find_pairs
from neardup.searcher import SIMILARITIES, MatchRules
from neardup.stores import StoredRecord
from neardup.stores.sqlite import SQLiteStore
from neardup.tuning import (
    HISTOGRAM_BINS,
    KNEE,
    MIN_CANDIDATES,
    MIN_TAIL_PAIRS,
    NEAREST_VALLEY,
    TAIL_END,
    ThresholdChoice,
    band_choices,
    bucket_pairs_per_pair,
    candidate_probability,
    choose_threshold,
    estimated_candidate_recall,
    recommend_bands,
)
from tests.corpora import corpus
from tests.runner import assert_user_error, neardup

# --- tuning ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bands", "rows"), [(16, 8), (32, 4), (1, 128), (128, 1)])
def test_s_curve_is_the_banding_formula(bands: int, rows: int) -> None:
    for s in (0.0, 0.3, 0.5, 0.8, 0.95, 1.0):
        assert candidate_probability(s, bands, rows) == pytest.approx(1 - (1 - s**rows) ** bands)


def test_error_masses_match_the_closed_form_for_one_band() -> None:
    # One band of K rows: P(s) = s^K, so the masses have closed forms.
    t, k = 0.6, 8
    one_band = next(c for c in band_choices(t, k) if c.bands == 1)
    assert one_band.false_positive_mass == pytest.approx(t ** (k + 1) / (k + 1), abs=1e-6)
    assert one_band.false_negative_mass == pytest.approx(
        (1 - t) - (1 - t ** (k + 1)) / (k + 1), abs=1e-6
    )


def test_more_bands_trade_false_negatives_for_false_positives() -> None:
    choices = band_choices(0.8, 128)
    assert [c.bands for c in choices] == [1, 2, 4, 8, 16, 32, 64, 128]
    negatives = [c.false_negative_mass for c in choices]
    positives = [c.false_positive_mass for c in choices]
    assert negatives == sorted(negatives, reverse=True)
    assert positives == sorted(positives)


def test_recommendations() -> None:
    assert (recommend_bands(0.8, 128).bands, recommend_bands(0.8, 128).rows) == (16, 8)
    assert recommend_bands(0.3, 128).bands == 64
    assert 0.65 < recommend_bands(0.8, 128).midpoint < 0.8


def test_tune_store_at_a_threshold_keeps_the_stores_own(tmp_path: Path) -> None:
    """`tune --store X --threshold T` was refused ("give --store … or --threshold"): what a
    store's candidates hold at a threshold of the user's is measured, and the store's own
    threshold stays as it was read."""
    records = tmp_path / "people.csv"
    api.generate(2000, records, kind="people")
    url = f"sqlite:///{tmp_path / 'p.db'}"
    api.index([records], url)
    own = api.tune_store(url)
    at = neardup("tune", "--store", url, "--threshold", "0.3")
    assert at.returncode == 0, at.stderr
    assert "Jaccard 0.3 is a candidate with probability" in at.stdout
    assert "estimated candidate recall" in at.stdout
    lower = api.tune_store(url, threshold=0.3)
    assert lower.threshold == 0.3 and sum(lower.histogram) == sum(own.histogram)
    assert api.stats(url)["rules_in_effect"]["threshold"] == own.threshold


def test_tune_store_says_the_store_keeps_a_threshold_given_at_index(tmp_path: Path) -> None:
    """`tune --store` on a store indexed with --threshold printed only the threshold read from
    the data, as if lookups would apply it: it names the store's own, which every command
    applies, and leaves it as it was."""
    records = tmp_path / "people.csv"
    api.generate(2000, records, kind="people")
    url = f"sqlite:///{tmp_path / 'p.db'}"
    api.index([records], url, threshold=0.7)
    tuned = neardup("tune", "--store", url)
    assert tuned.returncode == 0, tuned.stderr
    read = api.tune_store(url)
    assert read.threshold != 0.7 and read.kept_threshold == 0.7
    assert read.kept_how == "the one the store was indexed for"
    assert (
        "the store keeps its own threshold 0.7 (the one the store was indexed for), which every "
        f"command applies; {read.threshold:g} is --threshold auto's"
    ) in tuned.stdout
    assert api.rules_for(url).threshold == 0.7
    automatic = f"sqlite:///{tmp_path / 'auto.db'}"
    api.index([records], automatic)
    assert "keeps its own" not in neardup("tune", "--store", automatic).stdout
    assert api.tune_store(automatic).kept_how is None


def test_tune_store_estimates_the_recall_from_the_records_its_report_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tune --store` estimated the candidate recall once its report had ended, reading the
    contents of the pairs' records again: another process that deleted one of them meanwhile
    made it end in a traceback (KeyError). The estimate is made in the report's one state."""
    records = tmp_path / "people.csv"
    api.generate(2000, records, kind="people")
    url = f"sqlite:///{tmp_path / 'p.db'}"
    api.index([records], url)
    expected = api.tune_store(url)
    near = next(p for p in api.report(url) if p.kind == "near")
    remember, deleted = SQLiteStore.remember, []

    def deleted_after_the_report(store: SQLiteStore, settings: dict) -> None:
        remember(store, settings)
        if "last_report" in settings and not deleted:
            deleted.append(api.delete([near.left_id], url))

    monkeypatch.setattr(SQLiteStore, "remember", deleted_after_the_report)
    tuned = api.tune_store(url)
    assert deleted  # the delete landed between
    assert tuned.estimated_candidate_recall == expected.estimated_candidate_recall
    assert (tuned.threshold, tuned.histogram) == (expected.threshold, expected.histogram)


def test_a_report_says_the_threshold_it_applied_whatever_reports_land_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`neardup report` printed the threshold, the histogram and the review flags of the
    store's last report, read once its own had ended: another process's report at a
    threshold of its own (a nightly job's), landing between, was said as this one's. It says
    what its own report measured."""
    records = tmp_path / "people.csv"
    api.generate(2000, records, kind="people")
    url = f"sqlite:///{tmp_path / 'p.db'}"
    api.index([records], url)
    expected = neardup("report", "--store", url, "-o", str(tmp_path / "expected.tsv"))
    remember, others = SQLiteStore.remember, []

    def another_report_after(store: SQLiteStore, settings: dict) -> None:
        remember(store, settings)
        if "last_report" in settings and not others:
            others.append(url)
            api.report(url, rules={"threshold": 0.95})

    monkeypatch.setattr(SQLiteStore, "remember", another_report_after)
    reported = neardup("report", "--store", url, "-o", str(tmp_path / "reported.tsv"))
    assert others  # the other report landed between
    assert reported.stderr.splitlines()[1:-1] == expected.stderr.splitlines()[1:-1]
    assert reported.stderr.splitlines()[1].startswith("threshold 0.")
    files = [(tmp_path / f"{name}.tsv").read_text() for name in ("expected", "reported")]
    assert files[0] == files[1]


def test_tune_cli_json_is_the_formula() -> None:
    rows = json.loads(neardup("tune", "--threshold", "0.7", "--num-hashes", "64", "--json").stdout)
    assert [r["bands"] for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert sum(r["recommended"] for r in rows) == 1
    table = neardup("tune", "--threshold", "0.7", "--num-hashes", "64").stdout
    assert "<- recommended" in table
    assert_user_error(neardup("tune", "--threshold", "1.5"), "between 0 and 1")


# --- a threshold read from the data ---------------------------------------------------------------


def test_the_threshold_sits_in_the_valley_between_two_humps() -> None:
    histogram = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    histogram[3:12] = [40, 300, 900, 700, 300, 120, 40, 10, 2]  # records sharing a street
    histogram[40:50] = [3, 8, 20, 40, 60, 80, 90, 95, 99, 120]  # the near-duplicates
    choice = choose_threshold(histogram, 0.5)
    assert choice.from_data and "the valley below the hump at" in choice.reason
    assert 0.24 <= choice.threshold <= 0.80  # in the empty run between the humps


def test_a_plateau_above_a_falling_tail_is_split_where_otsu_splits_it() -> None:
    """References in large groups (Cora): no valley, but an even spread of near-duplicates
    from 0.3 up stands above the tail of pairs that share a venue or a year."""
    histogram = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    histogram[:16] = [9000, 7000, 5000, 3000, 2000, 1400, 900, 700, 550, 450] + [400] * 6
    histogram[16:49] = 450  # the near-duplicates, spread evenly
    choice = choose_threshold(histogram, 0.5)
    assert choice.from_data and choice.reason.startswith("no valley; Otsu's split")
    assert 0.2 <= choice.threshold <= 0.4
    # One falling hump and nothing else: its split has too few pairs above it to count.
    tail = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    tail[:12] = [9000, 7000, 5000, 3000, 2000, 1400, 900, 500, 300, 150, 60, 20]
    assert choose_threshold(tail, 0.5) == ThresholdChoice(0.24, True, TAIL_END)


def test_with_no_valley_the_contents_nearest_similarities_are_split() -> None:
    """Amazon-Google's software listings: the pairs fall steadily, true pairs spread through
    them (F1 0.541 at the fallback 0.5, the best 0.555 at 0.54). One count per content, of its
    most similar other content, splits those with a near-duplicate from the rest at 0.56."""
    # fmt: off
    pairs = np.array([
        4995, 25921, 47482, 40031, 32493, 27512, 21572, 16256, 12413, 9844, 7777, 6299, 5490,
        4482, 3653, 2899, 2452, 1871, 1579, 1319, 1142, 1051, 918, 779, 675, 619, 567, 496, 424,
        369, 369, 294, 256, 252, 238, 228, 184, 159, 159, 151, 99, 70, 55, 52, 55, 53, 16, 4, 1, 3,
    ])
    nearest = np.array([
        8, 1, 5, 9, 11, 17, 23, 27, 36, 40, 51, 55, 58, 57, 65, 57, 86, 90, 87, 76, 101, 100, 122,
        114, 130, 134, 137, 156, 162, 137, 170, 173, 162, 185, 175, 165, 170, 164, 133, 135, 135,
        88, 80, 91, 66, 45, 29, 8, 2, 106,
    ])
    # fmt: on
    # The pairs never thin out on their way to 1, so no tail ends either.
    assert choose_threshold(pairs, 0.5) == ThresholdChoice(
        0.5, False, "no valley between two humps"
    )
    choice = choose_threshold(pairs, 0.5, nearest)
    assert choice == ThresholdChoice(
        0.56, True, "no valley; Otsu's split of each content's nearest similarity"
    )
    # What `report` and `tune --store` print: the histogram the threshold was read from.
    shown = histogram_text(pairs, choice.threshold, f"auto: {choice.reason}", nearest)
    assert shown.count("<- threshold") == 2
    assert "similarity  contents, at the nearest other one (log scale)" in shown
    assert "contents, at" not in histogram_text(pairs, 0.5, "auto: a valley", nearest)
    # Contents whose nearest others all lie low (no near-duplicates): nothing to split.
    alone = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    alone[5:25] = np.linspace(300, 10, 20).astype(np.int64)
    assert not choose_threshold(pairs, 0.5, alone).from_data


def test_a_falling_tail_that_bends_into_a_plateau_or_a_shoulder_is_read_at_the_bend() -> None:
    """Historical people in groups of 3 to 21, each record's copies far apart (splink's
    50,578 records with errors): no valley, and every content has a near-duplicate, so each
    content's nearest similarity makes one hump that Otsu split at 0.72 (F1 0.392). The log of
    the pairs falls from their peak and bends into a plateau of near-duplicates at 0.45, the
    best threshold for F1 (0.739)."""
    # fmt: off
    pairs = np.array([
        2749874, 8914564, 8527792, 5799546, 4220143, 3491651, 2183986, 1298538, 842667, 587885,
        435329, 337646, 267393, 211339, 174680, 152281, 129526, 101640, 76221, 55964, 41437,
        31142, 24738, 19389, 15836, 13765, 12497, 11661, 10681, 10331, 9880, 9722, 9327, 9024,
        8770, 8156, 7622, 7148, 6652, 6329, 5942, 5535, 5322, 4796, 4352, 3955, 3120, 2485, 662,
        79,
    ])
    nearest = np.array([
        9, 0, 1, 0, 0, 3, 2, 7, 14, 13, 27, 34, 44, 67, 69, 128, 161, 195, 232, 255, 302, 366,
        457, 553, 593, 659, 778, 926, 945, 1029, 1182, 1279, 1411, 1509, 1507, 1689, 1701, 1794,
        1750, 1839, 1886, 2011, 2016, 2005, 2072, 2140, 1908, 1606, 497, 4278,
    ])
    # fmt: on
    assert choose_threshold(pairs, 0.5, nearest) == ThresholdChoice(0.45, True, KNEE)
    # Payments as two ledgers record them (splink's 45,326 pairs): the tail bends into a
    # shoulder at 0.53 and the pairs fall again before 1, so no line from the bend to the last
    # pair is flat; the 8 bins above it are. The tail's end, at 0.94, listed none.
    # fmt: off
    shoulder = np.array([
        400, 51711, 1359167, 3454118, 3519666, 3204775, 2998002, 2732221, 2393478, 2020451,
        1675354, 1368325, 1117762, 917588, 749484, 591742, 449914, 340961, 255149, 185817,
        131749, 88394, 61888, 43749, 31565, 21979, 15482, 11381, 8544, 7135, 6568, 6368, 6302,
        5931, 5487, 4355, 3170, 2151, 1394, 1024, 804, 804, 938, 1185, 915, 127, 12, 0, 0, 0,
    ])
    # fmt: on
    assert choose_threshold(shoulder, 0.5) == ThresholdChoice(0.53, True, KNEE)
    # A plateau of a pair or two a bin is noise, not near-duplicates: the tail's end instead.
    sparse = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    sparse[:12] = [9000, 7000, 5000, 3000, 2000, 1400, 900, 500, 300, 150, 60, 20]
    sparse[12:40] = [2, 1] * 14
    assert choose_threshold(sparse, 0.5).reason != KNEE
    # Pairs that fall faster above any break (two shops' listings) bend into no plateau: see
    # test_with_no_valley_the_contents_nearest_similarities_are_split.


def test_a_hump_too_low_for_copies_gives_way_to_the_valley_of_the_nearest_similarities() -> None:
    """SIGMOD 2022's notebook titles: different models titled alike make a hump of their own at
    0.39, and the valley below it (0.27) listed 28,475 pairs, 9.5% true (F1 0.173). A hump that
    peaks under MIN_HUMP holds no copies. The contents' nearest similarities dip between the
    models and the copies: their split, 0.76, lists 4,883 pairs (F1 0.482; the best 0.514)."""
    # fmt: off
    pairs = np.array([
        16246, 63256, 57404, 42781, 25582, 11835, 6065, 2912, 1579, 895, 960, 821, 806, 852,
        737, 993, 1267, 1165, 1701, 2020, 1436, 1327, 1283, 965, 880, 806, 662, 600, 702, 561,
        807, 737, 666, 813, 860, 803, 636, 762, 790, 532, 548, 620, 495, 386, 320, 200, 433, 186,
        51, 20,
    ])
    nearest = np.array([
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 3, 0, 3, 2, 5, 0, 8, 10, 20, 22, 24, 49, 37,
        57, 55, 60, 53, 28, 42, 35, 19, 24, 39, 21, 15, 28, 16, 33, 26, 37, 56, 124, 133, 96, 245,
    ])
    # fmt: on
    assert choose_threshold(pairs, 0.5, nearest) == ThresholdChoice(0.76, True, NEAREST_VALLEY)
    # Nearest similarities spread in one hump (Amazon-Google's) make no valley: see
    # test_with_no_valley_the_contents_nearest_similarities_are_split.


def test_a_shallow_valley_above_a_steep_tail_is_a_valley() -> None:
    """A million generated person records: the pairs that share a city fall by half a bin into
    a flat hump of near-duplicates, and the dip between them is 0.53 of the hump's height."""
    # fmt: off
    histogram = np.array([
        34504, 1185631, 3261856, 3461369, 3485048, 3373844, 3094803, 2616468, 2037764, 1540992,
        1192165, 994398, 846376, 736883, 683996, 678956, 702814, 734223, 761038, 764411, 720095,
        622419, 484859, 335862, 205013, 112469, 56243, 26093, 11555, 5784, 3777, 3516, 3662,
        4258, 4921, 5321, 5791, 6195, 6393, 6675, 6845, 6932, 6519, 6114, 6114, 7503, 6924,
        2737, 647, 325,
    ])
    # fmt: on
    choice = choose_threshold(histogram, 0.5)
    assert choice.from_data and choice.reason.startswith("the valley")
    # F1 0.949 at 0.63, the best 0.959 at 0.60 (document frequencies counted whole, as then)
    assert 0.6 <= choice.threshold <= 0.65


def test_two_low_humps_of_records_with_no_duplicates_are_no_valley() -> None:
    """10,000 generated people with their copies taken out: pairs of different people in one
    city make a hump at 0.22 above a valley at 0.15. Below half their weight shared, records are
    not near-duplicates, so that hump is not theirs: the threshold is where their tail ends."""
    # fmt: off
    histogram = np.array([
        17007, 162930, 110789, 97096, 74601, 52266, 29494, 24488, 27260, 48632, 213132, 212632,
        98412, 47799, 37424, 26062, 18935, 14212, 8770, 4874, 2410, 1155, 583, 248, 112, 48, 27,
        9, 8, 1, *[0] * 20,
    ])
    # fmt: on
    assert choose_threshold(histogram, 0.5) == ThresholdChoice(0.58, True, TAIL_END)
    # The same pairs with a hump of near-duplicates above half their weight: the valley below it.
    histogram[40:48] = [200, 900, 2000, 3000, 2500, 1500, 600, 100]
    choice = choose_threshold(histogram, 0.5)
    assert choice.from_data and 0.6 <= choice.threshold < 0.8


def test_with_no_valley_the_threshold_is_where_the_tail_thins_out() -> None:
    """Records with no near-duplicates, or too few to make a hump: their pairs fall from one
    hump, and the threshold is the first bin where fewer than 3 pairs fill 3 bins. No two
    records held are that similar, and the few near-duplicates above it are listed."""
    one_hump = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    one_hump[2:10] = [50, 400, 900, 600, 300, 100, 30, 5]
    assert choose_threshold(one_hump, 0.5) == ThresholdChoice(0.2, True, TAIL_END)
    # A sparse end (1, 2, 0, 1, 1, 0: two pairs in 3 bins at 0.24), and 5 copies far above.
    one_hump[10:16] = [1, 2, 0, 1, 1, 0]
    one_hump[[40, 44, 45, 47]] = [1, 2, 1, 1]
    assert choose_threshold(one_hump, 0.5) == ThresholdChoice(0.24, True, TAIL_END)


def test_the_tail_ends_above_a_hump_too_unlike_to_be_copies() -> None:
    """Every pair of fifty people: most share nothing (0), pairs of one town make a second
    hump at 0.3, too low for near-duplicates. The tail ends above that hump, not between the
    two."""
    pairs = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    pairs[:8] = [2800, 366, 213, 141, 48, 24, 15, 6]
    pairs[13:20] = [3, 9, 27, 9, 6, 6, 6]
    assert pairs.sum() >= MIN_TAIL_PAIRS
    assert choose_threshold(pairs, 0.5) == ThresholdChoice(0.4, True, TAIL_END)
    # A wide low hump, and 19 copies at 0.9, too few for a hump of their own but a higher bin:
    # the tail is read above the low hump's own peak, and the copies stay above it.
    pairs[8:] = 0
    pairs[13:25] = 5
    pairs[45] = 19
    assert choose_threshold(pairs, 0.5) == ThresholdChoice(0.5, True, TAIL_END)


def test_too_few_pairs_fall_back() -> None:
    few = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    few[[5, 48]] = [3, 4]
    assert choose_threshold(few, 0.6) == ThresholdChoice(
        0.6, False, "7 candidate pairs, too few to read"
    )
    assert MIN_CANDIDATES > 7
    # One hump of a few hundred pairs: beside its peak, less than a pair a bin already.
    one_hump = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    one_hump[:6] = [300, 200, 100, 30, 5, 1]
    assert choose_threshold(one_hump, 0.6) == ThresholdChoice(
        0.6, False, "636 candidate pairs, too few to read"
    )
    one = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
    one[40] = 1
    assert choose_threshold(one, 0.6).reason == "1 candidate pair, too few to read"
    assert MIN_TAIL_PAIRS > 636


def _reported(
    tmp_path: Path, kind: str, count: int, seed: int, duplicates: float
) -> tuple[set[tuple[str, str]], api.Measured, set[tuple[str, ...]], str]:
    """A generated store indexed and reported with no flags: the pairs listed, what the
    report measured, the true pairs, and the store's URL."""
    records, truth = tmp_path / f"{kind}.tsv", tmp_path / f"{kind}-truth.tsv"
    write_corpus(records, truth, count, kind=kind, seed=seed, duplicates=duplicates)
    url = f"sqlite:///{tmp_path / f'{kind}.db'}"
    api.index([records], url)
    listed = {(p.left_id, p.right_id) for p in api.report(url)}
    true = {tuple(sorted(line.split("\t")[:2])) for line in truth.read_text().splitlines()[1:]}
    return listed, api.last_report(url), true, url


def test_a_small_store_reads_its_threshold_from_every_pair(tmp_path: Path) -> None:
    """Sixty generated people make too few candidate pairs to read where their tail ends;
    every pair of them is 1,770, and the threshold read from those lists the copies and
    nearly nothing else, where the candidates' tail listed 26 pairs for 7 copies. Ten people
    make 45 pairs in all: the fallback, said as such."""
    listed, chosen, true, url = _reported(tmp_path, "people", 60, seed=1, duplicates=0.1)
    assert sum(chosen.histogram) < MIN_TAIL_PAIRS
    assert chosen.how.endswith(f"too few; all 1,770 pairs of records: {TAIL_END}")
    assert true <= listed and len(listed - true) <= 1
    with api.opened(url) as store:  # a lookup applies the same threshold
        assert api.rules_for(store).threshold == chosen.threshold
    # With the first-word filter, only pairs of one first word are candidates, and counted.
    hundred = tmp_path / "hundred.tsv"
    write_corpus(hundred, None, 100, kind="people", seed=1, duplicates=0.0)
    lines = hundred.read_text().splitlines()
    split = tmp_path / "split.tsv"
    split.write_text(
        "\n".join(
            [lines[0]]
            + [f"{i}\t{'alpha' if n % 2 else 'beta'} {text}" for n, (i, text) in
               enumerate(line.split("\t", 1) for line in lines[1:])]
        )
        + "\n"
    )  # fmt: skip
    filtered = f"sqlite:///{tmp_path / 'split.db'}"
    api.index([split], filtered)
    api.report(filtered, rules={"first_word": True})
    assert "all 2,450 pairs of records" in api.last_report(filtered).how  # 2 x 50 x 49 / 2
    ten = tmp_path / "ten.tsv"
    write_corpus(ten, None, 10, kind="people", seed=1, duplicates=0.0)
    small = f"sqlite:///{tmp_path / 'ten.db'}"
    api.index([ten], small)
    api.report(small)
    assert api.last_report(small).how.endswith(
        "pairs of records in all: too few to read; the fallback"
    )


def test_a_large_store_of_few_candidates_reads_its_threshold_from_a_sample(
    tmp_path: Path, monkeypatch
) -> None:
    """Past EVERY_PAIR_CONTENTS contents, a store whose candidates are too few reads the
    threshold from every pair of that many of its contents, spaced evenly: 600 documents, 4 of
    them copies, make 461 candidate pairs; the pairs of 300 of them list the copies."""
    # the module, which the package's report function hides
    monkeypatch.setattr(sys.modules["neardup.report"], "EVERY_PAIR_CONTENTS", 300)
    listed, chosen, true, url = _reported(tmp_path, "documents", 600, seed=3, duplicates=0.01)
    assert "; 44,850 pairs of records in a sample of 300 of the store's 600 contents: " in (
        chosen.how
    )
    assert len(true) == 4 and true <= listed and len(listed - true) <= 1
    with api.opened(url) as store:
        assert api.rules_for(store).threshold == chosen.threshold


def test_every_command_gives_one_answer_whether_or_not_a_report_ran(tmp_path: Path) -> None:
    """The automatic threshold is read from the records by whichever command needs it first,
    so lookup, explain, dedup and report agree in any order; an index run that changes the
    records forgets it (one that gives them again unchanged keeps it)."""
    records = corpus(tmp_path / "records.txt")
    first, second = (
        f"sqlite:///{tmp_path / name}" for name in ("lookup-first.db", "report-first.db")
    )
    for url in (first, second):
        api.index([records], url)
    pairs = api.report(second)
    pair = next(p for p in pairs if p.kind == "near")
    ids = [pair.left_id, pair.right_id]

    def answers(url: str) -> tuple:
        """Each command in turn, the report last: on ``first``, explain is the first to ask."""
        explained = api.explain(url, ids=ids).reason
        found = [m.id for m in api.lookup(url, id=pair.left_id)]
        dedup = io.StringIO()
        api.dedup(records, dedup, url)
        return explained, found, dedup.getvalue(), api.report(url)

    assert answers(first) == answers(second)
    assert api.stats(first)["rules_in_effect"]["threshold"] == api.last_report(second).threshold
    api.index([records], first)  # given again unchanged: the same records
    assert api.stats(first)["rules_in_effect"]["threshold"] == api.last_report(second).threshold
    more = tmp_path / "more.csv"
    more.write_text("id,text\nnew-1,an entirely new record about nothing in particular\n")
    api.index([more], first)
    assert api.stats(first)["rules_in_effect"]["threshold"] is None  # read again when needed


def test_a_threshold_read_before_records_were_deleted_is_read_from_those_left(
    tmp_path: Path,
) -> None:
    """Deleting 1,999 of 3,000 documents kept the threshold read from all 3,000 (0.45), where
    a store of the 1,001 left reads 0.49: the answers depended on the store's past. A delete
    run forgets it, as an index run does; the service's deletes, one a request, forget it once
    the store has halved, as its adds do once it has doubled."""
    docs, left = tmp_path / "docs.tsv", tmp_path / "left.tsv"
    api.generate(3000, docs)
    lines = docs.read_text().splitlines(keepends=True)
    left.write_text(lines[0] + "".join(lines[2000:]))
    deleted = [line.split("\t")[0] for line in lines[1:2000]]
    fresh, used = f"sqlite:///{tmp_path / 'fresh.db'}", f"sqlite:///{tmp_path / 'used.db'}"
    api.index([left], fresh)
    api.index([docs], used)
    before = api.report(used)
    assert api.delete(deleted, used).removed == 1999
    assert api.stats(used)["rules_in_effect"]["threshold"] is None  # read again when needed
    assert api.report(used) == api.report(fresh)
    assert api.last_report(used).threshold == api.last_report(fresh).threshold
    api.index([docs], used)
    assert api.report(used) == before
    api.delete(deleted[:1499], used, few=True)  # 1,501 of 3,000 left
    assert api.stats(used)["rules_in_effect"]["threshold"] == api.last_report(used).threshold
    api.delete(deleted[1499:1500], used, few=True)  # halved
    assert api.stats(used)["rules_in_effect"]["threshold"] is None


def test_a_small_stores_fallback_is_read_again_as_records_arrive(tmp_path: Path) -> None:
    """A store fed record by record (the service's add) that is asked while it holds ten
    records falls back, and does not keep it: once it holds enough, it reads the threshold
    a store indexed with the same records at once reads."""
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 1_000, kind="people", seed=4)
    records = list(RecordReader(path))
    fed, whole = (f"sqlite:///{tmp_path / name}" for name in ("fed.db", "whole.db"))
    api.add(records[:10], fed)
    api.lookup(fed, id=records[0].id)
    assert api.stats(fed)["rules_in_effect"]["threshold"] is None
    for start in range(10, len(records), 330):
        api.add(records[start : start + 330], fed)
    api.index([path], whole)
    with api.opened(fed) as store:
        chosen = api.rules_for(store).threshold
    with api.opened(whole) as store:
        assert chosen == api.rules_for(store).threshold != api.FALLBACK_THRESHOLD
    assert not api.stats(fed)["rules_from"]["threshold"].endswith("the fallback")


def test_records_added_one_by_one_keep_the_threshold_until_the_store_doubles(
    tmp_path: Path,
) -> None:
    """A threshold read from a store's records holds while records are added one by one, until
    the store holds twice the records it was read from: the next command then reads it again.
    Once records are checked at it (``if_unique``), adds keep it."""
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 1_000, kind="people", seed=7)
    records = list(RecordReader(path))
    url = f"sqlite:///{tmp_path / 'fed.db'}"

    def threshold_source() -> str:
        return api.stats(url)["rules_from"]["threshold"]

    api.add(records[:110], url)
    api.lookup(url, id=records[0].id)
    read = threshold_source()
    api.add(records[110:219], url)
    assert threshold_source() == read
    api.add(records[219:220], url)  # twice the 110 it was read from
    assert threshold_source() == "auto: read from the records by the next command that needs it"
    api.lookup(url, id=records[0].id)
    again = threshold_source()
    assert again.startswith("auto: ") and "next command" not in again
    api.add(records[220:230], url, if_unique=True)  # checked at it: adds keep it now
    api.add(records[230:], url)
    assert threshold_source() == again


def test_a_store_checked_as_records_arrive_reads_its_threshold_from_its_checks(
    tmp_path: Path,
) -> None:
    """Records checked 50 at a time as they arrive (the service's ``if_unique`` add): the store
    keeps no two records that similar, so its records alone read a threshold far too low
    (402 of 1,346 people refused as duplicates of others); what the checks measured holds
    each refused record's similarity to the one it duplicates, and reads the valley."""
    path, truth = tmp_path / "people.tsv", tmp_path / "truth.tsv"
    write_corpus(path, truth, 1_500, kind="people", seed=12)
    records = list(RecordReader(path))
    url = f"sqlite:///{tmp_path / 'arriving.db'}"
    for start in range(0, len(records), 50):
        api.add(records[start : start + 50], url, if_unique=True)
    with api.opened(url) as store:
        kept = set(store.iter_ids())
    pairs = [Pair(a, b, 0, 1.0, 0, "near") for a, b in read_pairs(truth)]
    people = [set(group) for group in api.clusters(pairs)]
    alone = len(records) - sum(len(group) for group in people)
    assert all(len(group & kept) == 1 for group in people)  # one record of each family
    assert len(kept) >= (len(people) + alone) * 0.99  # and the others, all but a few
    how = api.stats(url)["rules_from"]["threshold"]
    assert how.startswith("auto: read from the pairs the checks of")
    assert "the valley" in how
    # tune --store shows the pairs the threshold was read from: the checks', not the records'
    # kept, which have lost the duplicates' hump.
    tuned = api.tune_store(url)
    with api.opened(url) as store:
        checked = store.settings["checked_pairs"]
    assert (tuned.histogram, tuned.checked_records) == (checked["histogram"], len(records))
    kept_pairs = api.last_report(url).histogram
    assert tuned.candidate_pairs == sum(kept_pairs) != sum(tuned.histogram)
    at = int(tuned.threshold * len(kept_pairs))  # the hump above the threshold: the checks' alone
    assert sum(tuned.histogram[at:]) > 10 * sum(kept_pairs[at:])
    assert f"by the checks of {len(records):,} records" in store_tuning(tuned)


def test_a_store_mostly_indexed_without_a_check_reads_its_threshold_from_its_records(
    tmp_path: Path,
) -> None:
    """One record checked before thousands are indexed plainly: the checks no longer speak for
    the store, whose records hold their duplicates, so it reads its threshold as a store
    never checked does, not the checks' fallback."""
    path = tmp_path / "people.tsv"
    write_corpus(path, None, 3_000, kind="people", seed=5)
    records = list(RecordReader(path))
    plain, mixed = f"sqlite:///{tmp_path / 'plain.db'}", f"sqlite:///{tmp_path / 'mixed.db'}"
    api.add([Record("early", "a record checked before the others came")], mixed, if_unique=True)
    for url in (plain, mixed):
        api.add(records, url)
    with api.opened(mixed) as store:
        assert store.settings["checked_pairs"]["records"] == 1
    assert api.stats(mixed)["rules_from"] == api.stats(plain)["rules_from"]
    for url in (plain, mixed):
        api.report(url)
    unchecked, checked = (api.last_report(url) for url in (plain, mixed))
    assert checked.threshold == unchecked.threshold != api.FALLBACK_THRESHOLD
    assert checked.how == unchecked.how


def test_lookups_at_once_on_a_new_store_read_its_threshold_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's first lookups arrive together: one reads the store's threshold (a
    report's work) and the others use what it remembered, each on its own connection."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    api.index([corpus(tmp_path / "records.txt")], url)
    readings = []

    def counted(*args, **kwargs):
        readings.append(1)
        return find_pairs(*args, **kwargs)

    monkeypatch.setattr(api, "find_pairs", counted)
    answers: list[float] = []

    def look_up() -> None:
        with api.opened(url) as own:
            answers.append(api.rules_for(own).threshold)

    threads = [threading.Thread(target=look_up) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(readings) == 1 and len(set(answers)) == 1 and len(answers) == 4


def test_lookups_use_the_threshold_the_report_chose(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'auto.db'}"
    api.index([corpus(tmp_path / "records.txt")], url)
    pairs = api.report(url)
    measured = api.last_report(url)
    assert measured.how.startswith("auto: the valley") and measured.threshold != 0.5
    assert sum(measured.histogram) >= len([p for p in pairs if p.kind == "near"])
    with api.opened(url) as store:
        assert api.rules_for(store).threshold == measured.threshold
    left = pairs[0].left_id
    reported = sorted(
        p.right_id if p.left_id == left else p.left_id
        for p in pairs
        if left in (p.left_id, p.right_id)
    )
    assert sorted(m.id for m in api.lookup(url, id=left, rules={"candidates": 100})) == reported
    printed = neardup("tune", "--store", url)
    assert f"threshold {measured.threshold:g} ({measured.how})" in printed.stdout
    assert "<- threshold" in printed.stdout
    # What the store's bands promise at that threshold, and how many pairs were measured.
    tuned = json.loads(neardup("tune", "--store", url, "--json").stdout)
    # $NEARDUP_STORE names the store, as for every command: 'give --store' before.
    from_env = json.loads(neardup("tune", "--json", env={"NEARDUP_STORE": url}).stdout)
    assert {**from_env, "seconds": None} == {**tuned, "seconds": None}  # seconds vary
    params = api.stats(url)["parameters"]
    rows = params["num_hashes"] // params["bands"]
    chance = 1 - (1 - measured.threshold**rows) ** params["bands"]
    assert (tuned["bands"], tuned["rows"]) == (params["bands"], rows)
    assert tuned["candidate_probability"] == pytest.approx(chance)
    assert tuned["candidate_pairs"] == sum(measured.histogram)
    assert f"{sum(measured.histogram):,} candidate pairs of records measured" in printed.stdout
    assert f"is a candidate with probability {chance:.4f}" in printed.stdout
    assert "report --exact lists every pair at or above the threshold" in printed.stdout
    # The candidate recall read from the pairs reported: each stands for 1 / P(its Jaccard).
    with api.opened(url) as store:
        held = store.get([i for p in pairs for i in (p.left_id, p.right_id)])
        contents = {i: record.content for i, record in held.items()}
        shingles = {c: shingle_sets([c], store.params)[0] for c in set(contents.values())}
    near = [p for p in pairs if p.kind == "near"]
    jaccards = np.array(
        [jaccard(shingles[contents[p.left_id]], shingles[contents[p.right_id]]) for p in near]
    )
    expected = len(near) / (1 / (1 - (1 - jaccards**rows) ** params["bands"])).sum()
    assert tuned["estimated_candidate_recall"] == pytest.approx(expected)
    assert f"estimated candidate recall {expected:.3f}" in printed.stdout


def test_the_candidate_recall_is_estimated_from_the_pairs_found() -> None:
    """One band of one row makes a pair of Jaccard s a candidate with probability s: a pair
    found at 0.5 stands for two pairs, one of them missed."""
    assert estimated_candidate_recall(np.array([1.0, 0.5]), 1, 1) == pytest.approx(2 / 3)
    assert estimated_candidate_recall(np.array([0.9, 1.0]), 64, 2) == pytest.approx(1.0)
    assert estimated_candidate_recall(np.array([]), 64, 2) is None


# --- exact report ---------------------------------------------------------------------------------


def _records(texts: dict[str, str], params: FingerprintParams) -> list[StoredRecord]:
    fps = fingerprint_batch(list(texts.values()), params)
    return [
        StoredRecord(i, fp.content, fp.md5, fp.first_word, fp.num_words)
        for i, fp in zip(texts, fps, strict=True)
    ]


@pytest.mark.parametrize("similarity", SIMILARITIES)
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8])
@pytest.mark.parametrize(
    "params", [FingerprintParams("word", 1, 8, 2), FingerprintParams("char", 3, 8, 2)]
)
def test_exact_report_equals_brute_force(
    threshold: float, params: FingerprintParams, similarity: str, monkeypatch
) -> None:
    # Sets of 1 to 40 words: the cosine's prefix ends by its norm's share for short sets and
    # by the shingles' largest weights for long ones.
    rng = random.Random(5)
    words = [f"w{i}" for i in range(25)]
    texts = {f"r{i:03d}": " ".join(rng.choices(words, k=rng.randint(1, 40))) for i in range(200)}
    texts |= {"copy-a": texts["r000"], "copy-b": texts["r000"]}
    records = _records(texts, params)
    numbers, offsets, distinct = shingle_numbers([r.content for r in records], params)
    weights = np.random.default_rng(1).uniform(0.2, 3.0, len(distinct))  # any positive weights
    by_hash = dict(zip(distinct.tolist(), weights.tolist(), strict=True))

    def weigh(hashes: np.ndarray) -> np.ndarray:
        return np.array([by_hash[h] for h in hashes.tolist()])

    left, right = np.triu_indices(len(records), 1)
    weighed = None if similarity == "jaccard" else weights
    # "w12 w3" holds the numerals 12 and 3: the words' numerals differ as the words do.
    numerals = Numerals([r.content for r in records]) if similarity == "numerals" else None
    every = pair_similarities(numbers, len(distinct), weighed, offsets, left, right, numerals)
    expected = {
        tuple(sorted((records[a].id, records[b].id))): 1.0 if same else value
        for a, b, value in zip(left.tolist(), right.tolist(), every.tolist(), strict=True)
        if (same := records[a].md5 == records[b].md5) or value >= threshold
    }
    rules = MatchRules(threshold=threshold, similarity=similarity)
    found = exact_pairs(records, params, rules, weigh)
    assert {(p.left_id, p.right_id): p.similarity for p in found} == expected
    assert len(expected) > 3
    exact = {(p.left_id, p.right_id) for p in found if p.kind == "exact"}
    assert {("copy-a", "copy-b"), ("copy-a", "r000"), ("copy-b", "r000")} <= exact
    # Pairs found a range of sets at a time give the same pairs, each once.
    monkeypatch.setattr("neardup.exact.PAIRS_PER_STEP", 50)
    assert exact_pairs(records, params, rules, weigh) == found


def test_the_exact_report_measures_what_the_report_does(store, tmp_path: Path) -> None:
    """Every pair at or above the store's threshold, of the store's similarity: the report's
    pairs among them with the same floats, whichever runs first."""
    lines = corpus(tmp_path / "records.txt", size=300).read_text().splitlines()
    index_records(store, [Record(*line.split(" ", 1)) for line in lines])
    exact = api.report(store, exact=True)  # reads the automatic threshold first
    pairs = api.report(store)
    measured = api.last_report(store)
    assert measured is not None and measured.how.startswith("auto")
    assert set(pairs) <= set(exact)  # the same similarities, distances and shared tokens
    # Brute force over every pair of records, weighed as the store weighs its shingles, times
    # the agreement of their numerals (the default similarity).
    stored = [r for batch in store.iter_records() for r in batch]
    contents = [r.content for r in stored]
    numbers, offsets, distinct = shingle_numbers(contents, store.params)
    weights = store.frequencies(distinct.view(np.int64)).weights(distinct)
    left, right = np.triu_indices(len(stored), 1)
    every = pair_similarities(
        numbers, len(distinct), weights, offsets, left, right, Numerals(contents)
    )
    above = every >= measured.threshold - 1e-12
    expected = {
        frozenset((stored[a].id, stored[b].id))
        for a, b in zip(left[above].tolist(), right[above].tolist(), strict=True)
    }
    assert {frozenset((p.left_id, p.right_id)) for p in exact} == expected
    assert len(expected) > 20
    with pytest.raises(NeardupError, match="needs a --threshold"):
        api.report(store, rules={"threshold": 0}, exact=True)
    jaccard_pairs = api.report(store, rules={"similarity": "jaccard", "threshold": 0.5}, exact=True)
    assert jaccard_pairs and min(p.similarity for p in jaccard_pairs) >= 0.5
    assert {p.similarity for p in jaccard_pairs} != {p.similarity for p in exact}


# --- eval -----------------------------------------------------------------------------------------


def test_eval_counts_precision_recall_and_bands(tmp_path: Path) -> None:
    truth = tmp_path / "truth.tsv"
    truth.write_text(
        "row_a\trow_b\tjaccard_char5\n1\t2\t0.95\n3\t4\t0.85\n5\t6\t0.55\n8\t7\t0.75\n"
    )
    report = tmp_path / "report.csv"
    report.write_text(
        "left_id,right_id,edit_distance,similarity\n1,2,0,0.9\n4,3,1,0.8\n1,9,2,0.6\n7,8,1,0.7\n"
    )
    result = evaluate(read_pairs(truth), read_pairs(report))
    assert (result.overall.reported, result.overall.right, result.overall.true) == (4, 3, 4)
    assert result.overall.precision == 0.75 and result.overall.recall == 0.75
    # No band for [0.6, 0.7): no true pair lies there.
    assert result.recall_by_similarity == [
        (0.5, 0.6, 1, 0),
        (0.7, 0.8, 1, 1),
        (0.8, 0.9, 1, 1),
        (0.9, 1.0, 1, 1),
    ]
    at_065 = dict(result.by_threshold)[0.65]
    assert (at_065.reported, at_065.right) == (3, 3)
    # Below its least similarity (0.6) a report holds no pair to count: no row claims one.
    assert [t for t, _ in result.by_threshold][:2] == [0.6, 0.65]
    cli = neardup("eval", "--truth", str(truth), "--report", str(report), "--json")
    data = json.loads(cli.stdout)
    assert data["precision"] == 0.75 and data["f1"] == 0.75
    assert data["recall_by_similarity"][0] == {
        "from": 0.5,
        "to": 0.6,
        "true": 1,
        "found": 0,
        "recall": 0.0,
    }


def test_eval_reads_a_pair_file_a_spreadsheet_saved(tmp_path: Path) -> None:
    """Excel's CSV UTF-8 starts with a byte order mark, as neardup's CSV does: the first column
    is still found by its name."""
    saved = tmp_path / "pairs.csv"
    saved.write_text("\ufeffsimilarity,left_id,right_id\n0.9,1,2\n0.8,4,3\n", encoding="utf-8")
    assert read_pairs(saved) == {("1", "2"): 0.9, ("3", "4"): 0.8}


def test_eval_reads_a_truth_file_in_a_code_page_given_its_encoding(tmp_path: Path) -> None:
    """A truth file a spreadsheet on Windows saved as plain CSV: ids with accents were "cannot
    read pairs: 'utf-8' codec can't decode byte 0xe9", with no way to read it."""
    report, truth = tmp_path / "pairs.tsv", tmp_path / "truth.csv"
    report.write_text("left_id\tright_id\nCafé-1\tCafé-2\nCafé-3\tCafé-4\n")
    truth.write_bytes("left_id,right_id\nCafé-1,Café-2\n".encode("cp1252"))
    refused = neardup("eval", "--truth", str(truth), "--report", str(report))
    assert_user_error(refused, "line 2 holds the byte 0xE9, 'é' in Windows-1252): give --encoding")
    given = ("eval", "--truth", str(truth), "--report", str(report), "--json")
    scored = json.loads(neardup(*given, "--encoding", "windows-1252").stdout)
    assert (scored["precision"], scored["recall"]) == (0.5, 1.0)


def test_eval_rejects_a_file_that_is_not_pairs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("only\n1\n")
    assert_user_error(
        neardup("eval", "--truth", str(bad), "--report", str(bad)), "at least two columns"
    )


def test_eval_against_a_fresh_report_from_a_store(tmp_path: Path, sqlite_url: str) -> None:
    records = tmp_path / "r.txt"
    records.write_text(
        "1 alpha beta gamma delta\n2 alpha beta gamma delta epsilon\n3 other words\n"
    )
    truth = tmp_path / "truth.tsv"
    truth.write_text("a\tb\n2\t1\n")
    assert neardup("index", str(records), "--store", sqlite_url).returncode == 0
    data = json.loads(
        neardup("eval", "--truth", str(truth), "--store", sqlite_url, "--json").stdout
    )
    assert (data["precision"], data["recall"]) == (1.0, 1.0)


@pytest.mark.parametrize("written", ["groups.csv", "groups.tsv", "groups.jsonl", "groups.json"])
def test_eval_reads_groups_as_the_pairs_within_them(
    tmp_path: Path, sqlite_url: str, written: str
) -> None:
    """A report of groups (`report --clusters`) was read as pairs of its first two columns
    ('group' and 'size'): precision and recall 0. A truth file of entities (an id and its
    cluster a row) likewise."""
    records, truth = tmp_path / "people.csv", tmp_path / "truth.csv"
    api.generate(400, records, truth, kind="people")
    assert neardup("index", str(records), "--store", sqlite_url).returncode == 0
    pairs, groups = tmp_path / "pairs.csv", tmp_path / written
    assert neardup("report", "--store", sqlite_url, "-o", str(pairs)).returncode == 0
    grouped = neardup("report", "--store", sqlite_url, "--clusters", "-o", str(groups))
    assert grouped.returncode == 0
    by_pairs = json.loads(neardup("eval", "--truth", str(truth), "--report", str(pairs),
                                  "--json").stdout)  # fmt: skip
    by_groups = json.loads(neardup("eval", "--truth", str(truth), "--report", str(groups),
                                   "--json").stdout)  # fmt: skip
    assert by_groups["recall"] >= by_pairs["recall"] > 0.9  # groups hold their pairs, and more
    entities = tmp_path / "entities.csv"
    members = [(i, n) for n, (a, b) in enumerate(read_pairs(truth)) for i in (a, b)]
    entities.write_text("id,cluster_id\n" + "".join(f"{i},e{n}\n" for i, n in members))
    as_entities = json.loads(neardup("eval", "--truth", str(entities), "--report", str(pairs),
                                     "--json").stdout)  # fmt: skip
    assert as_entities["true"] == len(read_pairs(truth))


def test_eval_scores_no_threshold_below_the_reports(tmp_path: Path, sqlite_url: str) -> None:
    """The rows of thresholds under the report's own repeated its scores, as if a report at
    0.1 listed the pairs one at 0.55 does: they start at the report's threshold."""
    records, truth = tmp_path / "people.csv", tmp_path / "truth.csv"
    api.generate(400, records, truth, kind="people")
    assert neardup("index", str(records), "--store", sqlite_url).returncode == 0
    given = ("eval", "--truth", str(truth), "--store", sqlite_url, "--threshold", "0.62")
    data = json.loads(neardup(*given, "--json").stdout)
    assert data["by_threshold_from"] == 0.62
    assert [row["threshold"] for row in data["by_threshold"]][:2] == [0.65, 0.7]
    table = neardup(*given).stdout
    assert "     0.65 " in table and "     0.60 " not in table
    assert "(rows from 0.62, where the report's pairs begin" in table


@pytest.mark.parametrize("against", ["store", "report"])
def test_a_truth_file_without_a_header_keeps_its_first_pair(
    tmp_path: Path, sqlite_url: str, against: str
) -> None:
    """A truth file written without a header had its first pair taken for one: that pair was
    lost without a word, and recall counted against one pair fewer."""
    records = tmp_path / "r.txt"
    records.write_text(
        "1 alpha beta gamma delta\n2 alpha beta gamma delta epsilon\n3 other words here\n"
        "4 other words here too\n5 nothing alike\n"
    )
    (tmp_path / "truth.csv").write_text("1,2\n3,4\n")
    assert neardup("index", str(records), "--store", sqlite_url).returncode == 0
    given = ["--store", sqlite_url]
    if against == "report":
        assert neardup("report", *given, "--threshold", "0.5", "-o", "pairs.tsv", cwd=tmp_path)
        given = ["--report", "pairs.tsv"]
    scored = neardup("eval", "--truth", "truth.csv", *given, "--json", cwd=tmp_path)
    assert json.loads(scored.stdout)["true"] == 2
    (tmp_path / "named.csv").write_text("left,right\n1,2\n")  # a header of names stays one
    scored = neardup("eval", "--truth", "named.csv", *given, "--json", cwd=tmp_path)
    assert json.loads(scored.stdout)["true"] == 1


# --- presets and tuned bands ----------------------------------------------------------------------


def test_presets_and_flags_that_override_them(tmp_path: Path) -> None:
    records = tmp_path / "r.txt"
    records.write_text("1 alpha beta\n")
    store = f"sqlite:///{tmp_path / 'p.db'}"
    assert neardup("index", str(records), "--store", store, "--preset", "records").returncode == 0
    params = json.loads(neardup("stats", "--store", store, "--json").stdout)["parameters"]
    assert (params["shingle_size"], params["bands"]) == (4, 64)
    tuned = f"sqlite:///{tmp_path / 't.db'}"
    assert neardup("index", str(records), "--store", tuned, "--threshold", "0.8").returncode == 0
    assert (
        json.loads(neardup("stats", "--store", tuned, "--json").stdout)["parameters"]["bands"] == 16
    )
    mixed = f"sqlite:///{tmp_path / 'm.db'}"
    result = neardup(
        "index", str(records), "--store", mixed, "--preset", "documents", "--shingle", "word:2"
    )
    assert result.returncode == 0
    params = json.loads(neardup("stats", "--store", mixed, "--json").stdout)["parameters"]
    assert (params["shingle_kind"], params["shingle_size"], params["bands"]) == ("word", 2, 16)


def test_the_bands_are_chosen_from_the_start_of_every_file(tmp_path: Path) -> None:
    """Two shops linked: one's long descriptions first, then the other's short names. The first
    records of one file alone would make them long texts (4-row bands); of both, they are
    short records on average (2-row bands)."""
    descriptions, names = tmp_path / "a.tsv", tmp_path / "b.tsv"
    description = "a compact camera with a wide zoom lens, a bright screen and a long battery "
    descriptions.write_text(
        "id\ttext\n" + "".join(f"a{n}\t{description * 4}{n}\n" for n in range(1500))
    )
    names.write_text("id\ttext\n" + "".join(f"b{n}\tcompact camera {n}\n" for n in range(1500)))
    alone, linked = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'ab.db'}"
    api.index([descriptions], alone)
    api.index([descriptions, names], linked)
    assert api.stats(alone)["parameters"]["bands"] == 32
    assert api.stats(linked)["parameters"]["bands"] == 64


def test_a_store_made_by_adding_records_has_the_bands_index_would_choose(
    tmp_path: Path,
) -> None:
    """The service's first POST /records, or a lot checked and added, makes the store:
    templated long texts get 4-row bands, as `index` of the same records gives them, and short
    records and long texts that share little 2-row ones."""
    description = "a compact camera with a wide zoom lens, a bright screen and a long battery "
    templated = [Record(f"a{n}", f"{description * 4}{n}") for n in range(50)]
    short = [Record(f"b{n}", f"compact camera {n}") for n in range(50)]
    apart = [Record(f"c{n}", text) for n, text in enumerate(unlike_texts(50, words=60))]
    for name, records, bands in [("t", templated, 32), ("s", short, 64), ("u", apart, 64)]:
        added, indexed = (f"sqlite:///{tmp_path / f'{how}{name}.db'}" for how in "ai")
        api.add(records, added, if_unique=True)
        corpus = tmp_path / f"{name}.tsv"
        corpus.write_text("id\ttext\n" + "".join(f"{r.id}\t{r.text}\n" for r in records))
        api.index([corpus], indexed)
        assert api.stats(added)["parameters"] == api.stats(indexed)["parameters"]
        assert api.stats(added)["parameters"]["bands"] == bands


def test_a_lot_larger_than_the_sample_is_measured_by_its_first_records(tmp_path: Path) -> None:
    """Templated long texts, then as many short records: the first thousand decide the bands,
    as `index` reads them, not the mean of the whole lot (short)."""
    description = "a compact camera with a wide zoom lens, a bright screen and a long battery "
    lot = [Record(f"d{n}", f"{description * 3}{n}") for n in range(1000)]
    lot += [Record(f"e{n}", f"camera {n}") for n in range(1000)]
    added, indexed = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'i.db'}"
    api.add(lot, added)
    corpus = tmp_path / "lot.tsv"
    corpus.write_text("id\ttext\n" + "".join(f"{r.id}\t{r.text}\n" for r in lot))
    api.index([corpus], indexed)
    assert api.stats(added)["parameters"]["bands"] == api.stats(indexed)["parameters"]["bands"]
    assert api.stats(added)["parameters"]["bands"] == 32


def test_records_with_no_words_do_not_choose_the_bands(tmp_path: Path) -> None:
    """A file whose first records have no words (skipped, not stored) before long texts with
    no template: their empty contents made the sample look templated (and shorter)."""
    records = tmp_path / "records.tsv"
    texts = ["..."] * 300 + unlike_texts(300, words=60)
    records.write_text("id\ttext\n" + "".join(f"r{n}\t{t}\n" for n, t in enumerate(texts)))
    store = f"sqlite:///{tmp_path / 'r.db'}"
    assert api.index([records], store).skipped.total == 300
    assert api.stats(store)["parameters"]["bands"] == 64


def unlike_texts(count: int, words: int, seed: int = 3) -> list[str]:
    """``count`` texts of ``words`` words of random letters each: long texts with no template."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [
        " ".join("".join(rng.choices(letters, k=rng.randint(4, 8))) for _ in range(words))
        for _ in range(count)
    ]


def test_bucket_pairs_are_counted_per_band_and_per_pair_of_records() -> None:
    keys = np.array([[1, 7], [1, 8], [1, 8], [2, 9]])  # band 0: a bucket of 3; band 1: of 2
    assert bucket_pairs_per_pair(keys) == pytest.approx((3 + 1) / 6)
    assert bucket_pairs_per_pair(keys[:1]) is None  # one record: no pair to count


def test_long_texts_with_no_template_get_every_pair_above_the_threshold(tmp_path: Path) -> None:
    """Long texts whose copies keep their rare words but lose half the rest: a pair shares a
    third of its shingles (plain Jaccard), which 4-row bands make a candidate one time in four,
    while the weighted similarity lifts it above the threshold. Such texts share few 2-row
    buckets, so they get 2-row bands, and the report lists every pair `report --exact` lists."""
    rng = random.Random(8)
    texts = unlike_texts(300, words=60)
    for n in range(0, 60, 2):  # every other of the first 60 texts: a copy keeping half its words
        kept = [word for word in texts[n].split() if rng.random() < 0.5]
        texts[n + 1] = " ".join(kept + texts[n + 1].split()[: 60 - len(kept)])
    records = tmp_path / "texts.tsv"
    records.write_text("id\ttext\n" + "".join(f"t{n}\t{t}\n" for n, t in enumerate(texts)))
    store = f"sqlite:///{tmp_path / 'texts.db'}"
    api.index([records], store)
    assert api.stats(store)["parameters"]["bands"] == 64
    rules = {"threshold": 0.3}
    exact = api.report(store, rules=rules, exact=True)
    assert len(exact) >= 25
    assert api.report(store, rules=rules) == exact
    four_rows = f"sqlite:///{tmp_path / 'four.db'}"
    api.index([records], four_rows, params={"bands": 32})
    assert len(api.report(four_rows, rules=rules)) < len(exact)  # what 4-row bands would miss


def test_the_api_takes_the_number_of_hashes_alone(tmp_path: Path) -> None:
    records = tmp_path / "r.txt"
    records.write_text("1 alpha beta\n2 alpha beta gamma\n")
    url = f"sqlite:///{tmp_path / 'k.db'}"
    api.index([records], url, params={"num_hashes": 100})
    params = api.stats(url)["parameters"]
    assert (params["num_hashes"], params["bands"]) == (100, 50)  # 2 rows per band
    assert api.index([records], f"sqlite:///{tmp_path / 'j.db'}", params={"num_hashes": 7})


def test_a_store_remembers_its_preset_and_threshold(tmp_path: Path) -> None:
    corpus, truth = tmp_path / "c.tsv", tmp_path / "t.tsv"
    write_corpus(corpus, truth, 600, seed=4)
    documents = f"sqlite:///{tmp_path / 'd.db'}"
    api.index([corpus], documents, preset="documents")
    # A plain report uses the preset's rules: its bands, Jaccard >= 0.8.
    assert api.stats(documents)["rules"] == {
        "method": "bands",
        "candidates": 10,
        "first_word": False,
        "threshold": 0.8,
        "max_edit_distance": None,
        "similarity": "jaccard",
        "auto_threshold": False,
    }
    plain = api.report(documents)
    assert plain == api.report(documents, preset="documents")
    assert min(p.similarity for p in plain) >= 0.8
    # --threshold on index means what it means everywhere: the least similarity reported.
    tuned = f"sqlite:///{tmp_path / 'tuned.db'}"
    assert neardup("index", str(corpus), "--store", tuned, "--threshold", "0.8").returncode == 0
    pairs = api.report(tuned)
    assert pairs and min(p.similarity for p in pairs) >= 0.8
    assert min(p.similarity for p in api.report(tuned, rules={"threshold": 0.5})) < 0.8
    # --similarity too; a later index run's rule flags change those rules alone.
    people = tmp_path / "people.tsv"
    write_corpus(people, None, 300, kind="people", seed=2)
    weighted = f"sqlite:///{tmp_path / 'weighted.db'}"
    assert neardup("index", str(people), "--store", weighted, "--threshold", "0.5").returncode == 0
    assert (
        neardup("index", str(people), "--store", weighted, "--similarity", "weighted").returncode
        == 0
    )
    assert api.stats(weighted)["rules_from"] == {
        **api.stats(tuned)["rules_from"],
        "threshold": "index",
        "similarity": "index",
    }
    assert api.report(weighted) == api.report(weighted, rules={"similarity": "weighted"})
    assert api.report(weighted) != api.report(weighted, rules={"similarity": "numerals"})


def test_the_exact_report_needs_no_token_field(tmp_path: Path) -> None:
    corpus = tmp_path / "c.tsv"
    write_corpus(corpus, None, 400, seed=5)
    url = f"sqlite:///{tmp_path / 'bands.db'}"
    api.index([corpus], url, preset="documents")  # indexes the band tokens alone
    exact = api.report(url, exact=True)
    assert exact and min(p.similarity for p in exact) >= 0.8
    result = neardup("report", "--store", url, "--exact", "-o", str(tmp_path / "exact.tsv"))
    assert result.returncode == 0, result.stderr
    assert "threshold 0.8: every pair at or above it" in result.stderr
    # The columns of a report's file, near pairs just above the threshold flagged for review.
    rows = list(csv.DictReader((tmp_path / "exact.tsv").open(), delimiter="\t"))
    assert len(rows) == len(exact)
    assert {row["review"] for row in rows if float(row["similarity"]) < 0.85} == {"1"}

    # The sketches find a subset of the exact pairs, with the same similarities.
    def found(pairs):
        return {(p.left_id, p.right_id, round(p.similarity, 9)) for p in pairs}

    assert found(api.report(url)) <= found(exact)


# --- generator ------------------------------------------------------------------------------------


def test_generator_is_deterministic_and_its_truth_is_right(tmp_path: Path) -> None:
    first, truth = tmp_path / "a.tsv", tmp_path / "truth.tsv"
    documents, pairs = write_corpus(first, truth, 600, seed=3, duplicates=0.4, pool=50)
    write_corpus(tmp_path / "b.tsv", None, 600, seed=3, duplicates=0.4, pool=50)
    assert first.read_bytes() == (tmp_path / "b.tsv").read_bytes()
    rows = list(csv.DictReader(first.open(), delimiter="\t"))
    assert documents == len(rows) == 600 and pairs > 100
    text = {r["id"]: r["text"] for r in rows}
    truth_rows = list(csv.DictReader(truth.open(), delimiter="\t"))
    assert len(truth_rows) == pairs
    params = FingerprintParams("char", 5, 8, 1)
    for row in truth_rows[:200]:
        a, b = fingerprint_batch([text[row["left_id"]], text[row["right_id"]]], params)
        assert float(row["jaccard_char5"]) == pytest.approx(
            jaccard(a.shingles, b.shingles), abs=1e-4
        )
    similarities = [float(r["jaccard_char5"]) for r in truth_rows]
    assert sorted(similarities)[len(similarities) // 2] > 0.8  # copies are near-duplicates


def test_documents_preset_finds_the_generated_duplicates(tmp_path: Path, sqlite_url: str) -> None:
    corpus, truth = tmp_path / "c.tsv", tmp_path / "t.tsv"
    write_corpus(corpus, truth, 800, seed=2)
    api.index([corpus], sqlite_url, params={"shingle_kind": "char", "shingle_size": 5, "bands": 16})
    result = evaluate(
        read_pairs(truth),
        pairs_of(api.report(sqlite_url, rules=MatchRules(method="bands", threshold=0.8))),
    )
    assert result.overall.precision == 1.0
    above = [(n, k) for lo, _, n, k in result.recall_by_similarity if lo >= 0.8]
    assert sum(k for _, k in above) / sum(n for n, _ in above) >= 0.99


HOSTILE_IDS = [
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "com,ma",
    'quo"te',
    "back\\slash",
    "*",
    "a:b",
    '") OR ("',
    "line\u2028separator",
    "x" * 1024,
    "y" * 40_000,
]


@pytest.mark.parametrize("format", ["tsv", "csv", "jsonl"])
def test_every_pair_file_format_reads_back_to_the_exact_ids(tmp_path: Path, format: str) -> None:
    pairs = [Pair(a, b, 1, 0.9, 3, "near") for a, b in combinations(HOSTILE_IDS, 2)]
    path = tmp_path / f"pairs.{format}"
    with path.open("w", encoding="utf-8", newline="") as out:
        assert write_pairs(pairs, out, format) == len(pairs)
    assert read_pairs(path) == {tuple(sorted((p.left_id, p.right_id))): 0.9 for p in pairs}


def test_a_store_that_remembers_rows_is_read_as_candidates() -> None:
    """Stores made before lookups' candidates had their own name remember them as rows."""
    from neardup.settings import match_rules

    remembered = {"rules": {"method": "bands", "rows": 7, "similarity": "jaccard"}}
    rules = match_rules(FingerprintParams(), remembered)
    assert (rules.candidates, rules.similarity) == (7, "jaccard")


def test_people_records_are_short_fielded_and_their_copies_are_found(
    tmp_path: Path, sqlite_url: str
) -> None:
    corpus, truth = tmp_path / "people.tsv", tmp_path / "truth.tsv"
    records, pairs = write_corpus(corpus, truth, 3000, kind="people", seed=7)
    write_corpus(tmp_path / "again.tsv", None, 3000, kind="people", seed=7)
    assert corpus.read_bytes() == (tmp_path / "again.tsv").read_bytes()
    rows = list(csv.DictReader(corpus.open(), delimiter="\t"))
    assert records == len(rows) == 3000 and list(rows[0]) == [
        "id", "name", "street", "city", "state", "zip"
    ]  # fmt: skip
    assert 200 < pairs < 600  # a tenth are copies
    cities = Counter(r["city"] for r in rows)
    assert cities.most_common(1)[0][1] > 100  # a few cities hold many people
    joined = {r["id"]: " ".join(filter(None, list(r.values())[1:])) for r in rows}
    truth_rows = list(csv.DictReader(truth.open(), delimiter="\t"))
    edited = sum(joined[t["left_id"]] != joined[t["right_id"]] for t in truth_rows)
    assert edited > 0.9 * len(truth_rows)  # copies carry edits
    api.index([corpus], sqlite_url)  # no flags, as a new user runs it
    result = evaluate(read_pairs(truth), pairs_of(api.report(sqlite_url)))
    assert result.overall.f1 > 0.95


def test_stats_shows_the_rules_in_effect_and_where_each_comes_from(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rules.db'}"
    api.index([corpus(tmp_path / "records.txt")], url)
    before = api.stats(url)  # stats reads the store and never measures it
    assert before["rules_in_effect"]["threshold"] is None
    assert before["rules_from"]["threshold"] == (
        "auto: read from the records by the next command that needs it"
    )
    api.report(url)
    after = api.stats(url)
    chosen = api.last_report(url)
    assert after["rules_in_effect"]["threshold"] == chosen.threshold
    assert after["rules_from"]["threshold"] == chosen.how and chosen.how.startswith("auto: the")
    assert after["rules_from"]["similarity"] == "default"
    shown = neardup("stats", "--store", url).stdout
    assert f"  threshold {chosen.threshold} ({chosen.how})" in shown
    preset = f"sqlite:///{tmp_path / 'preset.db'}"
    api.index([corpus(tmp_path / "records.txt")], preset, preset="documents")
    assert api.stats(preset)["rules_from"]["threshold"] == "index"
    assert api.stats(preset)["rules_in_effect"]["threshold"] == 0.8


def test_a_store_with_no_near_duplicates_lists_none_and_then_its_copies(tmp_path: Path) -> None:
    """Generated people with no copies: their pairs fall from one hump, the threshold is where
    its tail ends, and the report lists (nearly) nothing; copies added later stand above it."""
    people = tmp_path / "people.tsv"
    write_corpus(people, None, 2000, kind="people", seed=2, duplicates=0.0)
    url = f"sqlite:///{tmp_path / 'p.db'}"
    api.index([people], url)
    assert len(api.report(url)) <= 2
    chosen = api.last_report(url)
    assert chosen.how == f"auto: {TAIL_END}" and 0.3 < chosen.threshold < 0.9
    lines = people.read_text().splitlines()
    copies = tmp_path / "copies.tsv"
    copies.write_text(
        "\n".join(
            [
                lines[0],
                *(f"copy{n}\t{line.split(chr(9), 1)[1]}x" for n, line in enumerate(lines[1:4])),
            ]
        )
        + "\n"
    )
    api.index([copies], url)
    listed = {(p.left_id, p.right_id) for p in api.report(url)}
    assert {("copy0", "p00000000"), ("copy1", "p00000001"), ("copy2", "p00000002")} <= listed


def test_a_report_whose_bands_may_miss_pairs_estimates_what_they_hold(tmp_path: Path) -> None:
    """4-row bands at a threshold of 0.3 make a pair of that Jaccard a candidate with
    probability 0.23: the report estimates its candidate recall and says so. The 2-row bands
    of short records reach 0.99 there, and the report spends nothing on it."""
    records = corpus(tmp_path / "records.txt")
    four = f"sqlite:///{tmp_path / 'four.db'}"
    api.index([records], four, params={"bands": 32})
    page = tmp_path / "page.html"
    printed = neardup(
        "report",
        "--store",
        four,
        "--threshold",
        "0.3",
        "-o",
        str(tmp_path / "p"),
        "--html",
        str(page),
    )
    estimate = api.last_report(four).estimated_candidate_recall
    assert estimate is not None and 0 < estimate < 0.99
    assert f"estimated candidate recall {estimate:.3f}: the bands may miss" in printed.stderr
    assert f'<p id="missed">The estimated candidate recall {estimate:.3f}' in page.read_text()
    # Pairs measured by their Jaccard carry it: the estimate their shingle sets give.
    near = [
        p
        for p in api.report(four, rules={"threshold": 0.3, "similarity": "jaccard"})
        if p.kind == "near"
    ]
    with api.opened(four) as store:
        held = store.get([i for p in near for i in (p.left_id, p.right_id)])
        sets = {i: shingle_sets([r.content], store.params)[0] for i, r in held.items()}
    jaccards = np.array([jaccard(sets[p.left_id], sets[p.right_id]) for p in near])
    assert len(set(jaccards.round(3))) > 10
    assert api.last_report(four).estimated_candidate_recall == pytest.approx(
        estimated_candidate_recall(jaccards, 32, 4)
    )
    two = f"sqlite:///{tmp_path / 'two.db'}"
    api.index([records], two)
    printed = neardup("report", "--store", two, "--threshold", "0.3", "-o", str(tmp_path / "q"))
    assert api.last_report(two).estimated_candidate_recall is None
    assert "estimated candidate recall" not in printed.stderr
    # tune --store estimates it wherever the candidates are the bands, and only there: a store
    # whose rules query the signature compares every record that shares a signature token.
    assert api.tune_store(two).estimated_candidate_recall is not None
    both = f"sqlite:///{tmp_path / 'both.db'}"
    api.index([records], both, params={"fields": ["signature", "bands"]})
    with api.opened(both) as store:
        store.update_settings({"rules": {"method": "signature"}})
    tuned = api.tune_store(both)
    assert tuned.threshold is not None
    assert (tuned.candidate_probability, tuned.estimated_candidate_recall) == (None, None)
