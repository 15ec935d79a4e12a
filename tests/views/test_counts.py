"""views/parts/counts.py: the counts the pages state, said one way (source tokens, vocabularies, BLEU's sentences)."""
from __future__ import annotations

import json
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints"


def test_source_tokens_are_counted_with_the_end_token_and_say_so():
    from views.parts.counts import embedding_rows, source_count

    assert source_count(10, "<eos>") == "10 source tokens incl. `<eos>`"
    assert source_count(1, "</s>") == "1 source token incl. `</s>`"
    assert embedding_rows("src", 10, "<eos>", "<bos>") == ("One row per token the encoder reads: 10 source tokens "
                                                          "incl. `<eos>`, as in the header.")
    assert embedding_rows("tgt", 7, "<eos>", "<pad>") == "One row per decoder input: 7, the start token `<pad>` first."


def test_vocabulary_sizes_name_the_specials_they_count():
    from views.parts.counts import vocabulary_sizes, without_specials

    words = ("<unk>", "<pad>", "<bos>", "<eos>")
    assert vocabulary_sizes([("DE", 8000, words), ("EN", 7931, words)]) == (
        "DE 8,000 / EN 7,931 tokens, each incl. its 4 specials: `<unk>` `<pad>` `<bos>` `<eos>`")
    marian = ("<unk>", "<pad>", "</s>")  # Marian's decoder starts from <pad>: three specials, not four
    assert vocabulary_sizes([("DE", 58101, marian), ("EN", 58101, marian)]).endswith(
        "each incl. its 3 specials: `<unk>` `<pad>` `</s>`")
    assert vocabulary_sizes([("DE", 9, words), ("EN", 8, marian)]) == (
        "DE 9 tokens (incl. 4 specials: `<unk>` `<pad>` `<bos>` `<eos>`) / EN 8 tokens (incl. 3 specials: `<unk>` "
        "`<pad>` `</s>`)")
    assert without_specials(7996, 8000, words) == ("the vocabulary's 8,000 entries less its 4 specials: `<unk>` "
                                                   "`<pad>` `<bos>` `<eos>`, which are no words")
    assert without_specials(10, 10, ()) == "all 10 entries of the vocabulary"


def test_a_bleu_is_named_with_its_set_and_size():
    from views.parts.counts import measured_on, split_name

    assert measured_on("test_2016_flickr", 1000) == "test_2016_flickr, 1,000 sentences"
    assert measured_on("multi30k/val.de.gz", 500, first=True) == "the first 500 sentences of multi30k/val.de.gz"
    assert measured_on("test", None) == "test (number of sentences not recorded)"
    assert split_name("multi30k/val.de.gz") == "val" and split_name(None) == "the given sentences"


def test_the_overview_quality_table_names_each_set_with_the_sentences_metrics_json_records():
    from views.pages.overview import quality_rows

    for name in ("multi30k-de-en", "multi30k-de-en-words"):
        metrics = json.loads((SHIPPED / name / "metrics.json").read_text(encoding="utf-8"))
        rows = quality_rows(metrics)
        test, val = metrics["test"], metrics["val"]
        assert [r["set"] for r in rows] == (
            [f"{test['split']}, {test['sentences']:,} sentences"] * 2 + [f"val, {val['sentences']:,} sentences"] * 2)
        assert [r["sacreBLEU"] for r in rows] == [f"{s[d]['sacrebleu']:.2f}" for s in (test, val)
                                                  for d in ("greedy", "beam5")]
    assert quality_rows({"test": {"split": "test_2016_flickr", "greedy": {"sacrebleu": 40.0}}})[0]["set"] == (
        "test_2016_flickr (number of sentences not recorded)")
    assert quality_rows({"note": "tiny test model"}) == []


def test_the_shipped_metrics_count_the_sentences_of_the_sets_they_scored():
    """The sizes in the shipped metrics.json are those `model.train --evaluate-only` records: the splits' lines."""
    import pytest

    from model.analysis.experiments import find_data_dir
    from model.training.data import read_split

    folder, _ = find_data_dir("val")
    if folder is None:
        pytest.skip("no Multi30k folder here (ATLAS_DATA_DIR)")
    for name in ("multi30k-de-en", "multi30k-de-en-words"):
        metrics = json.loads((SHIPPED / name / "metrics.json").read_text(encoding="utf-8"))
        for key, split in (("val", "val"), ("test", metrics["test"]["split"])):
            assert metrics[key]["sentences"] == len(read_split(folder, split)[0]), (name, key)
