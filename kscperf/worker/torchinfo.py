"""torch's facts for a cell's metadata: its build, threads and, on CUDA, the device."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["torch_info"]


def torch_info(device: str) -> dict[str, Any]:
    """torch's build, threads and, for a CUDA cell, the device (name, memory, driver)."""
    import torch

    info: dict[str, Any] = {
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "cuda_version": torch.version.cuda or "none",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info.update(
            gpu_name=props.name,
            gpu_memory_bytes=int(props.total_memory),
            gpu_capability=f"{props.major}.{props.minor}",
            cudnn_version=str(torch.backends.cudnn.version() or "none"),
            allow_tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
        )
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                info["gpu_driver"] = out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return info
