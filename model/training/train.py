"""Train a German→English Transformer on Multi30k and write a checkpoint folder.

    python -m model.train --data-dir ../shared/data/multi30k --out checkpoints/multi30k-de-en

Token-bucketed batches, label smoothing, Adam with warm-up and inverse-square-root decay,
gradient clipping, tied target embedding/generator, a fixed seed. State is saved every epoch
under OUT/train/ and `--resume` continues from it; the final weights average the last epochs.
By default it also records the training film (model/training/film.py) into OUT/film.json + OUT/film.safetensors.

Several processes: `torchrun --nproc_per_node N -m model.train ...` trains with DistributedDataParallel
(model/training/distributed.py); rank 0 logs, records the film and writes every file.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import random
import sys
import time
import typing
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from model.inference.translator import Translator
from model.io.checkpoint import (
    SRC_SPM,
    TGT_SPM,
    CheckpointError,
    average_weights,
    load_weights_into,
    save_checkpoint,
    save_weights,
    write_metrics,
)
from model.nn.config import ModelConfig
from model.nn.transformer import EncoderDecoder, make_src_mask, make_tgt_mask, parameter_counts
from model.text.pieces import MODEL_TYPES, PieceCodec, train_piece_model, vocab_of
from model.text.tokenize import clean_text, tokenize
from model.text.vocab import Vocab
from model.training import distributed
from model.training.data import DataError, collate, find_file, read_split, token_batches
from model.training.evaluate import bleu_scores
from model.training.film import FilmRecorder, choose_probes

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


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    return ap.parse_args(argv)


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


def word_split(src_lang: str = "de", tgt_lang: str = "en"):
    """(source, target) sentence -> spaCy words."""
    return (lambda s: tokenize(s, src_lang)), (lambda t: tokenize(t, tgt_lang))


def piece_split(codec: PieceCodec):
    """(source, target) sentence -> SentencePiece pieces of the text the app would read (cleaned)."""
    return (lambda s: codec.source_pieces(clean_text(s))), (lambda t: codec.target_pieces(clean_text(t)))


def encode_pairs(src_lines, tgt_lines, sv: Vocab, tv: Vocab, max_len: int, split=None):
    split_src, split_tgt = split or word_split()
    pairs = []
    for s, t in zip(src_lines, tgt_lines):
        a = sv.encode(split_src(s))[: max_len - 1] + [sv.eos_idx]
        b = tv.encode(split_tgt(t))[: max_len - 2]
        pairs.append((a, b))
    return pairs


def build_piece_models(out: Path, train_src, train_tgt, args, write: bool) -> tuple[PieceCodec, Vocab, Vocab]:
    """Train the source and target SentencePiece models on the training split only and write them to
    OUT/source.spm and OUT/target.spm before epoch 1 (so --resume and the checkpoint use these very ones).

    Every rank trains them (deterministic: the same bytes), only the writing one (rank 0) stores them.
    """
    models = [train_piece_model([clean_text(x) for x in lines], args.spm_vocab_size, args.spm_model_type, args.seed)
              for lines in (train_src, train_tgt)]
    if write:
        out.mkdir(parents=True, exist_ok=True)
        for name, model in zip((SRC_SPM, TGT_SPM), models):
            (out / (name + ".tmp")).write_bytes(model)
            os.replace(out / (name + ".tmp"), out / name)
    sv, tv = vocab_of(models[0]), vocab_of(models[1])
    return PieceCodec(*models, {t for v in (sv, tv) for t in v.specials.values()}, language_codes=False), sv, tv


def read_piece_models(out: Path, sv: Vocab, tv: Vocab) -> PieceCodec:
    """On resume: the .spm files written before epoch 1, checked against the vocabularies in the state."""
    for name, vocab in ((SRC_SPM, sv), (TGT_SPM, tv)):
        path = out / name
        try:
            same = path.is_file() and vocab_of(path.read_bytes()).itos == vocab.itos
        except (OSError, RuntimeError, ValueError) as e:
            raise CheckpointError(f"{path}: is not a SentencePiece model of ours ({e}). "
                                  "Start again without --resume.") from e
        if not same:
            raise CheckpointError(f"{path}: missing, or its pieces are not the vocabulary in "
                                  f"{out / 'train' / 'state.pt'}. Start again without --resume.")
    return PieceCodec(out / SRC_SPM, out / TGT_SPM, {t for v in (sv, tv) for t in v.specials.values()},
                      language_codes=False)


def loss_on(model, pairs, max_tokens, device, bos: int, eos: int) -> float:
    """Mean per-token cross-entropy (teacher forced) in eval mode."""
    model.eval()
    total, n = 0.0, 0
    cfg = model.cfg
    with torch.inference_mode():
        for batch in token_batches(pairs, max_tokens, shuffle=False):
            src, tgt_in, tgt_out = (x.to(device) for x in collate(pairs, batch, cfg.pad_idx, bos, eos))
            logp, _ = model(src, tgt_in)
            total += F.nll_loss(logp.reshape(-1, logp.shape[-1]), tgt_out.reshape(-1), ignore_index=cfg.pad_idx,
                                reduction="sum").item()
            n += int((tgt_out != cfg.pad_idx).sum())
    return total / max(n, 1)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    ranks = distributed.setup()
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // ranks.local_world)
    if args.evaluate_only:
        torch.set_num_threads(args.threads)
        try:
            evaluate_checkpoint(out, args.data_dir, args.test_split, args.beam)
        except (DataError, CheckpointError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    try:
        return _train(args, out, ranks, argv)
    finally:
        distributed.teardown(ranks)


def _train(args, out: Path, ranks: distributed.Ranks, argv) -> int:
    work = out / "train"
    work.mkdir(parents=True, exist_ok=True)
    log = Log(out / "train.log", quiet=not ranks.main)
    torch.set_num_threads(args.threads)
    device = ranks.device
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    try:
        train_src, train_tgt = read_split(args.data_dir, "train")
        val_src, val_tgt = read_split(args.data_dir, "val")
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.limit:
        train_src, train_tgt = train_src[: args.limit], train_tgt[: args.limit]
    where = f"{ranks.world} ranks ({ranks.backend}), each on" if ranks.world > 1 else "device"
    log(f"start: {vars(args)}; {where} {device}, {args.threads} threads")

    state_path = work / "state.pt"
    codec = None  # the SentencePiece models, for --tokenizer sentencepiece
    if args.resume and state_path.is_file():
        # Our own training state: tensors and plain containers only (weights_only refuses code).
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        sv, tv = Vocab(state["src_itos"]), Vocab(state["tgt_itos"])
        cfg = ModelConfig.from_dict(state["config"])
        if cfg.tokenizer == "sentencepiece":
            try:
                codec = read_piece_models(out, sv, tv)
            except CheckpointError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
    else:
        state = None
        if args.tokenizer == "sentencepiece":
            t_spm = time.time()
            codec, sv, tv = build_piece_models(out, train_src, train_tgt, args, ranks.main)
            log(f"SentencePiece ({args.spm_model_type}, {args.spm_vocab_size} asked) trained on the training split "
                f"in {time.time() - t_spm:.1f} s: {out / SRC_SPM}, {out / TGT_SPM}")
        else:
            sv = Vocab.build((tokenize(s, "de") for s in train_src), args.min_freq)
            tv = Vocab.build((tokenize(t, "en") for t in train_tgt), args.min_freq)
        try:
            cfg = config_from_args(args, sv, tv)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    split = piece_split(codec) if codec is not None else None  # None: spaCy words, as always
    train_pairs = encode_pairs(train_src, train_tgt, sv, tv, cfg.max_len, split)
    val_pairs = encode_pairs(val_src, val_tgt, sv, tv, cfg.max_len, split)
    model = EncoderDecoder(cfg).to(device)
    n_params = sum(parameter_counts(model).values())
    unit = " SentencePiece pieces" if codec is not None else ""
    log(f"vocab de {len(sv)}, en {len(tv)}{unit}; {n_params:,} parameters; {len(train_pairs)} training pairs")
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    step, first_epoch, history, train_seconds = 0, 1, [], 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, first_epoch, history = state["step"], state["epoch"] + 1, state["history"]
        train_seconds = state["train_seconds"]
        torch.set_rng_state(state["torch_rng"])
        log(f"resumed after epoch {state['epoch']} (step {step})")
    film = None
    if args.film and ranks.main:
        # Every 4th val pair: a fixed subset, so each frame's val loss costs about a quarter of the epoch's.
        film = FilmRecorder(out, choose_probes(val_src, val_tgt, sv, tv, args.film_extra, split=split), val_pairs[::4],
                            sv, tv, device, detok=codec.detokenize if codec is not None else None)
        if state is not None:
            film.keep_until(step)
        if film.due(step):
            film.record(model, step)
        log(f"film: {len(film.probes)} probe sentences, {len(film.frames)} frames so far, into {out / 'film.json'}")
    forward = Logits(model)
    if ranks.world > 1:
        forward = torch.nn.parallel.DistributedDataParallel(
            forward, device_ids=[device.index] if device.index is not None else None)

    for epoch in range(first_epoch, args.epochs + 1):
        t0 = time.time()
        model.train()
        batches = token_batches(train_pairs, args.max_tokens, shuffle=True, seed=args.seed * 1000 + epoch)
        batches = distributed.share(batches, ranks)
        if ranks.world > 1:  # each rank its own dropout, from (seed, epoch, rank), so that resume repeats it
            torch.manual_seed(args.seed * 1_000_003 + epoch * 1000 + ranks.rank)
        tokens_seen, loss_sum, loss_tokens = 0, 0.0, 0
        film_before = film.seconds if film is not None else 0.0
        bar = tqdm(batches, desc=f"epoch {epoch}/{args.epochs}", unit="batch", disable=None if ranks.main else True,
                   file=sys.stderr)
        for done, batch in enumerate(bar, 1):
            src, tgt_in, tgt_out = (x.to(device)
                                    for x in collate(train_pairs, batch, cfg.pad_idx, tv.bos_idx, tv.eos_idx))
            step += 1
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args.lr, args.warmup)
            logits = forward(src, tgt_in)  # (b*t, V); fused log-softmax below
            target = tgt_out.reshape(-1)
            train_loss = F.cross_entropy(logits, target, ignore_index=cfg.pad_idx, label_smoothing=args.label_smoothing)
            with torch.no_grad():
                loss = F.cross_entropy(logits, target, ignore_index=cfg.pad_idx)  # plain NLL, for the log
            opt.zero_grad(set_to_none=True)
            train_loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            n_tok = int((tgt_out != cfg.pad_idx).sum())
            tokens_seen += n_tok
            loss_value = loss.item()
            loss_sum += loss_value * n_tok
            loss_tokens += n_tok
            if film is not None:
                film.add_batch_loss(loss_value * n_tok, n_tok)
                if film.due(step):
                    film.record(model, step)  # eval mode and no_grad inside, then back to train mode
            tok_s = tokens_seen / (time.time() - t0)
            bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tok_s:.0f}")
            if done % 50 == 0:  # the log file shows progress too when nobody watches the bar (tqdm off)
                left = (len(batches) - done) * (time.time() - t0) / done
                log(f"epoch {epoch} batch {done}/{len(batches)} loss {loss_sum / loss_tokens:.3f} "
                    f"{tok_s:.0f} tok/s, {left / 60:.1f} min left in this epoch")
        bar.close()
        epoch_seconds = time.time() - t0
        film_in_epoch = film.seconds - film_before if film is not None else 0.0
        train_seconds += epoch_seconds
        if ranks.world > 1:  # the epoch's loss and speed over every rank's share
            tokens_seen, loss_sum, loss_tokens = distributed.all_sum([tokens_seen, loss_sum, loss_tokens], ranks)
        stop = bool(args.time_budget_min) and (train_seconds + epoch_seconds * 1.1) / 60 > args.time_budget_min
        stop = distributed.agree(stop, ranks)  # rank 0's clock decides, so that no rank trains on alone
        if not ranks.main:
            if stop:
                break
            continue  # the others wait in the next epoch's first gradient all-reduce while rank 0 evaluates
        val_loss = loss_on(model, val_pairs, 4000, device, tv.bos_idx, tv.eos_idx)
        record = {"epoch": epoch, "step": step, "train_nll": loss_sum / max(loss_tokens, 1), "val_nll": val_loss,
                  "val_ppl": math.exp(val_loss), "seconds": epoch_seconds, "tok_s": tokens_seen / epoch_seconds}
        if film is not None:
            record["film_seconds"] = film_in_epoch  # frames recorded inside this epoch, part of "seconds"
        if epoch % args.bleu_every == 0 or epoch == args.epochs:
            model.eval()
            hyps = Translator(model, sv, tv, pieces=codec).translate_batch(val_src)
            record["val_bleu_greedy"] = bleu_scores(hyps, val_tgt)["sacrebleu"]
        history.append(record)
        log("epoch " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in record.items()}))
        if film is not None:
            film.record(model, step, epoch)
            log(f"film: {len(film.frames)} frames, {film.seconds:.1f} s of recording so far")
        save_weights(model, work / f"epoch_{epoch}.safetensors")
        old = work / f"epoch_{epoch - args.average_last}.safetensors"
        if old.exists():
            old.unlink()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "epoch": epoch,
                    "history": history, "train_seconds": train_seconds, "torch_rng": torch.get_rng_state(),
                    "config": cfg.to_dict(), "src_itos": sv.itos, "tgt_itos": tv.itos}, work / "state.pt.tmp")
        os.replace(work / "state.pt.tmp", state_path)
        if stop:
            log(f"time budget of {args.time_budget_min} min would be overrun by another epoch: stopping")
            break

    digests = distributed.gather_digests(model, ranks)  # every rank takes part; then only rank 0 goes on
    if not ranks.main:
        return 0
    if ranks.world > 1:
        log(f"weights after training are {'identical' if len(set(digests)) == 1 else 'DIFFERENT'} "
            f"on the {ranks.world} ranks")
    last_epoch = history[-1]["epoch"]
    model.eval()
    val_greedy = lambda m: bleu_scores(Translator(m, sv, tv, pieces=codec).translate_batch(val_src), val_tgt)  # noqa: E731
    paths = [work / f"epoch_{e}.safetensors" for e in range(last_epoch - args.average_last + 1, last_epoch + 1)]
    paths = [p for p in paths if p.exists()] if args.final_eval else []
    chosen = "last epoch"
    if len(paths) > 1:
        last_bleu = val_greedy(model)["sacrebleu"]
        last_state = {k: v.clone() for k, v in model.state_dict().items()}
        load_weights_into(model, average_weights(paths))
        avg_bleu = val_greedy(model)["sacrebleu"]
        log(f"val BLEU greedy: last epoch {last_bleu}, average of {len(paths)} epochs {avg_bleu}")
        if avg_bleu >= last_bleu:
            chosen = f"average of epochs {last_epoch - len(paths) + 1}-{last_epoch}"
        else:
            model.load_state_dict(last_state)
    model = model.cpu().eval()
    hardware = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or platform.machine()
    metrics = {
        "model": {"parameters": n_params, "config": cfg.to_dict(), "weights": chosen,
                  "stored_as": "float16" if args.half else "float32"},
        "training": {"command": "python -m model.train " + " ".join(sys.argv[1:] if argv is None else argv),
                     "epochs": last_epoch, "steps": step, "train_minutes": round(train_seconds / 60, 1),
                     "hardware": f"{device.type}: {hardware}, {args.threads} threads",
                     "torch": torch.__version__,
                     "data_files": [str(find_file(args.data_dir, s, l).name) for s in ("train", "val")
                                    for l in ("de", "en")],
                     "history": history},
    }
    if codec is not None:
        metrics["training"]["pieces"] = {"model_type": args.spm_model_type, "vocab_size_asked": args.spm_vocab_size,
                                         "src_vocab": len(sv), "tgt_vocab": len(tv), "trained_on": "train split"}
    if film is not None:
        metrics["training"]["film"] = {"frames": len(film.frames), "seconds": round(film.seconds, 1)}
    if ranks.world > 1:
        metrics["training"].update(ranks=ranks.world, backend=ranks.backend, rank_weight_digests=digests)
    save_checkpoint(out, model, sv, tv, metrics, half=args.half)
    if args.final_eval:
        evaluate_checkpoint(out, args.data_dir, args.test_split, args.beam, log)
    log(f"wrote {out}")
    return 0


def evaluate_checkpoint(out: Path, data_dir, test_split: str, beam: int, log=print) -> dict:
    """BLEU of the checkpoint as saved (half-precision storage included) on val and test; updates metrics.json.

    Also runnable alone: python -m model.train --data-dir DIR --out FOLDER --evaluate-only
    """
    translator = Translator.from_checkpoint(out)
    metrics = dict(translator.metrics)
    metrics["val"], metrics["test"] = {}, {}
    splits = [("val", *read_split(data_dir, "val"))]
    if test_split:
        try:
            splits.append(("test", *read_split(data_dir, test_split)))
            metrics["test"]["split"] = test_split
            files = metrics.setdefault("training", {}).setdefault("data_files", [])
            files += [n for n in (find_file(data_dir, test_split, l).name for l in ("de", "en")) if n not in files]
        except DataError as e:
            log(f"no test split: {e}")
    for name, src_lines, ref_lines in splits:
        for b in (1, beam):
            t0 = time.time()
            hyps = translator.translate_batch(src_lines, beam=b)
            scores = bleu_scores(hyps, ref_lines)
            metrics[name]["greedy" if b == 1 else f"beam{b}"] = {**scores, "seconds": round(time.time() - t0, 1)}
            log(f"{name} {'greedy' if b == 1 else f'beam {b}'}: {scores}")
    write_metrics(out, metrics)
    return metrics


if __name__ == "__main__":
    sys.exit(main())
