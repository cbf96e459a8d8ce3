"""What every `launch/bench_*.py` script reports besides its table: peak RSS and a JSON file."""

from __future__ import annotations

import json
import os
import resource


def peak_rss_gib() -> float:
    """Peak resident memory of this process so far, in GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def write_json(path: str, result) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
