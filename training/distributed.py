"""Multi-GPU through torchrun (PyTorch's own launcher): one process per device, DDP or FSDP.

    torchrun --nproc_per_node 8 -m studio.cli train REC... --config full --weights DIR ... [--fsdp]

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; without them training runs in one plain process. The backend is
NCCL on CUDA, gloo on CPU (which is how the code path is exercised on a machine with no GPU). Every rank draws
its own clips (seed + rank); only rank 0 writes logs, checkpoints and the exported weights.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    active: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, requested: str | None) -> str:
        if requested:
            return requested
        if torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return "cpu"

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


def setup() -> Distributed:
    """Join the torchrun process group when launched by torchrun; a single plain process otherwise."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return Distributed()
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
    dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return Distributed(rank, world, local, True)


def wrap(module: nn.Module, d: Distributed, fsdp: bool) -> nn.Module:
    """DDP for LoRA and small models (every rank holds the whole model); FSDP (parameters, gradients and
    optimiser state sharded across ranks) for full fine-tunes of the 1.3B transformer."""
    if not d.active:
        return module
    if fsdp:
        from torch.distributed.fsdp import FullyShardedDataParallel

        return FullyShardedDataParallel(module, use_orig_params=True,
                                        device_id=d.local_rank if torch.cuda.is_available() else None)
    from torch.nn.parallel import DistributedDataParallel

    # find_unused_parameters: with the history empty on a clip's first chunk some memory patchifiers get no
    # gradient from that chunk; DDP must not wait for them.
    return DistributedDataParallel(module, device_ids=[d.local_rank] if torch.cuda.is_available() else None,
                                   find_unused_parameters=True)


def unwrap(module: nn.Module) -> nn.Module:
    return getattr(module, "module", module)
