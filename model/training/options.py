"""The trainer's command line: every option of python -m model.train, and the ModelConfig it describes.

The architecture flags are generated from ModelConfig's fields (name, type, default and help from the field),
so that a new field is a new flag with nothing else to edit; --layers, --post-norm and --no-tie are aliases.
"""
from __future__ import annotations

import argparse
import dataclasses
import typing

from model.nn.config import ModelConfig
from model.text.pieces import MODEL_TYPES
from model.text.vocab import Vocab

FROM_DATA = ("src_vocab_size", "tgt_vocab_size", "pad_idx")  # set from the vocabularies, not by flags


class _BothLayerCounts(argparse.Action):
    """--layers N: N encoder and N decoder layers (a later --n-encoder-layers/--n-decoder-layers wins)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.n_encoder_layers = namespace.n_decoder_layers = values


def add_config_flags(ap: argparse.ArgumentParser) -> None:
    """One flag per ModelConfig field (name, type, default and help from the field), and the aliases."""
    group = ap.add_argument_group("architecture (the fields of ModelConfig; later flags win)")
    types = typing.get_type_hints(ModelConfig)
    for f in dataclasses.fields(ModelConfig):
        if f.name in FROM_DATA:
            continue
        flag, help_ = "--" + f.name.replace("_", "-"), f"{f.metadata.get('help', f.name)} (default: %(default)s)"
        if types[f.name] is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_)
        else:
            group.add_argument(flag, type=types[f.name], default=f.default, help=help_)
    group.add_argument("--layers", type=int, action=_BothLayerCounts, default=argparse.SUPPRESS,
                       help="encoder and decoder layers each: sets --n-encoder-layers and --n-decoder-layers")
    group.add_argument("--post-norm", dest="norm_first", action="store_false", help="the same as --no-norm-first")
    group.add_argument("--no-tie", dest="tie_weights", action="store_false", help="the same as --no-tie-weights")


def config_from_args(args: argparse.Namespace, src_vocab: Vocab, tgt_vocab: Vocab) -> ModelConfig:
    """The ModelConfig the flags describe, with the sizes and padding id of the vocabularies."""
    chosen = {f.name: getattr(args, f.name) for f in dataclasses.fields(ModelConfig) if f.name not in FROM_DATA}
    return ModelConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab), pad_idx=src_vocab.pad_idx,
                       **chosen)


def build_parser(description: str) -> argparse.ArgumentParser:
    """Every option of python -m model.train; `description` is the --help text above them (train.py's docstring)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True, help="folder with train/val/test_2016_flickr .de/.en (plain or .gz)")
    ap.add_argument("--out", required=True, help="checkpoint folder to write")
    ap.add_argument("--test-split", default="test_2016_flickr", help="evaluated once at the end ('' to skip)")
    add_config_flags(ap)
    ap.add_argument("--min-freq", type=int, default=2, help="word vocabularies: keep words seen this often")
    ap.add_argument("--spm-vocab-size", type=int, default=8000,
                    help="--tokenizer sentencepiece: pieces per language, our 4 specials included")
    ap.add_argument("--spm-model-type", choices=MODEL_TYPES, default="unigram",
                    help="--tokenizer sentencepiece: the SentencePiece algorithm")
    ap.add_argument("--epochs", type=int, default=20, help="passes over the training data (default 20)")
    ap.add_argument("--max-tokens", type=int, default=3000, help="padded tokens per batch")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate, reached after warm-up")
    ap.add_argument("--warmup", type=int, default=500, help="optimizer steps of linear warm-up (default 500)")
    ap.add_argument("--label-smoothing", type=float, default=0.1, help="label smoothing of the loss (default 0.1)")
    ap.add_argument("--clip", type=float, default=1.0, help="gradient norm clipped to this (default 1.0)")
    ap.add_argument("--seed", type=int, default=0, help="seed of weights, batch order and dropout (default 0)")
    ap.add_argument("--average-last", type=int, default=5, help="average the last N epochs' weights (1 = no averaging)")
    ap.add_argument("--bleu-every", type=int, default=5, help="validation BLEU every N epochs")
    ap.add_argument("--beam", type=int, default=5, help="beam size for the final metrics")
    ap.add_argument("--time-budget-min", type=float, default=0, help="stop after the epoch that would overrun it")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: all cores, shared out between the processes torchrun starts)")
    ap.add_argument("--half", action="store_true", help="store weights as float16 (loading restores float32)")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/train/state.pt")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training pairs (smoke tests)")
    ap.add_argument("--evaluate-only", action="store_true",
                    help="only recompute val/test BLEU of the checkpoint in OUT and update its metrics.json")
    ap.add_argument("--film", action=argparse.BooleanOptionalAction, default=True,
                    help="record the training film into OUT/film.json + film.safetensors (default: on)")
    ap.add_argument("--final-eval", action=argparse.BooleanOptionalAction, default=True,
                    help="end with val BLEU (choosing last epoch or average) and val/test BLEU of the checkpoint; "
                         "--no-final-eval keeps the last epoch and skips both (benchmarks, smoke runs)")
    ap.add_argument("--film-extra", type=int, default=10,
                    help="probe sentences from val added to the app's examples in the film")
    return ap
