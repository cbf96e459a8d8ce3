"""What every `launch/bench_*.py` script reports besides its table: peak RSS and a JSON file
that says where it came from (`provenance`: commit, command, date, machine)."""

from __future__ import annotations

import datetime
import json
import os
import resource
import subprocess
import sys


def peak_rss_gib() -> float:
    """Peak resident memory of this process so far, in GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def machine() -> str:
    """This machine in words: CPU model, cores this process may use, and its widest vector
    extension (float32 matmul speed depends on it: docs/measurements.md)."""
    model, flags = "unknown CPU", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line
    except OSError:
        pass
    isa = "AMX" if "amx_bf16" in flags else "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "-"
    return f"{model}, {len(os.sched_getaffinity(0))} cores, {isa}"


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# read when a bench imports this module, at its start: the code that runs, not the tree
# as it is when the bench ends
_CHECKOUT = {"commit": _git("rev-parse", "HEAD") or "unknown", "dirty": bool(_git("status", "--porcelain", "-uno"))}


def provenance(config=None) -> dict:
    """{"commit", "dirty", "command", "date", "machine"[, "config"]}: what a results file needs
    to be rerun. The commit and whether tracked files differed from it are read when this
    module is imported (a bench's start). The command is this process's, as `python -m
    module` when run that way."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    argv = (["python", "-m", spec.name] if spec and spec.name else ["python", sys.argv[0]]) + sys.argv[1:]
    out = {**_CHECKOUT, "command": " ".join(argv), "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
           "machine": machine()}
    if config is not None:
        out["config"] = config.to_dict() if hasattr(config, "to_dict") else config
    return out


def write_json(path: str, result) -> None:
    """Write `result` (a dict gains "provenance" unless it has one) to path, as JSON."""
    if isinstance(result, dict) and "provenance" not in result:
        result = {**result, "provenance": provenance()}
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
