#!/usr/bin/env bash
# `make run`: start the hub on the example providers (examples/hubwire.toml),
# make a scripted set of calls through the CLI and the HTTP gateway, print
# what each returned and the status table, then stop the hub with SIGTERM
# and check that it left no process behind.
#
#   scripts/run-demo.sh BIN_DIR     (BIN_DIR holds hubwire and example-chat;
#                                    ts/dist holds the built TypeScript provider)
set -euo pipefail

bin=${1:?usage: scripts/run-demo.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
config=${HUBWIRE_DEMO_CONFIG:-$root/examples/hubwire.toml}
export PATH="$bin:$PATH"
sock=$(dirname "$config")/hubwire.sock
# The hub refuses a config others could change (docs/security.md); a clone
# made under umask 002 leaves it group-writable.
chmod go-w "$config"
# The gateway's port, from the config's [hub] http line. Port 0 lets the hub
# pick a free one (as `make test-demo` does, so that no other process can
# take the port between choosing it and binding it); it is then read from the
# hub's "HTTP gateway listen=HOST:PORT" log line.
http_port=$(sed -n 's/^http *= *"[^"]*:\([0-9][0-9]*\)".*/\1/p' "$config" | sed -n 1p)
[ -n "$http_port" ] || { echo "error: $config has no [hub] http = \"HOST:PORT\" line" >&2; exit 1; }
log=$(mktemp "${TMPDIR:-/tmp}/hubwire-run.XXXXXX")
hub_pid=""

cleanup() {
  if [ -n "$hub_pid" ] && kill -0 "$hub_pid" 2>/dev/null; then
    kill -TERM "$hub_pid"; wait "$hub_pid" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
say() { printf '\n%s%s%s\n' "$bold" "$*" "$plain"; }
run() { printf '$ %s\n' "$*"; "$@"; }

# A tiny HTTP client in bash (no curl needed): prints status and body. It
# speaks HTTP/1.0, so streamed answers come unchunked.
http() {
  local method=$1 path=$2 body=${3:-}
  printf '$ curl -s -X %s localhost:%s%s%s\n' "$method" "$http_port" "$path" "${body:+ -H 'Content-Type: application/json' -d '$body'}"
  exec 5<>"/dev/tcp/127.0.0.1/$http_port"
  printf '%s %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "$method" "$path" "${#body}" "$body" >&5
  local response; response=$(cat <&5); exec 5>&-
  printf '%s\n' "$response" | sed -n 1p | tr -d '\r' | sed 's/^/  /'
  printf '%s\n' "$response" | tr -d '\r' | sed '1,/^$/d' | sed 's/^/  /'
}

if [ "$http_port" != 0 ] && (exec 5<>"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null; then
  echo "error: port $http_port is in use; stop what listens there (the HTTP gateway of $config wants it)" >&2
  exit 1
fi

say "== hubwire hub --config ${config#$root/}  (in the background; its log follows at the end)"
hubwire hub --config "$config" 2>"$log" & hub_pid=$!
expected=$(grep -c '^\[\[provider\]\]' "$config")
for _ in $(seq 200); do
  kill -0 "$hub_pid" 2>/dev/null || { cat "$log" >&2; echo "error: the hub exited" >&2; exit 1; }
  st=$(hubwire status --json --hub "unix:$sock" 2>/dev/null || true)
  ready=$(grep -c '"state": "ready"' <<<"$st" || true)
  replicas=$(grep -c '"state": ' <<<"$st" || true)
  # Every provider listed (a pool lists one row per replica) and every row ready.
  [ "$replicas" -ge "$expected" ] && [ "$ready" -eq "$replicas" ] && break
  sleep 0.1
done
[ "${ready:-0}" -ge "$expected" ] || { cat "$log" >&2; echo "error: providers not ready after 20 s" >&2; exit 1; }
if [ "$http_port" = 0 ]; then
  http_port=$(sed -n 's/.*HTTP gateway.*listen=[^ ]*:\([0-9][0-9]*\).*/\1/p' "$log" | sed -n 1p)
  [ -n "$http_port" ] || { cat "$log" >&2; echo "error: the hub did not log its HTTP gateway's port" >&2; exit 1; }
fi
export HUBWIRE_HUB="unix:$sock"

say "== what the hub routes"
run hubwire list

say "== calls through the CLI (hubwire protocol over a Unix socket)"
run hubwire call 8ball '{"question": "Will the build be green?"}'
run hubwire call countdown '{"from": 3}'
printf '$ printf ... | hubwire call wordcount\n'
printf '{"text": "hello hub"}\n{"text": "one provider per command"}\n' | hubwire call wordcount
run hubwire call roll '{"sides": 6, "count": 3}'
run hubwire call 8ball '{"question": ""}' || echo "  (exit status $?: the provider refused an empty question, as it should)"
run hubwire call nope || echo "  (exit status $?: no provider offers 'nope')"
run hubwire call fortune '{"topic": "go"}'
run hubwire-go-client
printf '$ printf ... | hubwire call translate\n'
printf '{"text": "hello hub"}\n{"text": "Python speaks hubwire"}\n' | hubwire call translate

say "== calls through the HTTP gateway"
http POST /v1/call/8ball '{"question": "Is HTTP slower?"}'
http POST /v1/call/countdown '{"from": 2}'
http POST /v1/call/roll '{"sides": 20, "count": 1}'
http GET /healthz

say "== hubwire status"
pids=$(hubwire status --json | sed -n 's/.*"pid": \([0-9][0-9]*\).*/\1/p' | tr '\n' ' ')
run hubwire status

say "== SIGTERM: the hub drains, stops its providers and exits"
kill -TERM "$hub_pid"
status=0; wait "$hub_pid" || status=$?
hub_pid=""
left=""
for p in $pids; do if [ -e "/proc/$p" ]; then left="$left $p"; fi; done
echo "hub exit status: $status; provider processes left: ${left:-none}"

say "== the hub's log (provider output arrives tagged with the provider's name)"
sed 's/^/  /' "$log"

[ "$status" -eq 0 ] && [ -z "$left" ] || { echo "error: the hub did not stop cleanly" >&2; exit 1; }
say "== done: every call answered, the hub stopped cleanly"
