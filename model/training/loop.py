"""The training loop: the learning-rate schedule, the training forward, one epoch of optimizer steps, and what
follows each epoch (validation, a film frame, the weights and the state --resume continues from).

Shape letters: see model/__init__.py (b batch, s source, t target, d d_model, V vocabulary).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from model.inference.translator import Translator
from model.io.checkpoint import save_weights
from model.nn.config import ModelConfig
from model.nn.transformer import EncoderDecoder, make_src_mask, make_tgt_mask
from model.text.pieces import PieceCodec
from model.text.vocab import Vocab
from model.training import distributed
from model.training.batch import collate
from model.training.data import token_batches
from model.training.evaluate import bleu_scores
from model.training.film import FilmRecorder


class Logits(torch.nn.Module):
    """The training forward: (b, s) src and (b, t) decoder input -> (b*t, V) logits.

    A module of its own so that DistributedDataParallel can wrap it (DDP syncs gradients only for
    passes through its forward); the log-softmax is left to the fused cross-entropy.
    """

    def __init__(self, model: EncoderDecoder):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        model, pad = self.model, self.model.cfg.pad_idx
        src_mask = make_src_mask(src, pad)
        x = model.decode(model.encode(src, src_mask), src_mask, tgt_in, make_tgt_mask(tgt_in, pad))  # (b, t, d)
        return model.generator.proj(x).reshape(-1, model.cfg.tgt_vocab_size)  # (b*t, V)


class Log:
    """Appends to OUT/train.log (shipped with the checkpoint) and echoes to stderr (tqdm-safe)."""

    def __init__(self, path: Path, quiet: bool = False):
        self.path, self.quiet = path, quiet  # quiet: a rank other than 0 under torchrun writes nothing

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}"
        tqdm.write(line, file=sys.stderr)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")


def lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warm-up to `peak`, then decay with 1/sqrt(step)."""
    step = max(step, 1)
    if warmup <= 0:
        return peak / math.sqrt(step)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def loss_on(model, pairs, max_tokens, device, bos: int, eos: int) -> float:
    """Mean per-token cross-entropy (teacher forced) in eval mode."""
    model.eval()
    total, n = 0.0, 0
    cfg = model.cfg
    with torch.inference_mode():
        for batch in token_batches(pairs, max_tokens, shuffle=False):
            src, tgt_in, tgt_out = (x.to(device) for x in collate(pairs, batch, cfg.pad_idx, bos, eos))
            logp = model(src, tgt_in)
            total += F.nll_loss(logp.reshape(-1, logp.shape[-1]), tgt_out.reshape(-1), ignore_index=cfg.pad_idx,
                                reduction="sum").item()
            n += int((tgt_out != cfg.pad_idx).sum())
    return total / max(n, 1)



@dataclass
class Run:
    """One training run, shared by its steps: what the start read and built, and what grows epoch by epoch."""

    args: argparse.Namespace
    out: Path
    ranks: distributed.Ranks
    log: Log
    codec: PieceCodec | None  # the SentencePiece models, for --tokenizer sentencepiece; None: spaCy words
    sv: Vocab
    tv: Vocab
    cfg: ModelConfig
    model: EncoderDecoder
    opt: torch.optim.Optimizer
    train_pairs: list
    val_pairs: list
    val_src: list[str]
    val_tgt: list[str]
    n_params: int
    film: FilmRecorder | None = None
    step: int = 0  # optimizer steps so far
    first_epoch: int = 1
    history: list[dict] = field(default_factory=list)  # one record per epoch (rank 0)
    train_seconds: float = 0.0

    @property
    def work(self) -> Path:
        """OUT/train: per-epoch weights and the state --resume continues from."""
        return self.out / "train"


def run_epoch(run: Run, forward: torch.nn.Module, epoch: int) -> bool:
    """Train one epoch; rank 0 then validates, records and saves. True when the time budget says stop."""
    args, ranks, film = run.args, run.ranks, run.film
    t0 = time.time()
    film_before = film.seconds if film is not None else 0.0
    tokens_seen, loss_sum, loss_tokens = _train_batches(run, forward, epoch, t0)
    epoch_seconds = time.time() - t0
    film_in_epoch = film.seconds - film_before if film is not None else 0.0
    run.train_seconds += epoch_seconds
    if ranks.world > 1:  # the epoch's loss and speed over every rank's share
        tokens_seen, loss_sum, loss_tokens = distributed.all_sum([tokens_seen, loss_sum, loss_tokens], ranks)
    stop = bool(args.time_budget_min) and (run.train_seconds + epoch_seconds * 1.1) / 60 > args.time_budget_min
    stop = distributed.agree(stop, ranks)  # rank 0's clock decides, so that no rank trains on alone
    if not ranks.main:
        return stop  # the others wait in the next epoch's first gradient all-reduce while rank 0 evaluates
    _end_of_epoch(run, epoch, epoch_seconds, tokens_seen, loss_sum / max(loss_tokens, 1), film_in_epoch)
    if stop:
        run.log(f"time budget of {args.time_budget_min} min would be overrun by another epoch: stopping")
    return stop


def _train_batches(run: Run, forward: torch.nn.Module, epoch: int, t0: float) -> tuple[int, float, int]:
    """This rank's share of the epoch's batches, one optimizer step each: (tokens, summed NLL, NLL tokens)."""
    args, ranks, film = run.args, run.ranks, run.film
    run.model.train()
    batches = token_batches(run.train_pairs, args.max_tokens, shuffle=True, seed=args.seed * 1000 + epoch)
    batches = distributed.share(batches, ranks)
    if ranks.world > 1:  # each rank its own dropout, from (seed, epoch, rank), so that resume repeats it
        torch.manual_seed(args.seed * 1_000_003 + epoch * 1000 + ranks.rank)
    tokens_seen, loss_sum, loss_tokens = 0, 0.0, 0
    bar = tqdm(batches, desc=f"epoch {epoch}/{args.epochs}", unit="batch", disable=None if ranks.main else True,
               file=sys.stderr)
    for done, batch in enumerate(bar, 1):
        n_tok, loss_value = _optimizer_step(run, forward, batch)
        tokens_seen += n_tok
        loss_sum += loss_value * n_tok
        loss_tokens += n_tok
        if film is not None:
            film.add_batch_loss(loss_value * n_tok, n_tok)
            if film.due(run.step):
                film.record(run.model, run.step)  # eval mode and no_grad inside, then back to train mode
        tok_s = tokens_seen / (time.time() - t0)
        bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tok_s:.0f}")
        if done % 50 == 0:  # the log file shows progress too when nobody watches the bar (tqdm off)
            left = (len(batches) - done) * (time.time() - t0) / done
            run.log(f"epoch {epoch} batch {done}/{len(batches)} loss {loss_sum / loss_tokens:.3f} "
                    f"{tok_s:.0f} tok/s, {left / 60:.1f} min left in this epoch")
    bar.close()
    return tokens_seen, loss_sum, loss_tokens


def _optimizer_step(run: Run, forward: torch.nn.Module, batch: list[int]) -> tuple[int, float]:
    """One step on one batch (learning rate of the schedule, label-smoothed loss, clipped gradients):
    (real target tokens, plain mean NLL of the batch, for the log)."""
    args, cfg, tv, opt = run.args, run.cfg, run.tv, run.opt
    src, tgt_in, tgt_out = (x.to(run.ranks.device)
                            for x in collate(run.train_pairs, batch, cfg.pad_idx, tv.bos_idx, tv.eos_idx))
    run.step += 1
    for g in opt.param_groups:
        g["lr"] = lr_at(run.step, args.lr, args.warmup)
    logits = forward(src, tgt_in)  # (b*t, V); fused log-softmax below
    target = tgt_out.reshape(-1)
    train_loss = F.cross_entropy(logits, target, ignore_index=cfg.pad_idx, label_smoothing=args.label_smoothing)
    with torch.no_grad():
        loss = F.cross_entropy(logits, target, ignore_index=cfg.pad_idx)  # plain NLL, for the log
    opt.zero_grad(set_to_none=True)
    train_loss.backward()
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), args.clip)
    opt.step()
    return int((tgt_out != cfg.pad_idx).sum()), loss.item()


def _end_of_epoch(run: Run, epoch: int, epoch_seconds: float, tokens_seen: int, train_nll: float,
                  film_in_epoch: float) -> None:
    """Rank 0 after an epoch: validation loss (and BLEU every --bleu-every epochs), a film frame, the files."""
    args, model, film = run.args, run.model, run.film
    val_loss = loss_on(model, run.val_pairs, 4000, run.ranks.device, run.tv.bos_idx, run.tv.eos_idx)
    record = {"epoch": epoch, "step": run.step, "train_nll": train_nll, "val_nll": val_loss,
              "val_ppl": math.exp(val_loss), "seconds": epoch_seconds, "tok_s": tokens_seen / epoch_seconds}
    if film is not None:
        record["film_seconds"] = film_in_epoch  # frames recorded inside this epoch, part of "seconds"
    if epoch % args.bleu_every == 0 or epoch == args.epochs:
        model.eval()
        hyps = Translator(model, run.sv, run.tv, pieces=run.codec).translate_batch(run.val_src)
        record["val_bleu_greedy"] = bleu_scores(hyps, run.val_tgt)["sacrebleu"]
    run.history.append(record)
    run.log("epoch " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in record.items()}))
    if film is not None:
        film.record(model, run.step, epoch)
        run.log(f"film: {len(film.frames)} frames, {film.seconds:.1f} s of recording so far")
    _save_epoch(run, epoch)


def _save_epoch(run: Run, epoch: int) -> None:
    """This epoch's weights (only the last --average-last are kept) and the state --resume continues from."""
    work = run.work
    save_weights(run.model, work / f"epoch_{epoch}.safetensors")
    old = work / f"epoch_{epoch - run.args.average_last}.safetensors"
    if old.exists():
        old.unlink()
    torch.save({"model": run.model.state_dict(), "optimizer": run.opt.state_dict(), "step": run.step, "epoch": epoch,
                "history": run.history, "train_seconds": run.train_seconds, "torch_rng": torch.get_rng_state(),
                "config": run.cfg.to_dict(), "src_itos": run.sv.itos, "tgt_itos": run.tv.itos}, work / "state.pt.tmp")
    os.replace(work / "state.pt.tmp", work / "state.pt")
