"""Config files (`configs/*.py`, each with `get_config()`) outside absl's flags, for the
benchmark scripts, with `section.key=value` overrides.

    cfg = load_config("configs/activemem_qwen3_8b.py", ["mesh.tensor=8", "model.path=Qwen3-8B"])
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from typing import Iterable


def apply_overrides(cfg, pairs: Iterable) -> None:
    """pairs: "a.b=value" strings or (key, value) tuples; a string value given for a
    non-string field is read as a Python literal ("False", "1e-3", "(1, 2)")."""
    for pair in pairs:
        key, value = pair.split("=", 1) if isinstance(pair, str) else pair
        *sections, name = key.split(".")
        node = cfg
        for s in sections:
            node = node[s]
        if name not in node:
            raise KeyError(f"{key}: no such config field")
        old = node[name]
        if isinstance(value, str) and not isinstance(old, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError) as e:
                raise ValueError(f"{key}={value!r}: not a Python literal ({e})") from None
        node[name] = value


def load_config(path: str, overrides: Iterable = ()):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such config file")
    root = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    if root not in sys.path:  # configs import configs.activemem_base
        sys.path.insert(0, root)
    spec = importlib.util.spec_from_file_location("config_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = module.get_config()
    apply_overrides(cfg, overrides)
    return cfg


__all__ = ["apply_overrides", "load_config"]
