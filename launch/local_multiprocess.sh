#!/usr/bin/env bash
# Two CPU processes on 127.0.0.1 forming one JAX runtime (one device each) run one
# training job: rows are split over both, each host rolls out with its own engine, the
# update is one jitted step over the 2-device mesh, and the memory tree stays identical.
#
#   launch/local_multiprocess.sh [config] [--config.x=y ...]
#   e.g. launch/local_multiprocess.sh configs/activemem_tiny_cpu.py --config.train.steps=1
# Environment: PYTHON (default .venv/bin/python), PORT (default: a free port),
# LOG_DIR (default /tmp): each process logs to $LOG_DIR/activemem_proc<i>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/activemem_tiny_cpu.py}
shift || true
PY=${PYTHON:-.venv/bin/python}
PORT=${PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
LOG_DIR=${LOG_DIR:-/tmp}
pids=()
for i in 0 1; do
  env -u XLA_FLAGS JAX_PLATFORMS=cpu "$PY" -m launch.train --config "$CONFIG" \
    --config.mesh.data=1 --config.mesh.fsdp=-1 --config.mesh.tensor=1 \
    --config.distributed.coordinator_address="127.0.0.1:$PORT" \
    --config.distributed.num_processes=2 --config.distributed.process_id="$i" "$@" \
    > "$LOG_DIR/activemem_proc$i.log" 2>&1 &
  pids+=($!)
done
# the exit status: 0 when both succeed, else the first non-zero one (75: preempted, rerun)
status=0
for i in 0 1; do
  code=0
  wait "${pids[$i]}" || code=$?
  if [ "$code" != 0 ]; then
    [ "$status" = 0 ] && status=$code
    echo "process $i exited $code; the end of $LOG_DIR/activemem_proc$i.log:" >&2
    tail -n 30 "$LOG_DIR/activemem_proc$i.log" >&2
  fi
done
exit $status
