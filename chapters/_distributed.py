"""Measurements on a real torch.distributed process group, for chapters/12_more_than_one_gpu.md.

`run(world, jobs)` starts `world` CPU processes joined by the gloo backend (rendezvous through a file, so no
port is needed), runs the named jobs on every rank and returns what each rank measured, as a list indexed by
rank. The models are small MLPs: what is measured (bytes given to each collective, bytes held per rank, the
order in which pipeline stages wait for each other) does not depend on their size.

`CollectiveLog` sees every collective a process issues, whoever issues it (DDP's reducer,
ZeroRedundancyOptimizer, FSDP2, tensor-parallel DTensors, the send/recv of this file): the collectives reach
the dispatcher as `c10d` operators, and a TorchDispatchMode is shown each call with its tensors.

Uses only APIs present in torch 2.11: init_process_group, send/recv, DistributedDataParallel with a comm hook,
ZeroRedundancyOptimizer, FSDP2's `fully_shard` (with a MixedPrecisionPolicy) on a CPU device mesh,
`parallelize_module` with ColwiseParallel/RowwiseParallel, and TorchDispatchMode.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

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


# The collectives CollectiveLog records: the operator's name -> the name used on the page.
_KINDS = {"allreduce_": "all-reduce", "all_reduce": "all-reduce", "broadcast_": "broadcast",
          "_allgather_base_": "all-gather", "_reduce_scatter_base_": "reduce-scatter",
          "send": "send", "recv_": "recv"}
# Which argument holds the whole tensor: the gathered output of an all-gather, the full input of a
# reduce-scatter. The other collectives take their tensor(s) first.
_WHOLE = {"_allgather_base_": "output_tensor", "_reduce_scatter_base_": "input_tensor"}


class CollectiveLog(TorchDispatchMode):
    """Records each collective issued while active: kind, phase, bytes of the tensor it is given, dtype, peer.

    `phase` is a label the caller sets ("forward", "backward", "step") before each part of a training step.
    For an all-gather the bytes are those of the gathered whole (each rank receives (n - 1)/n of it), for a
    reduce-scatter those of the full input; `peer` is a broadcast's root or a send's / recv's other rank.
    """

    def __init__(self) -> None:
        super().__init__()
        self.phase: str | None = None
        self.calls: list[dict] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        namespace, _, name = func.name().partition("::")
        if namespace in ("c10d", "_c10d_functional") and name in _KINDS:
            named = dict(zip((a.name for a in func._schema.arguments), args, strict=False)) | kwargs
            whole = named[_WHOLE[name]] if name in _WHOLE else args[0]
            tensors = list(whole) if isinstance(whole, (list, tuple)) else [whole]
            peer = next((named[k] for k in ("root_rank", "dst", "src") if k in named), None)
            self.calls.append({"kind": _KINDS[name], "phase": self.phase, "bytes": sum(t.nbytes for t in tensors),
                               "dtype": str(tensors[0].dtype).removeprefix("torch."), "peer": peer,
                               "tag": named.get("tag")})
        return func(*args, **kwargs)


def _logged_step(model: nn.Module, optimizer: torch.optim.Optimizer | None, rank: int) -> list[dict]:
    """One training step on this rank's batch, every collective logged with its phase."""
    inputs, targets = _batch(rank)
    log = CollectiveLog()
    with log:
        log.phase = "forward"
        loss = nn.functional.mse_loss(model(inputs).float(), targets)
        log.phase = "backward"
        loss.backward()
        log.phase = "step"
        if optimizer is not None:
            optimizer.step()
    return log.calls


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


ALPHA_BETA_SIZES = [2**k for k in range(10, 27, 2)]  # bytes: 1 KiB, 4 KiB, ..., 64 MiB


def _job_alpha_beta(rank: int, world: int) -> dict:
    """Seconds of gloo's all_reduce of float32 tensors of each size in ALPHA_BETA_SIZES: every call timed on
    its own after a barrier (so that all ranks start together), the fastest of several calls per size (the
    machine's own cost; slower calls were interrupted by other work on a shared machine)."""
    times = {}
    for nbytes in ALPHA_BETA_SIZES:
        tensor = torch.ones(nbytes // 4)
        reps = max(8, min(40, 2**24 // nbytes))
        dist.all_reduce(tensor)  # warm-up: buffers and connections for this size
        samples = []
        for _ in range(reps):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            samples.append(time.perf_counter() - start)
        times[nbytes] = min(samples)
    return {"sizes": ALPHA_BETA_SIZES, "seconds": [times[n] for n in ALPHA_BETA_SIZES]}


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
    collectives = _logged_step(model, None, rank)
    first_grad = next(model.parameters()).grad
    gathered = [torch.empty_like(first_grad) for _ in range(world)]
    dist.all_gather(gathered, first_grad)
    return {
        "bucket_bytes": buckets,
        "collectives": collectives,
        "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "grads_equal_on_all_ranks": all(torch.equal(g, gathered[0]) for g in gathered),
    }


def _job_zero1(rank: int, world: int) -> dict:
    """ZeRO-1: ZeroRedundancyOptimizer keeps AdamW's moments only for the parameters this rank owns."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(make_model())
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
    collectives = _logged_step(model, optimizer, rank)
    state_bytes = sum(t.numel() * t.element_size() for s in optimizer.optim.state.values()
                      for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
    return {"state_bytes": state_bytes, "collectives": collectives,
            "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}


def _fsdp_model(world: int, **options) -> nn.Module:
    """The small MLP under FSDP2, one unit per linear layer (gathered just before it runs), on a CPU mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    model = make_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, **options)
    fully_shard(model, mesh=mesh, **options)
    return model


def _job_fsdp(rank: int, world: int) -> dict:
    """FSDP2 (`fully_shard`, ZeRO-3): each rank keeps a 1/world shard of parameters, gradients and state."""
    model = _fsdp_model(world)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    collectives = _logged_step(model, optimizer, rank)

    def local_bytes(tensors) -> int:
        return sum(t.to_local().numel() * t.element_size() for t in tensors)

    params = list(model.parameters())
    return {
        "local_shapes": [list(p.to_local().shape) for p in params],
        "param_bytes": local_bytes(params),
        "grad_bytes": local_bytes(p.grad for p in params),
        "state_bytes": local_bytes(t for p in params for t in optimizer.state[p].values()
                                   if hasattr(t, "to_local") and t.dim() > 0),
        "collectives": collectives,
    }


def _job_fsdp_bf16(rank: int, world: int) -> dict:
    """FSDP2 gathering parameters and reducing gradients in bfloat16 (MixedPrecisionPolicy)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    model = _fsdp_model(world, mp_policy=policy)
    return {"collectives": _logged_step(model, torch.optim.AdamW(model.parameters(), lr=1e-3), rank)}


def _job_fsdp_keep(rank: int, world: int) -> dict:
    """FSDP2 with reshard_after_forward=False: parameters kept from the forward to the backward (ZeRO-2-like)."""
    model = _fsdp_model(world, reshard_after_forward=False)
    return {"collectives": _logged_step(model, torch.optim.AdamW(model.parameters(), lr=1e-3), rank)}


TP_BATCH, TP_SEQ, TP_DIM = 2, 8, 64  # the tensor-parallel MLP's input (b, s, d); its hidden layer has 4d


def _tp_mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(TP_DIM, 4 * TP_DIM), nn.GELU(), nn.Linear(4 * TP_DIM, TP_DIM))


def _job_tensor_parallel(rank: int, world: int) -> dict:
    """A Megatron-style MLP on `world` ranks: the first Linear split by columns, the second by rows.

    PyTorch's own tensor parallelism (`parallelize_module`) shards the weights; the unsharded MLP runs
    beside it on the same input, so outputs and gradients can be compared.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    full, sharded = _tp_mlp(), _tp_mlp()
    parallelize_module(sharded, init_device_mesh("cpu", (world,)), {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(TP_BATCH, TP_SEQ, TP_DIM, generator=torch.Generator().manual_seed(7))  # the same on every rank
    # requires_grad: as the output of an earlier layer would, so the backward needs this input's gradient too
    x_full, x_tp = x.clone().requires_grad_(), x.clone().requires_grad_()
    full(x_full).square().sum().backward()
    log = CollectiveLog()
    with log:
        log.phase = "forward"
        out = sharded(x_tp)
        log.phase = "backward"
        out.square().sum().backward()
    out = torch.as_tensor(out).clone()  # the output, summed over the ranks by the row-parallel layer's all-reduce
    # this rank's slice of the unsharded gradients: rows of the first Linear, columns of the second
    expected = {"0.weight": full[0].weight.grad.chunk(world, 0)[rank],
                "0.bias": full[0].bias.grad.chunk(world)[rank],
                "2.weight": full[2].weight.grad.chunk(world, 1)[rank],
                "2.bias": full[2].bias.grad}
    local = {name: p.grad.to_local() for name, p in sharded.named_parameters()}
    return {
        "local_shapes": {name: list(p.to_local().shape) for name, p in sharded.named_parameters()},
        "output_max_diff": (out - full(x)).abs().max().item(),
        "output_close": torch.allclose(out, full(x), rtol=1e-5, atol=1e-6),
        "weight_grads_close": all(torch.allclose(local[k], v, rtol=1e-5, atol=1e-6) for k, v in expected.items()),
        "input_grad_close": torch.allclose(x_tp.grad, x_full.grad, rtol=1e-5, atol=1e-6),
        "collectives": log.calls,
    }


PIPE_WIDTH, PIPE_ROWS = 32, 8        # each stage: Linear(w, 4w), GELU, Linear(4w, w); a batch of 8 rows
T_FORWARD, T_BACKWARD = 1, 2         # time slots one stage spends on one micro-batch (backward ≈ 2 × forward)
PIPE_MICRO_BATCHES = (1, 2, 4, 8)


def _pipeline_model(stages: int) -> nn.Sequential:
    torch.manual_seed(0)
    w = PIPE_WIDTH
    return nn.Sequential(*(m for _ in range(stages) for m in (nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w))))


def pipeline_order(schedule: str, m: int, stage: int, stages: int) -> list[tuple[str, int]]:
    """The order in which `stage` runs forwards ("F", i) and backwards ("B", i) of micro-batches 0..m-1.

    GPipe: all forwards, then all backwards. 1F1B: `stages - stage - 1` forwards to fill the pipeline, then one
    forward and one backward in turn, then the remaining backwards.
    """
    if schedule == "GPipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(stages - stage - 1, m)
    order = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        order += [("F", warmup + i), ("B", i)]
    return order + [("B", i) for i in range(m - warmup, m)]


def _run_pipeline(schedule: str, m: int, rank: int, world: int) -> dict:
    """One training step of a `world`-stage pipeline (stage = rank) over m micro-batches, with send/recv.

    Each stage keeps a logical clock: a forward takes T_FORWARD slots, a backward T_BACKWARD, and work on a
    micro-batch starts when both the stage is free and the message it needs has arrived. Each message carries
    the sender's clock beside the tensor, so the slots below are those of the order the ranks really ran,
    waits included.
    """
    model, reference = _pipeline_model(world), _pipeline_model(world)
    stage = model[3 * rank:3 * rank + 3]
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(PIPE_ROWS, PIPE_WIDTH, generator=generator)
    y = torch.randn(PIPE_ROWS, PIPE_WIDTH, generator=generator)
    nn.functional.mse_loss(reference(x), y).backward()  # the whole batch through the whole model, for comparison
    first, last = rank == 0, rank == world - 1
    clock, events, stash, peak, pending = 0.0, [], {}, 0, []

    def send(tensor: torch.Tensor, peer: int, tag: int) -> None:
        for t, k in ((tensor, tag), (torch.tensor([clock], dtype=torch.float64), tag + 1)):  # data, then clock
            pending.append((dist.isend(t, peer, tag=k), t))

    def recv(shape: torch.Size, peer: int, tag: int) -> tuple[torch.Tensor, float]:
        tensor, sent_at = torch.empty(shape), torch.empty(1, dtype=torch.float64)
        dist.recv(tensor, peer, tag=tag)
        dist.recv(sent_at, peer, tag=tag + 1)
        return tensor, sent_at.item()

    log = CollectiveLog()
    with log:
        for op, i in pipeline_order(schedule, m, rank, world):
            if op == "F":
                if first:
                    inputs, ready = x.chunk(m)[i], 0.0
                else:
                    inputs, ready = recv(x.chunk(m)[i].shape, rank - 1, tag=0)
                    inputs.requires_grad_()
                start = max(clock, ready)
                clock = start + T_FORWARD
                outputs = stage(inputs)
                if last:
                    outputs = nn.functional.mse_loss(outputs, y.chunk(m)[i]) / m  # the batch mean, in m parts
                else:
                    send(outputs.detach(), rank + 1, tag=0)
                stash[i] = (inputs, outputs)  # kept for this micro-batch's backward
                peak = max(peak, len(stash))
            else:
                inputs, outputs = stash.pop(i)
                grad, ready = (None, 0.0) if last else recv(outputs.shape, rank + 1, tag=2)
                start = max(clock, ready)
                clock = start + T_BACKWARD
                outputs.backward(grad)
                if not first:
                    send(inputs.grad, rank - 1, tag=2)
            events.append((op, i, start, clock))
        for work, _ in pending:
            work.wait()
    mine, theirs = list(stage.parameters()), list(reference[3 * rank:3 * rank + 3].parameters())
    close = [torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-7) for a, b in zip(mine, theirs, strict=True)]
    return {
        "events": events,
        "peak_stash": peak,
        "sent": [c for c in log.calls if c["kind"] == "send" and c["tag"] in (0, 2)],  # tensors, not clocks
        "grads_close": all(close),
    }


def _job_pipeline(rank: int, world: int) -> dict:
    return {f"{schedule} {m}": _run_pipeline(schedule, m, rank, world)
            for schedule in ("GPipe", "1F1B") for m in PIPE_MICRO_BATCHES}


JOBS = {"ring": _job_ring, "ddp": _job_ddp, "zero1": _job_zero1, "fsdp": _job_fsdp, "fsdp_bf16": _job_fsdp_bf16,
        "fsdp_keep": _job_fsdp_keep, "tensor_parallel": _job_tensor_parallel, "pipeline": _job_pipeline,
        "alpha_beta": _job_alpha_beta}


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
