"""Reading Multi30k-style parallel text and batching it by token count (plain Python: pages read the splits with it;
the tensors of a batch are model/training/batch.py's)."""
from __future__ import annotations

import gzip
import random
from pathlib import Path


class DataError(Exception):
    """A data file that is missing, unreadable or misaligned; the message names it."""


def find_file(data_dir: str | Path, split: str, lang: str) -> Path:
    """`split.lang` or `split.lang.gz` inside data_dir."""
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        path = Path(data_dir) / name
        if path.is_file():
            return path
    raise DataError(f"{Path(data_dir) / f'{split}.{lang}'}[.gz] not found: data_dir must hold Multi30k task 1 files "
                    f"(train.de.gz, train.en.gz, val.*, test_2016_flickr.*)")


def read_lines(path: str | Path) -> list[str]:
    """Lines of a plain or gzipped UTF-8 file, without line endings."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} not found")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise DataError(f"{path} cannot be read as UTF-8 text ({e})") from e


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """Aligned source and target lines; different line counts are an error."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: the files are misaligned")
    return src, tgt


def read_split(data_dir: str | Path, split: str, src_lang: str = "de",
               tgt_lang: str = "en") -> tuple[list[str], list[str]]:
    return read_parallel(find_file(data_dir, split, src_lang), find_file(data_dir, split, tgt_lang))


def token_batches(
    pairs: list[tuple[list[int], list[int]]], max_tokens: int, shuffle: bool, seed: int = 0
) -> list[list[int]]:
    """Indices of pairs grouped so that similar lengths share a batch of <= max_tokens padded tokens.

    Sorting by length inside large shuffled pools keeps padding low while the batch order stays random.
    """
    idx = list(range(len(pairs)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(idx)
    batches: list[list[int]] = []
    pool = 100 * 64
    for p in range(0, len(idx), pool):
        chunk = sorted(idx[p : p + pool], key=lambda i: (len(pairs[i][0]), len(pairs[i][1])))
        batch: list[int] = []
        width = 0
        for i in chunk:
            need = max(len(pairs[i][0]), len(pairs[i][1]) + 1)  # decoder sequences gain <bos>/<eos>
            grown = max(width, need)
            if batch and grown * (len(batch) + 1) > max_tokens:
                batches.append(batch)
                batch, grown = [], need
            batch.append(i)
            width = grown
        if batch:
            batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches
