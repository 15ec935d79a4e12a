"""Training on several processes (one per GPU or CPU share, on one or more machines) with DistributedDataParallel.

`torchrun --nproc_per_node N [--nnodes M --node_rank K --rdzv_endpoint HOST:PORT] -m model.train ...` sets
RANK, WORLD_SIZE and LOCAL_RANK; plain `python -m model.train` sets none of them and everything here
becomes a no-op for one rank, so single-process training is unchanged.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    """Where this process stands: its rank among `world` processes, and the device it trains on."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1
    backend: str = ""  # "gloo" or "nccl"; "" for one process

    @property
    def main(self) -> bool:
        """Rank 0 logs, records the film and writes checkpoints; the others only train."""
        return self.rank == 0

    @property
    def device(self) -> torch.device:
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank) if self.world > 1 else torch.device("cuda")
        return torch.device("cpu")


def setup() -> Ranks:
    """Join the process group when started by torchrun (WORLD_SIZE > 1): NCCL on GPUs, gloo on CPUs."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Ranks()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)  # before init, so NCCL binds this process to its own GPU
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return Ranks(dist.get_rank(), dist.get_world_size(), local_rank,
                 int(os.environ.get("LOCAL_WORLD_SIZE", "1")), backend)


def teardown(ranks: Ranks) -> None:
    if ranks.world > 1 and dist.is_initialized():
        # Leave together: a rank that destroyed its gloo group and exited while rank 0 was still writing the
        # checkpoint sometimes died in gloo's threads at exit ("terminate called without an active exception",
        # SIGABRT) on a busy machine. If a rank failed, torchrun stops the others, so this cannot wait for ever.
        dist.barrier()
        dist.destroy_process_group()


def share(batches: list, ranks: Ranks) -> list:
    """This rank's batches: every world-th one, and the same number on every rank.

    Every rank builds the same shuffled list of length buckets (same seed), so the shares are
    disjoint; the last len % world batches are left out, because a rank with one batch more
    would wait for ever in its extra gradient all-reduce.
    """
    if ranks.world <= 1:
        return batches
    per_rank = len(batches) // ranks.world
    return batches[ranks.rank :: ranks.world][:per_rank]


def all_sum(values: list[float], ranks: Ranks) -> list[float]:
    """The sums over all ranks (every rank must call this at the same point)."""
    if ranks.world <= 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=ranks.device if ranks.backend == "nccl" else "cpu")
    dist.all_reduce(t)
    return t.tolist()


def agree(flag: bool, ranks: Ranks) -> bool:
    """Rank 0's decision, on every rank (e.g. 'stop now': ranks that disagree would hang)."""
    if ranks.world <= 1:
        return flag
    t = torch.tensor([1 if flag else 0], device=ranks.device if ranks.backend == "nccl" else "cpu")
    dist.broadcast(t, src=0)
    return bool(t.item())


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of the state dict's bytes in key order: equal digests mean bit-identical weights."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if v.numel() else b"")
    return h.hexdigest()


def gather_digests(model: torch.nn.Module, ranks: Ranks) -> list[str]:
    """Every rank's weights_digest, in rank order (DDP should keep them identical)."""
    mine = weights_digest(model)
    if ranks.world <= 1:
        return [mine]
    out: list = [None] * ranks.world
    dist.all_gather_object(out, mine)
    return out
