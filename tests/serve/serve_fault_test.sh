#!/usr/bin/env bash
# An engine failure while HTTP requests keep arriving: tpserve (one rank, CPU) with an injected fault at a
# decode step, /tokenize and completions sent from several clients meanwhile. The server must answer the
# open requests and exit 1 with the fault's message; it crashed (exit 139) when the tokenizer, engine and
# loop were destroyed before the HTTP workers that use them had stopped.
#   serve_fault_test.sh TPSERVE SOURCE_DIR
set -uo pipefail
tpserve=$1 src=$2
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill -KILL "$server_pid" 2>/dev/null
  jobs -p | xargs -r kill 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  tail -30 "$work/server.log"
  exit 1
}

TPSERVE_FAULT_INJECT=rank:0,step:300 "$tpserve" --config "$src/configs/tiny.yaml" --set runtime.backend=cpu \
  --set server.port=0 >"$work/server.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 600); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/server.log" | head -1)
  [[ -n $port ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  port=
  kill -0 "$server_pid" 2>/dev/null || fail "the server exited before becoming healthy"
  sleep 0.1
done
[[ -n $port ]] || fail "no healthy server after 60 s"

prompt=$(printf 'hello world %.0s' $(seq 200))
hammer() {  # until the server is gone
  while kill -0 "$server_pid" 2>/dev/null; do
    curl -s --max-time 10 "http://127.0.0.1:$port/$1" -H 'Content-Type: application/json' -d "$2" >/dev/null
  done
}
for _ in 1 2 3; do
  hammer tokenize "{\"prompt\": \"$prompt\"}" &
  hammer v1/completions '{"prompt": "hi", "max_tokens": 2}' &
done
rc=
for _ in $(seq 600); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid"
    rc=$?
    break
  fi
  sleep 0.1
done
server_pid_done=$server_pid
server_pid=
[[ -n $rc ]] || { kill -KILL "$server_pid_done"; fail "the server still ran 60 s after the fault"; }
wait 2>/dev/null
grep -q "injected fault (TPSERVE_FAULT_INJECT) on rank 0" "$work/server.log" || fail "no fault message"
[[ $rc == 1 ]] || fail "exit status $rc, expected 1"
echo "the engine failed under load; the server exited 1"
