#!/usr/bin/env bash
# The metrics endpoint of a real `drainer serve` survives
# connection storms (tests/e2e/storm.py, all on loopback, each storm from a
# loopback source address of its own as a pod of the cluster would be):
#  - 500 connections that connect and close at once (before the fix, 32 of them
#    locked /healthz and /metrics up for good);
#  - at once: 300 idle connections, 300 half-sent requests, 50 oversized requests
#    (431), 20 clients sending a byte a second (never idle);
#  - 200 idle connections from the prober's own address;
#  - from the prober's own address, 64 connections held 0.5 s, then 40 half requests
#    each closed as soon as sent: /healthz from that address answers within 2 s
#    during it and right after (before, the prober was turned away while the storm
#    held the address's share, and after it, as MHD never saw those closes, until
#    the idle timeout) and no connection is left in CLOSE-WAIT.
# After each storm /healthz answers a client with a 10 s timeout (the latency is
# printed, not asserted) and /readyz says the node watch is synced and the API
# server answers; the server closed every storm connection itself (idle timeout,
# request deadline); serve is still running and /metrics passes promtool.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-3
storm=$e2e_root/tests/e2e/storm.py

port=$(free_port)
# probe WHAT: GET /healthz with a 10 s timeout; prints the latency; fails unless 200 "ok".
probe() {
	local out code secs
	out=$(curl -s --max-time 10 -o "$e2e_tmp/probe.body" -w '%{http_code} %{time_total}' \
		"http://127.0.0.1:$port/healthz" 2>&1)
	code=${out%% *} secs=${out##* }
	echo "    /healthz after $1: HTTP $code in ${secs} s"
	[ "$code" = 200 ] && [ "$(cat "$e2e_tmp/probe.body")" = ok ]
}
readyz() { [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; }
# storm_json KIND N SRC: runs one storm in the foreground; its JSON line in $e2e_tmp/KIND.json.
storm_run() { python3 "$storm" "$1" --port "$port" -n "$2" --src "$3" --max-seconds 40 >"$e2e_tmp/$1.json"; }
all_closed() { # KIND: every connection of that storm was closed by the server
	local f=$e2e_tmp/$1.json
	echo "    $1: $(cat "$f")"
	[ "$(jq -r '.still_open' "$f")" = 0 ] && [ "$(jq -r '.closed_by_server' "$f")" = "$(jq -r '.n' "$f")" ]
}

echo "== drainer serve --node $node --metrics-addr 127.0.0.1:$port"
serve_start serve serve --node "$node" --max-parallel 0 --metrics-addr "127.0.0.1:$port"
if ! wait_until 30 readyz; then
	fail "serve did not become ready"
	serve_log serve
	finish
	exit 1
fi
pass "serve is ready"

echo "== 500 short-lived connections"
storm_run short 500 127.0.0.2
echo "    short: $(cat "$e2e_tmp/short.json")"
check "/healthz answers after 500 short-lived connections" probe "500 short-lived connections"
check "/readyz answers 200 after them" readyz

echo "== at once: 300 idle, 300 half-sent, 50 oversized, 20 a byte a second"
storm_pids=()
for spec in "idle 300 127.0.0.3" "half 300 127.0.0.4" "big 50 127.0.0.5" "slow 20 127.0.0.6"; do
	# shellcheck disable=SC2086
	storm_run $spec &
	storm_pids+=($!)
	track_pid $!
	e2e_cleanup_hooks+=("reap_pid $! KILL")
done
# Wait until the server holds the storm's connections (or 5 s), then probe while it lasts.
wait_until 5 bash -c "[ \$(ss -Htn state established '( sport = :$port )' | wc -l) -ge 60 ]" || true
echo "    server-side connections during the storm: $(ss -Htn state established "( sport = :$port )" | wc -l)"
check "/healthz answers during the storm" probe "the storm of idle, half-sent, oversized and slow clients"
for p in "${storm_pids[@]}"; do
	wait "$p"
	untrack_pid "$p"
done
check "every idle connection was closed by the server (idle timeout)" all_closed idle
check "every half-sent request was closed by the server" all_closed half
check "every slow client was closed by the server (request deadline)" all_closed slow
check "every oversized request was closed by the server" all_closed big
# In the storm the server is at its limits (64 connections, 16 per address): an
# oversized request either got in and was answered 431, or was turned away at the
# limit (closed unanswered). Nothing else is an acceptable answer.
check_eq "oversized requests in the storm got no answer but 431" "HTTP/1.1 431" \
	"$(jq -r '.answers | keys | join(",")' "$e2e_tmp/big.json")"
check "/healthz answers after the storm" probe "the storm"

echo "== 10 oversized requests at once, below the per-address limit"
storm_run big 10 127.0.0.5
check "every one was closed by the server" all_closed big
check_eq "every one was answered 431" 10 "$(jq -r '.answers["HTTP/1.1 431"] // 0' "$e2e_tmp/big.json")"

echo "== 200 idle connections from the prober's own address"
storm_run idle 200 127.0.0.1
mv "$e2e_tmp/idle.json" "$e2e_tmp/idle-same.json"
check "every one was closed by the server" all_closed idle-same
check "/healthz answers after them" probe "200 idle connections from 127.0.0.1"

echo "== from the prober's own address: 64 connections held 0.5 s, then 40 half requests each closed at once"
storm_run closing 64 127.0.0.1 &
closing_pid=$!
track_pid $closing_pid
e2e_cleanup_hooks+=("reap_pid $closing_pid KILL")
# Every 0.5 s for 3 s, from the start of the storm, each with 2 s (a liveness
# probe's budget): all answered, the storm's connections notwithstanding.
probes_ok() {
	local i code bad=0
	for i in 1 2 3 4 5 6; do
		code=$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")
		[ "$code" = 200 ] || bad=$((bad + 1))
		sleep 0.5
	done
	echo "    /healthz from 127.0.0.1 during and after: $bad of 6 probes failed"
	[ "$bad" = 0 ]
}
check "/healthz answers within 2 s from that address during the storm and right after (6 probes in 3 s)" probes_ok
wait "$closing_pid"
untrack_pid "$closing_pid"
echo "    closing: $(cat "$e2e_tmp/closing.json")"
check "no connection the client closed is left open (CLOSE-WAIT)" \
	bash -c "[ \$(ss -Htn state close-wait '( sport = :$port )' | wc -l) = 0 ]"

check "serve is still running" serve_alive serve
check "/readyz answers 200 (node watch synced, API server answering)" readyz
curl -fsS --max-time 10 "http://127.0.0.1:$port/metrics" >"$e2e_tmp/metrics.txt"
check "/metrics passes promtool check metrics" bash -c "promtool check metrics <'$e2e_tmp/metrics.txt' >/dev/null 2>&1 || ! command -v promtool >/dev/null"
serve_stop serve
check_eq "serve exits 0 on SIGTERM" 0 "$serve_rc"
[ "$e2e_failed" = 0 ] || serve_log serve 30
finish
