"""Data-parallel training over several processes with torch.distributed, as launched by torchrun.

torchrun starts one process per GPU (or per CPU worker) and sets RANK, LOCAL_RANK and WORLD_SIZE in each.
Every process builds the same model and takes its own share of each update's batches; DDP sums the gradients.
NCCL carries the traffic between GPUs, gloo between CPU processes. A single process (no torchrun) is a world of
one, in which every collective here returns its input unchanged.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from nmtkit.errors import NmtkitError
from nmtkit.runtime.device import pick_device


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    local_rank: int = 0
    size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, logs and metrics."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over all processes (float64)."""
        if not self.distributed:
            return values
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def any(self, flag: bool) -> bool:
        """True on every process when `flag` is true on any of them."""
        return self.sum([float(flag)])[0] > 0

    def main_decides(self, flag: bool) -> bool:
        """Rank 0's `flag`, on every process."""
        return self.sum([float(flag) if self.is_main else 0.0])[0] > 0

    def gather(self, item: object) -> list[object]:
        """Every process's `item`, in rank order (on every process)."""
        if not self.distributed:
            return [item]
        items: list[object] = [None] * self.size
        dist.all_gather_object(items, item)
        return items


def init_world(device_name: str) -> World:
    """Join the process group torchrun set up (NCCL on GPUs, gloo on CPUs), or a world of one without torchrun."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World(device=pick_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = pick_device(device_name).type == "cuda"
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise NmtkitError(f"process {local_rank} on this node has no GPU: {torch.cuda.device_count()} visible; "
                              "start at most that many processes per node")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=size)
    return World(rank, local_rank, size, device)


def leave_world(world: World, wait_for_all: bool = True) -> None:
    """Destroy the process group. After a run that finished everywhere, the processes first wait for each other,
    so that none tears its connections down while another still uses them; objects that used the group (DDP)
    are collected before it goes (gloo aborted a process at exit when they outlived it)."""
    if world.distributed and dist.is_initialized():
        gc.collect()
        if wait_for_all:
            dist.barrier()
        dist.destroy_process_group()


def launch(processes: int, argv: list[str]) -> int:
    """Run `nmtkit <argv>` as `processes` processes on this machine under torchrun; returns its exit status.

    torchrun runs in a session of its own, so that the terminal's Ctrl-C reaches this process alone: it relays
    SIGINT and SIGTERM to the workers, which save last.pt and stop together, and a second Ctrl-C kills them all.
    (torchrun itself would abort with a traceback on the signal.)"""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
               "-m", "nmtkit", *argv]
    child = subprocess.Popen(command, start_new_session=True)
    received: list[int] = []

    def relay(number: int, frame) -> None:
        received.append(number)
        if len(received) > 1 and number == signal.SIGINT:
            os.killpg(child.pid, signal.SIGKILL)
            return
        for pid in child_processes(child.pid):
            try:
                os.kill(pid, number)
            except ProcessLookupError:  # it ended between the listing and the signal
                pass

    previous = {number: signal.signal(number, relay) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = child.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 128 + received[0] if received else status


def child_processes(parent: int) -> list[int]:
    """The process ids whose parent is `parent` (Linux /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == parent:
            children.append(int(stat.parent.name))
    return children


def launch_on_gpus(gpus: int, argv: list[str]) -> int:
    """Run the `nmtkit <argv>` train command (less its --gpus) as `gpus` processes under torchrun, one a GPU."""
    if torch.cuda.device_count() < gpus:
        raise NmtkitError(f"--gpus {gpus} needs {gpus} CUDA devices, this machine has {torch.cuda.device_count()}; "
                          "for several CPU processes run torchrun --nproc-per-node=N -m nmtkit train --device cpu ...")
    kept, skip = [], False
    for arg in argv:
        if skip or arg == "--gpus" or arg.startswith("--gpus="):
            skip = arg == "--gpus"
            continue
        kept.append(arg)
    return launch(gpus, kept)
