#!/usr/bin/env bash
# `tpserve tokenize`: the ids of Qwen3's tokenizer for a text (REFERENCE.md's vectors), the --config
# before or after the subcommand, the same ids as POST /tokenize gives (checked in http_tokenize_test),
# exit 2 with a message when the tokenizer is missing, and no MPI or model needed. Exit 77 (skipped) when
# launch/fetch-tokenizer has not been run.
#   tokenize_cli_test.sh TPSERVE SOURCE_DIR
set -uo pipefail
tpserve=$1 src=$2
[[ -f $src/.deps/qwen3-tokenizer.json ]] || { echo "skip: $src/.deps/qwen3-tokenizer.json is missing (launch/fetch-tokenizer)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

out=$("$tpserve" tokenize --config "$src/configs/tiny.yaml" --text 'Hello, world!') || fail "exit $?: $out"
[[ $out == '{"tokens":[9707,11,1879,0],"count":4}' ]] || fail "got $out"
out=$("$tpserve" --config "$src/configs/tiny.yaml" tokenize --text '<|im_start|>hello<|im_end|>') || fail "exit $?"
[[ $out == '{"tokens":[151644,14990,151645],"count":3}' ]] || fail "got $out"
out=$("$tpserve" tokenize --config "$src/configs/tiny.yaml" --text '') || fail "exit $?"
[[ $out == '{"tokens":[],"count":0}' ]] || fail "got $out"

err=$("$tpserve" tokenize --config "$src/configs/tiny.yaml" --set model.tokenizer=/nonexistent.json --text hi 2>&1)
rc=$?
[[ $rc == 2 ]] || fail "a missing tokenizer exited $rc, expected 2: $err"
grep -q 'model.tokenizer: /nonexistent.json does not exist' <<<"$err" || fail "no clear message: $err"
"$tpserve" tokenize --config "$src/configs/tiny.yaml" >/dev/null 2>&1 && fail "--text is not required"
echo "tokenize_cli: ok"
