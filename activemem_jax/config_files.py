"""Config files (`configs/*.py`, each with `get_config()`) outside absl's flags, for the
benchmark scripts, with `section.key=value` overrides; and one-line errors for the absl
launchers.

    cfg = load_config("configs/activemem_qwen3_8b.py", ["mesh.tensor=8", "model.path=Qwen3-8B"])
    cfg = flag_value(_CONFIG)          # absl: a bad file or field ends the run in one line
    with config_errors(): trainer = Trainer(cfg)
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import sys
from typing import Iterable

EXIT_CONFIG = 2  # a config that cannot be used (as a usage error)


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
    spec = importlib.util.spec_from_file_location("config_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = module.get_config()
    apply_overrides(cfg, overrides)
    return cfg


def _first_line(e: Exception) -> str:
    return next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)


def _fail(message: str) -> None:
    print(f"config error: {message}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def flag_value(holder, argv: Iterable = None):
    """The config an absl config-file flag holds, or exit EXIT_CONFIG with one line naming
    the missing file or the unknown field (config_flags reports either as a traceback)."""
    argv = list(sys.argv if argv is None else argv)
    try:
        value = holder.value
        value.keys()  # a file that failed to load is a proxy that raises on first use
        return value
    except Exception as e:  # noqa: BLE001 (whatever config_flags raises, it is the config's fault)
        if os.environ.get("ACTIVEMEM_TRACEBACK"):
            raise
        text = str(e)
        name = getattr(holder, "name", "config")
        if "Failed loading config file" in text or isinstance(e, OSError):
            path = next((a.split("=", 1)[1] if "=" in a else argv[i + 1] for i, a in enumerate(argv)
                         if a.startswith(f"--{name}=") or (a == f"--{name}" and i + 1 < len(argv))), "?")
            why = next((line.strip() for line in text.splitlines() if "Errno" in line or "Error" in line),
                       _first_line(e))
            _fail(f"--{name}={path}: cannot load the config file ({why})")
        _fail(_field_error(e, name, argv))


def _field_error(e: Exception, name: str, argv: list) -> str:
    """One line for an unknown --name.a.b override."""
    text = str(e)
    hint = re.search(r'Did you mean "(\w+)" instead of "(\w+)"', text)
    m = re.search(r"'(\w+)", text)
    key = hint.group(2) if hint else (m.group(1) if m else "")
    given = next((a.split("=", 1)[0] for a in argv if a.startswith(f"--{name}.") and
                  key in a.split("=", 1)[0].split(".")[1:]), "")
    if given:
        return f"{given}: no such config field '{key}'" + (f" (did you mean '{hint.group(1)}'?)" if hint else "")
    return f"--{name}: {type(e).__name__}: {_first_line(e)}"


def parse_args(ap, argv: Iterable = None):
    """`ap.parse_args` for a tool that takes a config file and overrides (bench_memory,
    bench_step, bench_checkpoint, bench_train / bench_decode --config): absl's spelling
    `--config.section.field=value` (or `--config.section.field value`), as launch.train
    takes it, is accepted beside `--set section.field=value`; both land in `args.set`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    rest, overrides, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--config."):
            key = arg[len("--config."):]
            if "=" not in key:
                if i + 1 >= len(argv):
                    _fail(f"{arg}: give a value ({arg}=VALUE)")
                key, i = f"{key}={argv[i + 1]}", i + 1
            overrides.append(key)
        else:
            rest.append(arg)
        i += 1
    args = ap.parse_args(rest)
    args.set = list(getattr(args, "set", None) or []) + overrides
    return args


def parse_flags(argv: list) -> list:
    """absl's flag parsing (`app.run(main, flags_parser=parse_flags)`), with an unknown
    config field or a bad value reported in one line (exit EXIT_CONFIG)."""
    from absl import flags

    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        _fail(_first_line(e))
    except (KeyError, AttributeError, ValueError, TypeError) as e:
        if os.environ.get("ACTIVEMEM_TRACEBACK"):
            raise
        name = next((a[2:].split(".", 1)[0] for a in argv if a.startswith("--") and "." in a.split("=", 1)[0]),
                    "config")
        _fail(_field_error(e, name, argv))


@contextlib.contextmanager
def config_errors():
    """A ValueError / FileNotFoundError / KeyError raised inside (the checks that name a
    field) ends the run in one line; ACTIVEMEM_TRACEBACK=1 keeps the traceback."""
    try:
        yield
    except (ValueError, FileNotFoundError, KeyError) as e:
        if os.environ.get("ACTIVEMEM_TRACEBACK"):
            raise
        _fail(f"{_first_line(e)} (ACTIVEMEM_TRACEBACK=1 shows where)")


__all__ = ["EXIT_CONFIG", "apply_overrides", "config_errors", "flag_value", "load_config", "parse_args",
           "parse_flags"]
