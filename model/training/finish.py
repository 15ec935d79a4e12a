"""The end of a training run: the last epoch or the average of the last ones, the checkpoint folder with its
metrics.json, and the BLEU of the checkpoint as saved (also alone: python -m model.train ... --evaluate-only).
"""
from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import torch

from model.inference.translator import Translator
from model.io.checkpoint import average_weights, load_weights_into, save_checkpoint, write_metrics
from model.training import distributed
from model.training.data import DataError, find_file, read_split
from model.training.evaluate import bleu_scores
from model.training.loop import Run


def finish(run: Run, argv) -> int:
    """After the last epoch: every rank compares weights, then rank 0 writes the checkpoint and evaluates it."""
    args, model, ranks, log = run.args, run.model, run.ranks, run.log
    digests = distributed.gather_digests(model, ranks)  # every rank takes part; then only rank 0 goes on
    if not ranks.main:
        return 0
    if ranks.world > 1:
        log(f"weights after training are {'identical' if len(set(digests)) == 1 else 'DIFFERENT'} "
            f"on the {ranks.world} ranks")
    last_epoch = run.history[-1]["epoch"]
    model.eval()
    chosen = _choose_weights(run, last_epoch)
    model = model.cpu().eval()
    save_checkpoint(run.out, model, run.sv, run.tv, _metrics(run, chosen, last_epoch, digests, argv), half=args.half)
    if args.final_eval:
        evaluate_checkpoint(run.out, args.data_dir, args.test_split, args.beam, log)
    log(f"wrote {run.out}")
    return 0


def _choose_weights(run: Run, last_epoch: int) -> str:
    """Keep the last epoch's weights, or load the average of the last --average-last epochs when its greedy val
    BLEU is at least as good (only with --final-eval); says which."""
    args, model = run.args, run.model
    val_greedy = lambda m: bleu_scores(  # noqa: E731
        Translator(m, run.sv, run.tv, pieces=run.codec).translate_batch(run.val_src), run.val_tgt)
    paths = [run.work / f"epoch_{e}.safetensors" for e in range(last_epoch - args.average_last + 1, last_epoch + 1)]
    paths = [p for p in paths if p.exists()] if args.final_eval else []
    chosen = "last epoch"
    if len(paths) > 1:
        last_bleu = val_greedy(model)["sacrebleu"]
        last_state = {k: v.clone() for k, v in model.state_dict().items()}
        load_weights_into(model, average_weights(paths))
        avg_bleu = val_greedy(model)["sacrebleu"]
        run.log(f"val BLEU greedy: last epoch {last_bleu}, average of {len(paths)} epochs {avg_bleu}")
        if avg_bleu >= last_bleu:
            chosen = f"average of epochs {last_epoch - len(paths) + 1}-{last_epoch}"
        else:
            model.load_state_dict(last_state)
    return chosen


def _metrics(run: Run, chosen: str, last_epoch: int, digests: list, argv) -> dict:
    """metrics.json as training leaves it: the model, how it was trained, the per-epoch history."""
    args, ranks, codec, film = run.args, run.ranks, run.codec, run.film
    device = ranks.device
    hardware = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or platform.machine()
    metrics = {
        "model": {"parameters": run.n_params, "config": run.cfg.to_dict(), "weights": chosen,
                  "stored_as": "float16" if args.half else "float32"},
        "training": {"command": "python -m model.train " + " ".join(sys.argv[1:] if argv is None else argv),
                     "epochs": last_epoch, "steps": run.step, "train_minutes": round(run.train_seconds / 60, 1),
                     "hardware": f"{device.type}: {hardware}, {args.threads} threads",
                     "torch": torch.__version__,
                     "data_files": [str(find_file(args.data_dir, s, l).name) for s in ("train", "val")
                                    for l in ("de", "en")],
                     "history": run.history},
    }
    if codec is not None:
        metrics["training"]["pieces"] = {"model_type": args.spm_model_type, "vocab_size_asked": args.spm_vocab_size,
                                         "src_vocab": len(run.sv), "tgt_vocab": len(run.tv),
                                         "trained_on": "train split"}
    if film is not None:
        metrics["training"]["film"] = {"frames": len(film.frames), "seconds": round(film.seconds, 1)}
    if ranks.world > 1:
        metrics["training"].update(ranks=ranks.world, backend=ranks.backend, rank_weight_digests=digests)
    return metrics


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
        metrics[name]["sentences"] = len(src_lines)  # a BLEU is stated with the number of sentences it scored
        for b in (1, beam):
            t0 = time.time()
            hyps = translator.translate_batch(src_lines, beam=b)
            scores = bleu_scores(hyps, ref_lines)
            metrics[name]["greedy" if b == 1 else f"beam{b}"] = {**scores, "seconds": round(time.time() - t0, 1)}
            log(f"{name} {'greedy' if b == 1 else f'beam {b}'}: {scores}")
    write_metrics(out, metrics)
    return metrics
