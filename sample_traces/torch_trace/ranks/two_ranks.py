"""Two ranks (torch.distributed, gloo on the CPU) compile the same function, and rank 1's
batch shrinks at step 3 while rank 0's does not: rank 1 recompiles, rank 0 does not.

``TORCH_TRACE=<dir> torchrun --nproc_per_node 2 two_ranks.py`` writes one log per rank
(``dedicated_log_torch_trace_rank_<r>_*.log``), as a multi-host job's ranks would.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def step_fn(x, w):
    return torch.tanh(x @ w).sum()


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    compiled = torch.compile(step_fn, backend="aot_eager")
    w = torch.randn(16, 16)
    for step in range(6):
        rows = 5 if rank == 1 and step >= 3 else 8  # only rank 1's batch changes
        loss = compiled(torch.randn(rows, 16), w)
        total = loss.detach().clone()
        dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
