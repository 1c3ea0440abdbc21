"""What TorchTPU writes to TORCH_TRACE on a machine without a TPU (torch 2.13 + torch_tpu).

``TPU_SKIP_MDS_QUERY=1 TORCH_TRACE=<dir> python try_torch_tpu.py`` tries, each in turn:
``torch.compile(fn, backend="tpu")`` on CPU tensors. What happened is printed (and kept in the
README beside this script); a TPU is needed for TorchTPU's eager batches.
"""

from __future__ import annotations

import traceback

import torch
import torch_tpu  # noqa: F401  (registers the "tpu" backend and device)


def fn(x, scale):
    y = torch.tanh(x @ x.T) * scale
    return y.sum()


def main() -> None:
    try:
        compiled = torch.compile(fn, backend="tpu")
        for rows, scale in ((8, 2.0), (8, 2.0), (5, 2.0), (5, 3.0)):
            print("result", float(compiled(torch.randn(rows, 16), scale)), flush=True)
    except Exception:
        traceback.print_exc()


if __name__ == "__main__":
    main()
