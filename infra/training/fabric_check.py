"""The fabric gate: a short all-reduce across every rank of a run, before its job, that fails below a floor.

The node bootstrap writes this file on every node and runs it with torchrun and the job's own static
rendezvous, so it exercises the same fabric, plugin and environment the job will use. Bus bandwidth is what
nccl-tests reports for all-reduce: algbw = bytes / time, busbw = algbw * 2 * (n - 1) / n (GB/s, 1e9 bytes),
over 5 warm-up and 20 timed iterations, with the slowest rank's time. Below `--min-busbw` the check fails.

Standard library and torch only: it runs on the node's image, not in mlinfra's environment. Every rank exits
with the same code (0 passed, 2 below the floor, 3 could not run collectives at all), and the first process
on each node writes one line for the bootstrap (`--result`): what was measured, against which floor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

PASSED, BELOW_FLOOR, NO_COLLECTIVES = 0, 2, 3
BACKENDS = ("nccl", "xla", "gloo")  # GPUs, Trainium (torch-neuronx), CPU (this program's own tests)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--bytes", type=int, required=True, help="message size of each all-reduce, bytes")
    parser.add_argument("--min-busbw", type=float, required=True, help="floor, GB/s")
    parser.add_argument("--result", required=True, help="file the node's first process writes its verdict to")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=600, help="seconds a collective may take")
    args = parser.parse_args(argv)
    if args.bytes < 4 or args.iters < 1 or args.warmup < 0 or args.min_busbw < 0:
        parser.error("--bytes must be >= 4, --iters >= 1, --warmup >= 0, --min-busbw >= 0")
    return args


def bus_bandwidth(nbytes: int, seconds: float, world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth in GB/s (0 for a single rank, which moves nothing)."""
    if world < 2 or seconds <= 0:
        return 0.0
    return nbytes / seconds / 1e9 * 2 * (world - 1) / world


def verdict(busbw: float, floor: float, world: int, nbytes: int, seconds: float) -> tuple[int, str]:
    measured = (
        f"all-reduce bus bandwidth {busbw:.2f} GB/s across {world} ranks "
        f"({nbytes} bytes, {seconds * 1e3:.2f} ms per all-reduce)"
    )
    if busbw >= floor:
        return PASSED, f"{measured}, at or above the floor of {floor:g} GB/s"
    return BELOW_FLOOR, (
        f"{measured}, below the floor of {floor:g} GB/s: collectives are not using the fabric as they should "
        "(see the node's log for NCCL's network and plugin lines)"
    )


def write_result(path: str, line: str) -> None:
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(line.replace("\n", " ") + "\n")
    os.replace(tmp, path)


def measure(args: argparse.Namespace) -> tuple[int, float]:
    """(world size, the slowest rank's seconds per all-reduce), after joining the process group."""
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = timedelta(seconds=args.timeout)
    if args.backend == "xla":
        import torch_xla.core.xla_model as xm  # torch-neuronx's XLA (on the Neuron image only)
        import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" backend

        dist.init_process_group("xla", init_method="xla://", timeout=timeout)
        device = xm.xla_device()

        def sync() -> None:
            xm.mark_step()
            xm.wait_device_ops()

    elif args.backend == "nccl":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local_rank))
        device = torch.device("cuda", local_rank)

        def sync() -> None:
            torch.cuda.synchronize(device)

    else:
        dist.init_process_group("gloo", timeout=timeout)
        device = torch.device("cpu")

        def sync() -> None:
            return None

    world = dist.get_world_size()
    data = torch.ones(args.bytes // 4, dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(data)
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(data)
    sync()
    seconds = torch.tensor([(time.perf_counter() - started) / args.iters], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # every rank judges by the slowest one
    sync()
    slowest = float(seconds.cpu().item())
    dist.destroy_process_group()
    return world, slowest


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    nbytes = args.bytes // 4 * 4
    try:
        world, seconds = measure(args)
    except Exception as error:  # any failure to run collectives is the gate's answer, not a traceback
        reason = f"no all-reduce across the nodes ({args.backend}): {type(error).__name__}: {error}"
        write_result(args.result, reason[:2000])
        print(f"mlinfra fabric check: {reason}", file=sys.stderr)
        return NO_COLLECTIVES
    code, line = verdict(bus_bandwidth(nbytes, seconds, world), args.min_busbw, world, nbytes, seconds)
    write_result(args.result, line)
    print(f"mlinfra fabric check: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
