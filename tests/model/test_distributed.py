"""Two-process DistributedDataParallel training on CPU (gloo) with torchrun, on a corpus the test writes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_film import film_args, write_corpus

from model.io.checkpoint import load_checkpoint
from model.training.distributed import Ranks, share, weights_digest

pytestmark = pytest.mark.slow  # torchrun starts processes of its own: tens of seconds

ROOT = Path(__file__).resolve().parents[2]


def torchrun(data_dir: Path, out: Path, epochs: int, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "model.train", *film_args(data_dir, out, epochs, "--no-final-eval", *extra)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def metrics_of(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("ddp_data"))


@pytest.fixture(scope="module")
def two_ranks(corpus, tmp_path_factory):
    """One epoch on 2 ranks, then --resume to 3 epochs (two torchrun launches: each costs seconds of start-up)."""
    root = tmp_path_factory.mktemp("ddp")
    out = root / "ckpt"
    torchrun(corpus, out, 1)
    first = metrics_of(out)["training"]
    torchrun(corpus, out, 3, "--resume")
    return root, out, first


def test_share_gives_every_rank_as_many_disjoint_batches():
    batches = [[i] for i in range(11)]
    shares = [share(batches, Ranks(rank=r, world=3)) for r in range(3)]
    assert [len(s) for s in shares] == [3, 3, 3]  # 11 // 3: the two left over would hang the all-reduce
    flat = [b[0] for s in shares for b in s]
    assert len(set(flat)) == 9
    assert share(batches, Ranks()) is batches  # one process: exactly today's batches


def test_two_ranks_train_to_identical_weights_and_write_one_checkpoint(two_ranks):
    root, out, _ = two_ranks
    training = metrics_of(out)["training"]
    assert training["ranks"] == 2 and training["backend"] == "gloo"
    digests = training["rank_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    model, _, _, _ = load_checkpoint(out)  # float32, last epoch (average of 1): the weights rank 0 trained
    assert weights_digest(model) == digests[0]
    history = training["history"]
    assert history[-1]["train_nll"] < history[0]["train_nll"]
    assert [p.relative_to(root).as_posix() for p in root.rglob("model.safetensors")] == ["ckpt/model.safetensors"]
    assert len(list(root.rglob("state.pt"))) == 1 and len(list(root.rglob("film.json"))) == 1
    log = (out / "train.log").read_text(encoding="utf-8")
    assert "2 ranks (gloo)" in log and "identical on the 2 ranks" in log
    assert log.count('epoch {"epoch": 1,') == 1  # only rank 0 writes the log


def test_each_rank_takes_half_the_batches(two_ranks, corpus, tmp_path):
    _, out, _ = two_ranks
    from model.training import train as train_cli

    single = tmp_path / "one"
    assert train_cli.main(film_args(corpus, single, 1, "--no-film")) == 0
    one_epoch = metrics_of(single)["training"]["history"][0]["step"]
    assert metrics_of(out)["training"]["history"][0]["step"] == one_epoch // 2


def test_resume_under_torchrun(two_ranks):
    _, out, first = two_ranks
    assert "resumed after epoch 1" in (out / "train.log").read_text(encoding="utf-8")
    history = metrics_of(out)["training"]["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3] and history[0] == first["history"][0]
    assert history[2]["step"] == 3 * history[0]["step"]
