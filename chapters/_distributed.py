"""Measurements on a real torch.distributed process group, for chapters/12_more_than_one_gpu.md.

Each function starts `world` CPU processes joined by the gloo backend (rendezvous through a file, so no port
is needed), runs one job on every rank and returns what each rank measured, as a list indexed by rank. The
model is a small MLP: what is measured (bytes moved, bytes held per rank) does not depend on its size.

Uses only APIs present in torch 2.11: init_process_group, send/recv, DistributedDataParallel with a comm hook,
ZeroRedundancyOptimizer, and FSDP2's `fully_shard` on a CPU device mesh.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

D_IN, D_HIDDEN, D_OUT, BATCH = 64, 257, 32, 8  # 257 rows: a shard boundary that does not divide evenly


def make_model() -> nn.Module:
    """The same small MLP on every rank (seeded)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D_IN, D_HIDDEN), nn.GELU(), nn.Linear(D_HIDDEN, D_OUT))


def n_params() -> int:
    return sum(p.numel() for p in make_model().parameters())


def param_shapes() -> list[tuple[int, ...]]:
    return [tuple(p.shape) for p in make_model().parameters()]


def _batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own slice of the global batch
    return torch.randn(BATCH, D_IN, generator=generator), torch.randn(BATCH, D_OUT, generator=generator)


def _ring_all_reduce(tensor: torch.Tensor) -> int:
    """Sum `tensor` over all ranks in place with the ring algorithm; returns the bytes this rank sent.

    Reduce-scatter (n - 1 steps: pass a chunk to the right, add the one from the left), then all-gather
    (n - 1 steps: pass the finished chunks around). Each step sends one chunk of len / n values.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    chunks = list(tensor.chunk(world))
    right, left = (rank + 1) % world, (rank - 1) % world
    sent = 0
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(world - 1):
            if phase == "reduce-scatter":
                send_index, recv_index = (rank - step) % world, (rank - step - 1) % world
            else:
                send_index, recv_index = (rank - step + 1) % world, (rank - step) % world
            incoming = torch.empty_like(chunks[recv_index])
            request = dist.isend(chunks[send_index].contiguous(), right)
            dist.recv(incoming, left)
            request.wait()
            sent += chunks[send_index].numel() * chunks[send_index].element_size()
            if phase == "reduce-scatter":
                chunks[recv_index] += incoming
            else:
                chunks[recv_index].copy_(incoming)
    return sent


def _job_ring(rank: int, world: int) -> dict:
    values = 1 << 16  # 65,536 float32 values, 256 KiB
    mine = torch.arange(values, dtype=torch.float32) * (rank + 1)
    reference = mine.clone()
    dist.all_reduce(reference)  # gloo's own all-reduce, for the result
    sent = _ring_all_reduce(mine)
    return {"bytes": values * 4, "sent": sent, "same_as_all_reduce": bool(torch.equal(mine, reference))}


def _job_ddp(rank: int, world: int) -> dict:
    """DDP: every rank holds the whole model; gradients are all-reduced in buckets (counted by a comm hook)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(make_model())
    buckets: list[int] = []

    def counting_hook(state, bucket):
        buckets.append(bucket.buffer().numel() * bucket.buffer().element_size())
        return allreduce_hook(state, bucket)  # the default behaviour: all-reduce, then divide by world

    model.register_comm_hook(None, counting_hook)
    inputs, targets = _batch(rank)
    nn.functional.mse_loss(model(inputs), targets).backward()
    first_grad = next(model.parameters()).grad
    gathered = [torch.empty_like(first_grad) for _ in range(world)]
    dist.all_gather(gathered, first_grad)
    return {
        "bucket_bytes": buckets,
        "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "grads_equal_on_all_ranks": all(torch.equal(g, gathered[0]) for g in gathered),
    }


def _job_zero1(rank: int, world: int) -> dict:
    """ZeRO-1: ZeroRedundancyOptimizer keeps AdamW's moments only for the parameters this rank owns."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(make_model())
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
    inputs, targets = _batch(rank)
    nn.functional.mse_loss(model(inputs), targets).backward()
    optimizer.step()
    state_bytes = sum(t.numel() * t.element_size() for s in optimizer.optim.state.values()
                      for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
    return {"state_bytes": state_bytes,
            "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}


def _job_fsdp(rank: int, world: int) -> dict:
    """FSDP2 (`fully_shard`, ZeRO-3): each rank keeps a 1/world shard of parameters, gradients and state."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    model = make_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # one unit per layer: gathered just before it runs
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = _batch(rank)
    nn.functional.mse_loss(model(inputs), targets).backward()
    optimizer.step()

    def local_bytes(tensors) -> int:
        return sum(t.to_local().numel() * t.element_size() for t in tensors)

    params = list(model.parameters())
    return {
        "local_shapes": [list(p.to_local().shape) for p in params],
        "param_bytes": local_bytes(params),
        "grad_bytes": local_bytes(p.grad for p in params),
        "state_bytes": local_bytes(t for p in params for t in optimizer.state[p].values()
                                   if hasattr(t, "to_local") and t.dim() > 0),
    }


JOBS = {"ring": _job_ring, "ddp": _job_ddp, "zero1": _job_zero1, "fsdp": _job_fsdp}


def _worker(rank: int, world: int, jobs: list[str], folder: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        results = {name: JOBS[name](rank, world) for name in jobs}
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(folder, f"rank{rank}.json").write_text(json.dumps(results), encoding="utf-8")


def run(world: int, jobs: list[str]) -> list[dict]:
    """Start `world` gloo processes, run `jobs` on each, return each rank's results (index = rank)."""
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the loopback device: no network needed
        mp.spawn(_worker, args=(world, jobs, folder), nprocs=world, join=True)
        return [json.loads(Path(folder, f"rank{r}.json").read_text(encoding="utf-8")) for r in range(world)]
