#!/usr/bin/env bash
# A rank that dies mid-decode (SIGKILL: no exception, no MPI_Abort of its own) must not leave the others
# hanging in a collective: `mpirun -np 2 tpserve generate` on two GPUs, rank KILL_RANK killed once decoding
# has started; every rank must be gone within 30 s and the job must fail.
#   kill_rank_test.sh MPIEXEC TPSERVE SOURCE_DIR KILL_RANK      (exit 77 = skipped: fewer than 2 GPUs)
set -uo pipefail
mpiexec=$1 tpserve=$2 source_dir=$3 kill_rank=$4
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if ((gpus < 2)); then
  echo "SKIP: needs 2 GPUs, found ${gpus:-0}"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Long enough that it is still decoding when killed (the tiny model decodes thousands of tokens a second).
"$mpiexec" -np 2 --oversubscribe --bind-to none "$tpserve" --config "$source_dir/configs/tiny.yaml" \
  --set parallel.tp=2 --set runtime.backend=cuda --set runtime.max_seq_len=262144 \
  generate --prompt-ids 1,2,3 --max-tokens 250000 --ignore-eos >"$log" 2>&1 &
job=$!

# Decoding starts once both ranks have captured their graphs.
for _ in $(seq 1 600); do
  (($(grep -c "captured decode graph" "$log") >= 2)) && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
sleep 2
victim=""
for pid in $(pgrep -f "$tpserve"); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$kill_rank"; then
    victim=$pid
  fi
done
if [[ -z "$victim" ]] || ! kill -0 "$job" 2>/dev/null; then
  echo "FAIL: rank $kill_rank was not running when it was to be killed"
  cat "$log"
  exit 1
fi
echo "killing rank $kill_rank (pid $victim) while decoding"
kill -9 "$victim"
start=$SECONDS
for _ in $(seq 1 600); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
elapsed=$((SECONDS - start))
if kill -0 "$job" 2>/dev/null; then
  echo "FAIL: the job still runs 60 s after rank $kill_rank was killed"
  pkill -9 -f "$tpserve"
  tail -20 "$log"
  exit 1
fi
wait "$job"
rc=$?
tail -8 "$log"
if ((rc == 0)); then
  echo "FAIL: the job exited 0 although rank $kill_rank was killed"
  exit 1
fi
if ((elapsed > 30)); then
  echo "FAIL: the other rank took ${elapsed} s to stop"
  exit 1
fi
echo "rank $kill_rank killed: every rank stopped in ${elapsed} s, mpirun exit $rc"
