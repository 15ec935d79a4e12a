"""What the command lines (`python -m model.X`) share: the common options, loading a checkpoint, one-line errors and
writing the result.

A command's `main(argv)` is wrapped by `command(...)`: the errors it expects (`Refused`, a checkpoint that does not
load, and the types it names: bad input, a file it cannot read) end it with `error: <message>` on standard error and
exit status 2, never a traceback; any other error still raises. Imports nothing heavy until a function needs it:
model/io/export.py imports this module, and the app imports that one.
"""
from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path


class Refused(Exception):
    """A reason to stop: the command line prints `error: <message>` and exits with status 2."""


def add_common_options(ap: argparse.ArgumentParser, threads: int | None = None, threads_help: str | None = None,
                       checkpoint: bool = True) -> None:
    """`--checkpoint` (the shipped checkpoint by default) and, when `threads` is a default, `--threads`."""
    if checkpoint:
        from model.io.checkpoint import DEFAULT_CHECKPOINT

        ap.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT),
                        help="checkpoint folder (default: %(default)s)")
    if threads is not None:
        ap.add_argument("--threads", type=int, default=threads,
                        help=threads_help or f"torch threads (default {threads})")


def set_threads(n: int | None, otherwise: int = 1) -> None:
    """torch's threads: `n`, or `otherwise` where n is not a positive count (0 or less, None)."""
    import torch

    torch.set_num_threads(n if n is not None and n > 0 else max(1, otherwise))


def load_translator(checkpoint: str | Path, **kwargs):
    """Translator.from_checkpoint; a checkpoint that does not load raises Refused with CheckpointError's message."""
    from model.inference.translator import Translator
    from model.io.checkpoint import CheckpointError

    try:
        return Translator.from_checkpoint(checkpoint, **kwargs)
    except CheckpointError as e:
        raise Refused(str(e)) from e


def run(body: Callable[[], int | None], *errors: type[Exception], quiet: bool = False) -> int:
    """`body()`'s exit status (None counts as 0); Refused or one of `errors` raised inside it: `error: <message>` on
    standard error (not when `quiet`: a torchrun's other ranks) and 2."""
    try:
        code = body()
    except (Refused, *errors) as e:
        if not quiet:
            print(f"error: {e}", file=sys.stderr)
        return 2
    return 0 if code is None else code


def command(*errors: type[Exception]) -> Callable:
    """Decorator of a command line's main: its expected errors (Refused and `errors`) end it as `run` says."""
    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapped(*args, **kwargs) -> int:
            return run(lambda: main(*args, **kwargs), *errors)

        return wrapped

    return wrap


def write_out(text: str, out: str | None, say: bool = False) -> None:
    """A command line's result: into the file `out` (with `say`, "wrote OUT" on stderr), or onto stdout."""
    if out:
        Path(out).write_text(text, encoding="utf-8")
        if say:
            print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
