#!/usr/bin/env bash
# Serving under MPI with tensor parallelism: starts `mpirun -np 2 tpserve --config configs/tiny.yaml
# --set parallel.tp=2` on an ephemeral port with an API key (TPSERVE_API_KEY, read by rank 0 only), waits
# for /health, checks that a request without the key gets 401, sends a completion and a streaming chat
# request with it, then sends SIGTERM to both ranks (rank 0 drains and releases rank 1, which ignores the
# signal itself) and checks that the job, and so every rank, exits 0, that the answers match a 1-rank
# server, and that the key never reached the log.
#   serve_mpi_test.sh MPIEXEC TPSERVE SOURCE_DIR
set -uo pipefail
mpiexec=$1 tpserve=$2 src=$3
work=$(mktemp -d)
mpirun_pid=
cleanup() {
  [[ -n $mpirun_pid ]] && kill -KILL "$mpirun_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- server log"
  cat "$work/server.log"
  exit 1
}

# Starts a server (extra args: mpirun prefix); sets port from its log line "listening on http://host:port".
start_server() {
  "$@" "$tpserve" --config "$src/configs/tiny.yaml" --set runtime.backend=cpu --set server.port=0 \
    "${tp_args[@]}" >"$work/server.log" 2>&1 &
  server_pid=$!
  port=
  for _ in $(seq 600); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/server.log" | head -1)
    [[ -n $port ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited before becoming healthy"
    sleep 0.1
  done
  fail "no healthy server after 60 s"
}

auth=()  # curl arguments that authenticate (when the server has an API key)
ask() {
  curl -sS --max-time 60 "${auth[@]}" "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "Hello, my name is", "max_tokens": 16, "temperature": 0, "ignore_eos": true}' >"$work/$1.json" ||
    fail "completion request failed"
  curl -sSN --max-time 60 "${auth[@]}" "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0, "stream": true}' \
    >"$work/$1.sse" || fail "streaming chat request failed"
  grep -q '"object":"text_completion"' "$work/$1.json" || fail "not a completion: $(cat "$work/$1.json")"
  tail -c 200 "$work/$1.sse" | grep -q 'data: \[DONE\]' || fail "the stream did not end with [DONE]"
}
# The generated text of a JSON response or of an SSE stream (chunk boundaries may differ between runs).
text_of() {
  python3 - "$1" <<'PY'
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
if raw.startswith("data: "):
    events = [json.loads(e[6:]) for e in raw.split("\n\n") if e.startswith("data: {")]
    print("".join(c["delta"].get("content", "") for e in events for c in e["choices"]))
else:
    body = json.loads(raw)
    print(body["choices"][0]["text"], body["usage"])
PY
}

# Reference: one rank.
tp_args=()
start_server
ask single
kill -TERM "$server_pid"
wait "$server_pid" || fail "the 1-rank server exited with $?"

# Two ranks, tensor parallel, with an API key from the environment (only rank 0 serves HTTP and reads it).
key=sk-mpi-test-4e1d9a
tp_args=(--set parallel.tp=2)
export TPSERVE_API_KEY=$key
start_server "$mpiexec" -np 2 --oversubscribe --allow-run-as-root --bind-to none
unset TPSERVE_API_KEY
mpirun_pid=$server_pid
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/models")
[[ $code == 401 ]] || fail "a request without the API key got $code, expected 401"
auth=(-H "Authorization: Bearer $key")
ask tp2
grep -q "$key" "$work/server.log" && fail "the API key appears in the server log"
[[ "$(text_of "$work/single.json")" == "$(text_of "$work/tp2.json")" ]] ||
  fail "tp=2 answered differently: $(cat "$work/tp2.json") vs $(cat "$work/single.json")"
[[ "$(text_of "$work/single.sse")" == "$(text_of "$work/tp2.sse")" ]] || fail "tp=2 streamed differently: $(cat "$work/tp2.sse") vs $(cat "$work/single.sse")"

ranks=$(pgrep -P "$mpirun_pid" | tr '\n' ' ')
[[ $(wc -w <<<"$ranks") == 2 ]] || fail "expected 2 rank processes under mpirun, found: $ranks"
kill -TERM $ranks
for _ in $(seq 300); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.1; done
wait "$mpirun_pid"
rc=$?
mpirun_pid=
[[ $rc == 0 ]] || fail "mpirun exited with $rc after SIGTERM (a rank failed)"
grep -q '\[r0\].*stopped' "$work/server.log" || fail "rank 0 did not report a clean stop"
grep -q '\[r1\].*released by rank 0' "$work/server.log" || fail "rank 1 did not report its release"
echo "serve_mpi_tp2: 2 ranks served the same answers as 1 rank and exited 0 after SIGTERM"
