#!/usr/bin/env bash
# `drainer guard --listen` under many requests (hardening item 8), against a fake API
# server on loopback (tests/e2e/fakeapi.py: a cordoned Node, one claim-holding pod of
# namespace other-ns and its claim), so it needs no cluster:
#  - 8 GET /guard at once (from 4 loopback addresses, below the per-address limit), then
#    4 more as soon as those are answered: the guard lists each resource (the Node,
#    the node's pods, the claims, the node's slices) once in all, not once per request:
#    every request reads the server's one view, kept 10 s after the last;
#  - each answer is 504 (gave up at --deadline) and counts what is held ("1
#    ResourceClaim on the node; 1 claim-holding pod"), never naming the objects of
#    another namespace.
# Judged from the fake server's request log and the HTTP answers.
# lib.sh's serve helpers want the cluster's port; this test uses no cluster.
: "${DRAINER_CLUSTER_API_PORT:=6443}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer

api_log=$e2e_tmp/api.log
python3 "$e2e_root/tests/e2e/fakeapi.py" --node node-x --port-file "$e2e_tmp/api.port" --log "$api_log" \
	--max-seconds 90 >"$e2e_tmp/fakeapi.out" 2>&1 &
api_pid=$!
track_pid $api_pid
e2e_cleanup_hooks+=("reap_pid $api_pid")
wait_until 10 test -s "$e2e_tmp/api.port" || { fail "the fake API server did not start"; finish; exit 1; }
cat >"$e2e_tmp/kubeconfig" <<EOF2
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "http://127.0.0.1:$(cat "$e2e_tmp/api.port")"}}]
users: [{name: nobody, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: nobody}}]
current-context: fake
EOF2

"$DRAINER" --kubeconfig "$e2e_tmp/kubeconfig" guard --node node-x --listen 127.0.0.1:0 --deadline 3s \
	>"$e2e_tmp/guard.log" 2>&1 &
guard_pid=$!
track_pid $guard_pid
e2e_cleanup_hooks+=("reap_pid $guard_pid")
wait_until 10 grep -q '(port [0-9]*)' "$e2e_tmp/guard.log"
port=$(sed -n 's/.*GET \/guard on 127.0.0.1:0 (port \([0-9]*\)).*/\1/p' "$e2e_tmp/guard.log")
check "guard --listen serves on a free port ($port)" test -n "$port"

# wave N COUNT: COUNT GET /guard at once, spread over 127.0.0.2-5; answers in $e2e_tmp/wN-I.*
wave() {
	local i pids=()
	for i in $(seq 1 "$2"); do
		curl -s --max-time 20 --interface "127.0.0.$((2 + i % 4))" -o "$e2e_tmp/w$1-$i.body" \
			-w '%{http_code}' "http://127.0.0.1:$port/guard" >"$e2e_tmp/w$1-$i.code" 2>/dev/null &
		pids+=($!)
	done
	wait "${pids[@]}"
}
t0=$SECONDS
wave 1 8
wave 2 4
echo "    12 requests answered in $((SECONDS - t0)) s"
codes=$(for f in "$e2e_tmp"/w*.code; do cat "$f"; echo; done | sort | uniq -c | awk '{print $2 "x" $1}' | paste -sd, -)
check_eq "every request answered 504 (gave up at its deadline)" "504x12" "$codes"
bodies=$(cat "$e2e_tmp"/w*.body | sort -u)
echo "    answer: $bodies"
check_eq "the answer counts what is held" \
	"gave up after 3.0 s, before the driver pod would be killed: still held: 1 ResourceClaim on the node; 1 claim-holding pod" \
	"$(sed 's/after [0-9.]* s/after 3.0 s/' <<<"$bodies" | sort -u)"
check "no answer names an object of another namespace" bash -c "! grep -l 'other-ns\|secret-' $e2e_tmp/w*.body"

lists=$(jq -r 'select(.query.watch == null) | .path' "$api_log" | sort | uniq -c | awk '{print $2 "=" $1}' | paste -sd' ' -)
echo "    lists by the guard: $lists"
check_eq "one list per resource for all 12 requests" \
	"/api/v1/nodes=1 /api/v1/pods=1 /apis/resource.k8s.io/v1/resourceclaims=1 /apis/resource.k8s.io/v1/resourceslices=1" "$lists"
watches=$(jq -r 'select(.query.watch != null) | .path' "$api_log" | wc -l)
check_eq "one watch per resource" 4 "$watches"

kill -TERM "$guard_pid"
wait "$guard_pid"
rc=$?
untrack_pid "$guard_pid"
check_eq "guard --listen exits 0 on SIGTERM" 0 "$rc"
[ "$e2e_failed" = 0 ] || sed 's/^/    guard: /' "$e2e_tmp/guard.log" | tail -n 20
finish
