#!/usr/bin/env bash
# Cloud TPU VM slice: create it, install the project on every worker, run one training
# config on all workers at once (JAX finds the slice's hosts itself).
#
#   launch/tpu_pod.sh create                 # the slice ($TPU_NAME, $ZONE, $TPU_TYPE, $TPU_VERSION)
#   launch/tpu_pod.sh setup                  # copy this checkout to every worker, bash launch/install.sh tpu
#   launch/tpu_pod.sh train configs/activemem_qwen2_5_1_5b.py --config.model.path=/data/Qwen2.5-1.5B-Instruct
#   launch/tpu_pod.sh ssh 'nproc'            # any command on every worker
#   launch/tpu_pod.sh delete
#
# Check a config fits the slice first, on any machine: python launch/aot.py --config CONFIG --topology v4-32
# Models and data must be on every worker (or a mounted bucket) at the same path: nothing
# is fetched at run time. Checkpoints go to config.out_dir; use a shared filesystem or a
# gs:// path that orbax can write to from all hosts.
set -euo pipefail
TPU_NAME=${TPU_NAME:-activemem}
ZONE=${ZONE:-us-central2-b}
TPU_TYPE=${TPU_TYPE:-v4-32}
TPU_VERSION=${TPU_VERSION:-tpu-ubuntu2204-base}
REMOTE_DIR=${REMOTE_DIR:-activemem-jax}
gc() { gcloud compute tpus tpu-vm "$@" --zone "$ZONE"; }
on_all() { gc ssh "$TPU_NAME" --worker=all --command "$1"; }

cmd=${1:-}
shift || true
case "$cmd" in
  create) gc create "$TPU_NAME" --accelerator-type "$TPU_TYPE" --version "$TPU_VERSION" ;;
  setup)
    tar czf /tmp/activemem-src.tgz --exclude=.venv --exclude=runs --exclude=.git .
    gc scp /tmp/activemem-src.tgz "$TPU_NAME":/tmp/ --worker=all
    on_all "mkdir -p $REMOTE_DIR && tar xzf /tmp/activemem-src.tgz -C $REMOTE_DIR && cd $REMOTE_DIR && \
            bash launch/install.sh tpu" ;;  # jax[tpu] + the libtpu it pins (setup.py extra)
  train)
    config=${1:?usage: tpu_pod.sh train CONFIG [--config.x=y ...]}
    shift
    # num_processes=-1 and no coordinator: jax.distributed.initialize() discovers the slice
    on_all "cd $REMOTE_DIR && .venv/bin/python -m launch.train --config $config \
            --config.distributed.num_processes=-1 $*" ;;
  ssh) on_all "$*" ;;
  delete) gc delete "$TPU_NAME" --quiet ;;
  *) echo "usage: $0 create|setup|train CONFIG [overrides]|ssh CMD|delete" >&2; exit 2 ;;
esac
