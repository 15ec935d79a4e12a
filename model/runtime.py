"""Process-wide settings the app sets once, so that views/ never imports torch."""
from __future__ import annotations

import torch


def use_threads(n: int) -> None:
    """Torch threads for this process: one sentence is small matrix work, so one thread per request is as
    fast as two, and sessions running at once do not fight over the cores."""
    torch.set_num_threads(max(1, int(n)))
