"""Train a German→English Transformer on Multi30k and write a checkpoint folder.

    python -m model.train --data-dir ../shared/data/multi30k --out checkpoints/multi30k-de-en

Token-bucketed batches, label smoothing, Adam with warm-up and inverse-square-root decay,
gradient clipping, tied target embedding/generator, a fixed seed. State is saved every epoch
under OUT/train/ and `--resume` continues from it; the final weights average the last epochs.
By default it also records the training film (model/training/film.py) into OUT/film.json + OUT/film.safetensors.

Several processes: `torchrun --nproc_per_node N -m model.train ...` trains with DistributedDataParallel
(model/training/distributed.py); rank 0 logs, records the film and writes every file.
"""
# The run's parts live beside this module: options.py (every flag), vocabularies.py (words or SentencePiece, the
# encoded pairs), loop.py (schedule, optimizer steps, what follows each epoch), finish.py (choosing the weights,
# the checkpoint, its evaluation).
from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

import torch

from model.io.checkpoint import CheckpointError
from model.io.cli import Refused, command, set_threads
from model.nn.transformer import EncoderDecoder, parameter_counts
from model.training import distributed
from model.training.data import DataError, read_split
from model.training.film import FilmRecorder, choose_probes
from model.training.finish import evaluate_checkpoint, finish
from model.training.loop import Log, Logits, Run, run_epoch
from model.training.options import build_parser, config_from_args
from model.training.vocabularies import encode_pairs, new_vocabularies, piece_split, saved_vocabularies


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser(__doc__).parse_args(argv)


@command(DataError, CheckpointError)
def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    ranks = distributed.setup()
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // ranks.local_world)
    if args.evaluate_only:
        set_threads(args.threads)
        evaluate_checkpoint(out, args.data_dir, args.test_split, args.beam)
        return 0
    try:
        return _train(args, out, ranks, argv)
    finally:
        distributed.teardown(ranks)


def _train(args, out: Path, ranks: distributed.Ranks, argv) -> int:
    """Train (or resume) epoch by epoch, then write and evaluate the checkpoint; raises DataError, CheckpointError
    or Refused on a data or config error."""
    (out / "train").mkdir(parents=True, exist_ok=True)
    log = Log(out / "train.log", quiet=not ranks.main)
    set_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    run = _start(args, out, ranks, log)
    forward = Logits(run.model)
    if ranks.world > 1:
        device = ranks.device
        forward = torch.nn.parallel.DistributedDataParallel(
            forward, device_ids=[device.index] if device.index is not None else None)
    for epoch in range(run.first_epoch, args.epochs + 1):
        if run_epoch(run, forward, epoch):
            break
    return finish(run, argv)


def _start(args, out: Path, ranks: distributed.Ranks, log: Log) -> Run:
    """The data, vocabularies and config (fresh, or from the state --resume continues), the model and its
    optimizer with that state restored, and the film; DataError, CheckpointError or Refused saying why not."""
    train_src, train_tgt = read_split(args.data_dir, "train")
    val_src, val_tgt = read_split(args.data_dir, "val")
    if args.limit:
        train_src, train_tgt = train_src[: args.limit], train_tgt[: args.limit]
    where = f"{ranks.world} ranks ({ranks.backend}), each on" if ranks.world > 1 else "device"
    log(f"start: {vars(args)}; {where} {ranks.device}, {args.threads} threads")
    state_path = out / "train" / "state.pt"
    state = None
    if args.resume and state_path.is_file():
        # Our own training state: tensors and plain containers only (weights_only refuses code).
        state = torch.load(state_path, map_location="cpu", weights_only=True)
    codec, sv, tv, cfg = _vocabularies(args, out, state, train_src, train_tgt, ranks, log)
    split = piece_split(codec) if codec is not None else None  # None: spaCy words, as always
    train_pairs = encode_pairs(train_src, train_tgt, sv, tv, cfg.max_len, split)
    val_pairs = encode_pairs(val_src, val_tgt, sv, tv, cfg.max_len, split)
    model = EncoderDecoder(cfg).to(ranks.device)
    n_params = sum(parameter_counts(model).values())
    unit = " SentencePiece pieces" if codec is not None else ""
    log(f"vocab de {len(sv)}, en {len(tv)}{unit}; {n_params:,} parameters; {len(train_pairs)} training pairs")
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    run = Run(args, out, ranks, log, codec, sv, tv, cfg, model, opt, train_pairs, val_pairs, val_src, val_tgt, n_params)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        run.step, run.first_epoch, run.history = state["step"], state["epoch"] + 1, state["history"]
        run.train_seconds = state["train_seconds"]
        torch.set_rng_state(state["torch_rng"])
        log(f"resumed after epoch {state['epoch']} (step {run.step})")
    if args.film and ranks.main:
        run.film = _film(run, state is not None, split)
    return run


def _vocabularies(args, out: Path, state: dict | None, train_src, train_tgt, ranks: distributed.Ranks, log):
    """(codec or None, source vocabulary, target vocabulary, config): the resumed state's, or built now from the
    training split and the flags; CheckpointError (a resumed state's) or Refused (the flags') saying why not."""
    if state is not None:
        return saved_vocabularies(state, out)
    codec, sv, tv = new_vocabularies(out, train_src, train_tgt, args, ranks.main, log)
    try:
        cfg = config_from_args(args, sv, tv)
    except ValueError as e:
        raise Refused(str(e)) from e
    return codec, sv, tv, cfg


def _film(run: Run, resumed: bool, split) -> FilmRecorder:
    """The training film's recorder (rank 0), with its first frame when one is due before the first step."""
    args, out = run.args, run.out
    # Every 4th val pair: a fixed subset, so each frame's val loss costs about a quarter of the epoch's.
    film = FilmRecorder(out, choose_probes(run.val_src, run.val_tgt, run.sv, run.tv, args.film_extra, split=split),
                        run.val_pairs[::4], run.sv, run.tv, run.ranks.device,
                        detok=run.codec.detokenize if run.codec is not None else None)
    if resumed:
        film.keep_until(run.step)
    if film.due(run.step):
        film.record(run.model, run.step)
    run.log(f"film: {len(film.probes)} probe sentences, {len(film.frames)} frames so far, into {out / 'film.json'}")
    return film


if __name__ == "__main__":
    sys.exit(main())
