#!/usr/bin/env bash
# tpserve (bench/tp_decode) against Hugging Face transformers (bench/peers/transformers_decode.py) on the
# same checkpoint and the same GPU, one after the other in one run; prints the decode step times side by
# side with the ratio (bench/peers/side_by_side.py). Writes everything under --out.
#
#   bench/peers/compare.sh [--checkpoint DIR] [--layers N] [--build DIR] [--out DIR] [--concurrency 1,16]
#                          [--input-len 128] [--steps 64] [--rounds 2] [--only tpserve|peer]
#
# The checkpoint is tpserve's synthetic Qwen3-30B-A3B shape (tpserve-gen --preset qwen3-30b-a3b --seed 1),
# written to --checkpoint when that folder has no config.json yet (about 1.25 GB a layer + 1.3 GB; the
# script checks the free space first). Random weights route differently from the trained model, but both
# sides run the same weights. Environment: PEER_ARGS (extra transformers_decode.py flags, e.g.
# "--experts batched_mm"), TP_DECODE_ARGS (extra tp_decode flags), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/../.."

checkpoint=/dev/shm/tpserve-qwen3-30b-a3b
layers=48
build=build
out=out/peer-compare
concurrency=1,16
input_len=128
steps=64
rounds=2
only=
python=${PYTHON:-python3}
while (($#)); do
  case $1 in
    --checkpoint) checkpoint=$2 ;;
    --layers) layers=$2 ;;
    --build) build=$2 ;;
    --out) out=$2 ;;
    --concurrency) concurrency=$2 ;;
    --input-len) input_len=$2 ;;
    --steps) steps=$2 ;;
    --rounds) rounds=$2 ;;
    --only) only=$2 ;;
    -h | --help)
      sed -n '2,13p' "$0"
      exit 0
      ;;
    *)
      echo "compare.sh: unknown argument $1 (--help)" >&2
      exit 2
      ;;
  esac
  shift 2
done
mkdir -p "$out"
max_batch=$(tr ',' '\n' <<<"$concurrency" | sort -n | tail -1)
say() { echo "[compare] $*" >&2; }

# 1. The checkpoint, once.
if [[ ! -f $checkpoint/config.json ]]; then
  need_gb=$(((layers * 125 + 130 + 99) / 100))
  mkdir -p "$checkpoint"
  free_gb=$(($(df --output=avail -k "$checkpoint" | tail -1) / 1024 / 1024))
  if ((free_gb < need_gb)); then
    say "$checkpoint: ${free_gb} GB free, a ${layers}-layer checkpoint needs about ${need_gb} GB (--layers, --checkpoint)"
    exit 3
  fi
  say "writing a ${layers}-layer Qwen3-30B-A3B-shaped checkpoint to $checkpoint"
  # No config.json: an interrupted write's shards, which tpserve-gen would refuse to mix with its own.
  rm -f "$checkpoint"/*.safetensors "$checkpoint"/model.safetensors.index.json
  "$build/tpserve-gen" --preset qwen3-30b-a3b --layers "$layers" --seed 1 --out "$checkpoint" >"$out/generate.log" 2>&1
fi
layers_in_checkpoint=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["num_hidden_layers"])' \
  "$checkpoint/config.json")
say "checkpoint $checkpoint: $layers_in_checkpoint layers"

# 2. tpserve: decode steps of c requests at once, graphs on (configs/qwen3-30b-a3b.yaml), one arm.
tp_rc=0
if [[ $only != peer ]]; then
  say "tp_decode (log: $out/tp_decode.log)"
  # shellcheck disable=SC2086  # TP_DECODE_ARGS is a list of flags
  "$build/bench/tp_decode" --config configs/qwen3-30b-a3b.yaml --set model.synthetic=null \
    --set model.path="$checkpoint" --set runtime.max_batch="$max_batch" \
    --set runtime.max_seq_len=$(((input_len + steps + 64 + 15) / 16 * 16)) --concurrency "$concurrency" \
    --input-len "$input_len" --output-len $((steps + 1)) --rounds "$rounds" --arm tpserve \
    --json "$out/tp_decode.json" ${TP_DECODE_ARGS:-} >"$out/tp_decode.log" 2>&1 || tp_rc=$?
  say "tp_decode rc=$tp_rc"
fi

# 3. The peer, on the same GPU after tp_decode has exited.
peer_rc=0
if [[ $only != tpserve ]]; then
  say "transformers (log: $out/peer.log)"
  # shellcheck disable=SC2086  # PEER_ARGS is a list of flags
  "$python" bench/peers/transformers_decode.py --model "$checkpoint" --concurrency "$concurrency" \
    --input-len "$input_len" --steps "$steps" --json "$out/peer.json" ${PEER_ARGS:-} \
    >"$out/peer.log" 2>&1 || peer_rc=$?
  say "transformers_decode rc=$peer_rc"
  tail -5 "$out/peer.log" >&2
fi

# 4. Side by side.
if [[ -f $out/tp_decode.json && -f $out/peer.json ]]; then
  "$python" bench/peers/side_by_side.py "$out/tp_decode.json" "$out/peer.json" --arm tpserve \
    --json "$out/compare.json" | tee "$out/compare.txt"
else
  say "no side-by-side table: $out/tp_decode.json or $out/peer.json is missing (see the logs)"
fi
((tp_rc == 0 && peer_rc == 0))
