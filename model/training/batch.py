"""A batch of id pairs as the tensors a teacher-forced pass reads."""
from __future__ import annotations

import torch


def collate(pairs, batch: list[int], pad: int, bos: int, eos: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src (b, s), decoder input (b, t) = <bos> y, decoder output (b, t) = y <eos>), padded."""
    srcs = [pairs[i][0] for i in batch]
    tgts = [pairs[i][1] for i in batch]
    s = max(map(len, srcs))
    t = max(map(len, tgts)) + 1
    src = torch.full((len(batch), s), pad, dtype=torch.long)
    tgt_in = torch.full((len(batch), t), pad, dtype=torch.long)
    tgt_out = torch.full((len(batch), t), pad, dtype=torch.long)
    for r, (a, b) in enumerate(zip(srcs, tgts)):
        src[r, : len(a)] = torch.tensor(a)
        tgt_in[r, : len(b) + 1] = torch.tensor([bos] + b)
        tgt_out[r, : len(b) + 1] = torch.tensor(b + [eos])
    return src, tgt_in, tgt_out
