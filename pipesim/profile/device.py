"""What the profile runs on: a CUDA device or the CPU, its thread count, and the provenance record."""

from __future__ import annotations

import datetime
import enum
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from pipesim.errors import PipesimError


class DeviceKind(enum.Enum):
    CUDA = "cuda"
    CPU = "cpu"


@dataclass(frozen=True)
class Device:
    kind: DeviceKind
    name: str
    threads: int | None  # CPU intra-op threads per process (torch.set_num_threads); None on CUDA
    rank: int = 0
    world_size: int = 1

    @property
    def cuda(self) -> bool:
        return self.kind is DeviceKind.CUDA

    @property
    def torch_device(self):
        import torch

        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if self.cuda else torch.device("cpu")

    @property
    def has_fp8(self) -> tuple[bool, str]:
        """(FP8 GEMMs measurable, why not when not)."""
        import torch

        if not self.cuda:
            return False, "no FP8 GEMM on CPU (torch._scaled_mm needs CUDA sm_89+): FP8 skipped"
        if not hasattr(torch, "_scaled_mm"):
            return False, f"torch {torch.__version__} has no torch._scaled_mm: FP8 skipped"
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9):
            return False, f"compute capability {major}.{minor} < 8.9 has no FP8 tensor cores: FP8 skipped"
        return True, ""


def open_device(threads: int | None, rank: int, world_size: int) -> Device:
    """The device this process measures on; ``threads`` pins torch's CPU intra-op threads (the executor's)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        return Device(DeviceKind.CUDA, torch.cuda.get_device_name(), None, rank, world_size)
    if threads is not None:
        if threads > (os.cpu_count() or 1):
            raise PipesimError(f"--threads {threads} is more than the {os.cpu_count()} CPU cores here; "
                               f"use at most {os.cpu_count()}")
        torch.set_num_threads(threads)
    return Device(DeviceKind.CPU, cpu_model(), torch.get_num_threads(), rank, world_size)


def cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def memory_gib(device: Device) -> float:
    """Device memory (CUDA) or the machine's RAM (CPU), GiB."""
    import torch

    if device.cuda:
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 1.0


def provenance(device: Device, command: list[str], backend: str | None) -> dict:
    """Where and how the tables were measured; no host name (the file can be committed and shared)."""
    import numpy
    import torch

    from pipesim import __version__

    record = {
        "device": device.name,
        "device_kind": device.kind.value,
        "torch": str(torch.__version__),
        "numpy": str(numpy.__version__),
        "pipesim": __version__,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([*(["torchrun", "--nproc-per-node", str(device.world_size), "-m", "pipesim.profile"]
                               if device.world_size > 1 else ["pipesim", "profile"]), *command]),
        "processes": device.world_size,
        "collective_backend": backend or "none (one process: collectives not measured)",
    }
    if device.cuda:
        record["cuda"] = torch.version.cuda or "unknown"
        driver = getattr(torch._C, "_cuda_getDriverVersion", None)
        if driver is not None:
            version = driver()
            record["cuda_driver"] = f"{version // 1000}.{version % 1000 // 10}"
        record["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    else:
        record["cpu_threads_per_process"] = device.threads
        record["cpu_cores"] = os.cpu_count() or 1
    return record
