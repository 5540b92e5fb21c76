"""A threshold from pairs a person judged: the sample drawn for them, the fit of their answers,
and the threshold a store keeps from it (`neardup tune --label-sample` and `--labels`)."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import numpy as np
import pytest

from neardup import api
from neardup.errors import NeardupError
from neardup.evaluate import read_judged, read_pairs
from neardup.generate import write_corpus
from neardup.labels import (
    best_threshold,
    chance_by_bin,
    expected_at,
    increasing_fit,
    judged_threshold,
    pairs_to_judge,
)
from tests.runner import assert_user_error, neardup


def test_the_fit_never_falls_as_the_similarity_rises() -> None:
    values, fit = increasing_fit(np.array([0.4, 0.1, 0.3, 0.2]), np.array([1, 0, 0, 1]))
    assert values.tolist() == [0.1, 0.2, 0.3, 0.4]
    assert fit.tolist() == [0.0, 0.5, 0.5, 1.0]  # 0.2's yes and 0.3's no pooled


def test_the_threshold_is_where_the_judged_pairs_change_their_answer() -> None:
    histogram = np.zeros(50)
    histogram[5:20] = 1_000  # many unlike pairs from 0.1 to 0.4
    histogram[30:50] = 10  # a few duplicates from 0.6 up
    similarities = np.array([0.15, 0.25, 0.35, 0.45, 0.62, 0.7, 0.9])
    chance = chance_by_bin(similarities, np.array([0, 0, 0, 0, 1, 1, 1]), 50)
    best = best_threshold(histogram, chance)
    assert 0.46 <= best.threshold <= 0.6  # every bin between lists no pair: the highest edge
    assert best.threshold == 0.6 and best.f1 > 0.99
    lower = expected_at(histogram, chance, 0.3)
    assert lower.recall == pytest.approx(1.0) and lower.precision < 0.1


def test_the_threshold_read_from_the_data_stays_unless_the_judged_pairs_expect_more() -> None:
    histogram = np.zeros(50)
    histogram[5:20] = 1_000
    histogram[28:50] = 10  # from 0.56: a bin of 10 unlike pairs, then duplicates from 0.58
    chance = np.where(np.arange(50) >= 29, 1.0, 0.0)
    best, read = judged_threshold(histogram, chance, None)
    assert best.threshold == 0.58 and best.f1 == pytest.approx(1.0) and read is None
    near, read = judged_threshold(histogram, chance, 0.56)  # 10 pairs too many: F1 0.977
    assert near.threshold == 0.58  # 0.023 of F1 is worth a move
    assert read is not None and read.threshold == 0.56 and read.f1 == pytest.approx(420 / 430)
    histogram[28] = 1
    kept, read = judged_threshold(histogram, chance, 0.56)  # one pair too many: F1 0.995
    assert kept.threshold == 0.56 and kept.f1 == pytest.approx(420 / 421) and kept == read


def test_the_sample_spreads_over_every_similarity_and_gathers_near_the_threshold() -> None:
    similarities = np.random.default_rng(0).uniform(0.1, 1.0, 100_000)
    picked = pairs_to_judge(similarities, 100, 0.6, 0.1, seed=3)
    assert len(picked) == 100 and len(set(picked.tolist())) == 100
    drawn = similarities[picked]
    assert np.histogram(drawn, bins=9, range=(0.1, 1.0))[0].min() >= 5  # every stretch
    assert np.mean(np.abs(drawn - 0.6) <= 0.15) >= 0.6  # half, and the spread's own share
    assert pairs_to_judge(similarities, 100, 0.6, 0.1, seed=3).tolist() == picked.tolist()
    assert sorted(picked.tolist()) != picked.tolist()  # shown in no order of similarity


def _judged_by_truth(sample: Path, truth: Path, judged: Path, keep: int | None = None) -> None:
    """``sample`` with its ``same`` column filled in as the truth says (the first ``keep``
    rows; the rest left blank)."""
    true = set(read_pairs(truth))
    with sample.open(encoding="utf-8-sig", newline="") as file:
        rows = list(csv.DictReader(file))
    for number, row in enumerate(rows):
        pair = tuple(sorted((row["left_id"], row["right_id"])))
        if keep is None or number < keep:
            row["same"] = "yes" if pair in true else "no"
    with judged.open("w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture
def people(tmp_path: Path) -> tuple[str, Path]:
    """3,000 generated people indexed with no flags, and their true pairs."""
    records, truth = tmp_path / "people.csv", tmp_path / "truth.tsv"
    write_corpus(records, truth, 3_000, kind="people", seed=5)
    url = f"sqlite:///{tmp_path / 'people.db'}"
    api.index([records], url)
    return url, truth


def test_judged_pairs_set_the_threshold_every_command_uses(
    people: tuple[str, Path], tmp_path: Path
) -> None:
    url, truth = people
    sample = tmp_path / "judge.csv"
    result = neardup("tune", "--store", url, "--label-sample", "80", "-o", str(sample))
    assert result.returncode == 0, result.stderr
    assert "to judge written to" in result.stderr
    how = api.last_report(url).how  # how the threshold the pairs gather around was read
    assert f"of the threshold {api.rules_for(url).threshold:g} ({how}): write yes" in result.stderr
    with sample.open(encoding="utf-8-sig", newline="") as file:
        rows = list(csv.DictReader(file))
    assert 70 <= len(rows) <= 80 and all(row["same"] == "" for row in rows)
    assert list(rows[0]) == ["same", "left_id", "right_id", "left_text", "right_text", "similarity"]
    judged = tmp_path / "judged.csv"
    _judged_by_truth(sample, truth, judged)
    tuned = neardup("tune", "--store", url, "--labels", str(judged))
    assert tuned.returncode == 0, tuned.stderr
    threshold = api.rules_for(url).threshold
    assert f"threshold {threshold:g}, remembered for every command" in tuned.stdout
    how = api.stats(url)["rules_from"]["threshold"]
    assert how.startswith("read from") and "pairs judged the same" in how
    pairs = api.report(url)
    assert pairs.threshold == threshold and pairs.measured.how == how
    said = neardup("tune", "--store", url).stdout  # which the data's reading does not replace
    assert f"the store keeps its own threshold {threshold:g} ({how})" in said
    found = {tuple(sorted((p.left_id, p.right_id))) for p in pairs}
    true = set(read_pairs(truth))
    assert 2 * len(found & true) / (len(found) + len(true)) >= 0.97
    # Half the records deleted, the judged pairs were drawn from others: it is said.
    api.delete([f"p{n:08d}" for n in range(1500)], url)
    assert api.stats(url)["rules_from"]["threshold"] == (
        f"{how}, when the store held 3,000 records (it holds 1,500: judge a new sample of them)"
    )
    assert api.report(url).measured.how == api.stats(url)["rules_from"]["threshold"]
    # An index run keeps it; a command given --threshold auto uses the one read from the data.
    more = tmp_path / "more.tsv"
    more.write_text("id\ttext\nnew-1\tan entirely new record about nothing in particular\n")
    api.index([more], url)
    assert api.rules_for(url).threshold == threshold
    assert api.rules_for(url, {"threshold": "auto"}).auto_threshold


def test_a_sample_is_never_written_over_judged_pairs(
    people: tuple[str, Path], tmp_path: Path
) -> None:
    url, truth = people
    sample, judged = tmp_path / "judge.csv", tmp_path / "judged.csv"
    sampled = neardup("tune", "--store", url, "--label-sample", "20", "-o", str(sample))
    assert sampled.returncode == 0
    _judged_by_truth(sample, truth, judged, keep=5)
    before = judged.read_bytes()
    again = neardup("tune", "--store", url, "--label-sample", "20", "-o", str(judged))
    assert_user_error(again, "judged.csv holds 5 judged pairs: write the sample to another file")
    assert judged.read_bytes() == before
    # A sample nobody judged yet is replaced.
    sampled = neardup("tune", "--store", url, "--label-sample", "20", "-o", str(sample))
    assert sampled.returncode == 0


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["yes,a,b,0.9", "maybe,a,c,0.4"], "line 3: same is 'maybe': write yes or no"),
        (["yes,a,b,high"], "line 2 has no similarity from 0 to 1"),
        (["yes,a,b,0.9", "y,a,c,0.8"], "no pair is judged different (2 the same, 0 not"),
        ([",a,b,0.9", ",a,c,0.2"], "no pair is judged yet (0 the same, 0 not, 2 blank)"),
    ],
)
def test_judged_pairs_that_cannot_be_read_are_one_line_errors(
    rows: list[str], message: str, people: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = people
    judged = tmp_path / "judged.csv"
    judged.write_text("\n".join(["same,left_id,right_id,similarity", *rows]) + "\n")
    before = api.stats(url)["rules_from"]["threshold"]
    assert_user_error(neardup("tune", "--store", url, "--labels", str(judged)), message)
    assert api.stats(url)["rules_from"]["threshold"] == before


@pytest.mark.parametrize(
    "flags",
    [
        ["--label-sample", "20", "--labels", "judged.csv"],
        ["--labels", "judged.csv", "--threshold", "0.5"],
    ],
)
def test_tune_asked_two_things_at_once_is_a_one_line_error(
    flags: list[str], people: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = people
    result = neardup("tune", "--store", url, *flags, cwd=tmp_path)
    assert_user_error(result, f"give one of {flags[0]}, {flags[2]}")


def test_judged_pairs_need_their_similarity(people: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = people
    judged = tmp_path / "judged.tsv"
    judged.write_text("left_id\tright_id\tsame\na\tb\tyes\n")
    result = neardup("tune", "--store", url, "--labels", str(judged))
    assert_user_error(result, "need the columns left_id, right_id, similarity and same")


@pytest.mark.parametrize("read", [read_pairs, lambda path, encoding: read_judged([path], encoding)])
def test_a_pair_file_not_in_its_encoding_names_the_encoding_given(read, tmp_path: Path) -> None:
    path = tmp_path / "judged.csv"
    path.write_bytes(b"same,left_id,right_id,similarity\nyes,caf\x81,b,0.9\n")  # 0x81: no cp1252
    with pytest.raises(NeardupError, match="it is not windows-1252 "):
        read(path, encoding="windows-1252")


def test_pairs_to_judge_are_drawn_from_at_most_a_million() -> None:
    from neardup.api import _judge_floor

    assert _judge_floor(np.full(50, 100)) == 0.1
    many = np.zeros(50, dtype=np.int64)
    many[40:] = 600_000  # 1.2 million from 0.96, 0.6 million from 0.98
    assert _judge_floor(many) == 0.98
    many[49] = 2_000_000  # more than a million in the last bin alone: that bin
    assert _judge_floor(many) == 0.98


@pytest.mark.parametrize(
    "saved",
    [
        "same;left_id;right_id;similarity\r\nyes;a;b;0,9\r\nno;a;c;0,25\r\n",  # comma decimals
        "sep=;\r\nsame;left_id;right_id;similarity\r\nyes;a;b;0.9\r\nno;a;c;0.25\r\n",
        "same\tleft_id\tright_id\tsimilarity\nyes\ta\tb\t0.9\nno\ta\tc\t0.25\n",  # tabs, as .csv
    ],
)
def test_judged_pairs_saved_by_a_spreadsheet_are_read(saved: str, tmp_path: Path) -> None:
    """A sample filled in with a spreadsheet where the comma is the decimal separator comes back
    separated by semicolons, with comma decimals: it was one column, refused as missing every
    other. It is read as records are, and so is a file of true pairs."""
    path = tmp_path / "judged.csv"
    path.write_bytes(saved.encode("cp1252"))
    judged = read_judged([path])
    assert (judged.similarity, judged.same) == ([0.9, 0.25], [True, False])
    assert read_pairs(path) == {("a", "b"): 0.9}  # as eval's truth: the pairs judged the same


def test_a_file_of_judged_pairs_as_truth_holds_those_judged_the_same(tmp_path: Path) -> None:
    """`eval --truth judged.csv` counted every judged pair true, those judged different too."""
    path = tmp_path / "judged.tsv"
    path.write_text(
        "same\tleft_id\tright_id\tsimilarity\nyes\ta\tb\t0.9\nno\ta\tc\t0.4\n\tb\tc\t0.6\n"
    )
    assert read_pairs(path) == {("a", "b"): 0.9}
    path.write_text("same\tleft_id\tright_id\nperhaps\ta\tb\n")
    with pytest.raises(NeardupError, match="line 2: same is 'perhaps': write yes or no"):
        read_pairs(path)


def test_a_workbook_given_as_judged_pairs_says_to_save_it_as_csv(
    people: tuple[str, Path], tmp_path: Path
) -> None:
    """A sample judged in a spreadsheet and saved as a workbook was 'not UTF-8: give its
    --encoding', which no encoding mends."""
    url, _ = people
    workbook = tmp_path / "judged.xlsx"
    with zipfile.ZipFile(workbook, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    said = "judged.xlsx: it is a zip archive (as an .xlsx, .ods or .docx file is): save it as CSV"
    assert_user_error(neardup("tune", "--store", url, "--labels", str(workbook)), said)
    assert_user_error(neardup("eval", "--truth", str(workbook), "--store", url), said)


def test_a_pair_file_not_there_is_named_once(people: tuple[str, Path], tmp_path: Path) -> None:
    """'cannot read pairs from gone.csv: [Errno 2] No such file or directory: 'gone.csv''."""
    url, _ = people
    result = neardup("eval", "--truth", "gone.csv", "--store", url, cwd=tmp_path)
    assert_user_error(result, "cannot read pairs from gone.csv: No such file or directory")
    assert "Errno" not in result.stderr
    folder = neardup("tune", "--store", url, "--labels", str(tmp_path))
    assert_user_error(folder, f"cannot read judged pairs from {tmp_path}: Is a directory")


def test_a_sample_shows_the_records_as_their_file_has_them(
    people: tuple[str, Path], tmp_path: Path
) -> None:
    """A person judged the store's normalised contents (lowercased, punctuation gone), where
    the file's own records tell more: --texts-from shows them, as report --texts-from does,
    and the records the files given do not hold are shown as the store holds them, said."""
    url, _ = people
    records = tmp_path / "people.csv"
    with records.open(encoding="utf-8-sig", newline="") as file:
        rows = {row["id"]: " ".join(v for k, v in row.items() if k != "id" and v)
                for row in csv.DictReader(file)}  # fmt: skip
    sample = api.label_sample(url, count=20, texts_from=[records])
    assert sample.untold == [] and set(sample.texts) <= rows.keys()
    assert all(sample.texts[i] == rows[i] for i in sample.texts)
    assert any(text != text.lower() for text in sample.texts.values())  # not normalised
    part = tmp_path / "part.csv"
    part.write_text("".join(records.read_text().splitlines(keepends=True)[:1000]))
    result = neardup("tune", "--store", url, "--label-sample", "20", "--texts-from", str(part))
    assert result.returncode == 0, result.stderr
    assert "of the pairs (such as " in result.stderr
    assert "shown as the store holds them" in result.stderr
    alone = neardup("tune", "--store", url, "--texts-from", str(records))
    assert_user_error(alone, "--texts-from gives the texts of a --label-sample")
