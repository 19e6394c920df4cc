#!/usr/bin/env bash
# drainer's informers survive kube-apiserver being killed and restarted: a
# running `drainer status node-1 --watch` keeps its process, does not spin
# while the server is down (CPU time), reconnects with a bounded number of
# requests (audit log), and then shows a pod created after the restart.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$e2e_root/tests/cluster/lib.sh"
. "$e2e_root/tests/e2e/clients.sh"
client_cmds_save || { finish; exit 1; }

out=$e2e_tmp/watch.out
"$DRAINER" status node-1 --watch -o json >"$out" 2>"$e2e_tmp/watch.err" &
dpid=$!
e2e_cleanup_hooks+=("kill $dpid 2>/dev/null; kubectl delete pod -n default e2e-restart-probe --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1")
check "watch prints the first view" wait_until 30 test -s "$out"

apid=$(component_pid kube-apiserver) || { fail "kube-apiserver pid"; finish; exit 1; }
mapfile -d '' cmd <"/proc/$apid/cmdline"
cpu_before=$(awk '{print $14 + $15}' "/proc/$dpid/stat")
kill -9 "$apid"
while kill -0 "$apid" 2>/dev/null; do sleep 0.1; done
pass "kube-apiserver killed"
sleep 15
check "drainer is still running while the API server is down" kill -0 "$dpid"
cpu_after=$(awk '{print $14 + $15}' "/proc/$dpid/stat")
ticks=$(getconf CLK_TCK)
check "no busy loop while down: CPU $((cpu_after - cpu_before)) ticks in 15 s (< 0.5 s)" \
	[ $((cpu_after - cpu_before)) -lt $((ticks / 2)) ]

# Restart it exactly as up started it (same flags, same audit log), recorded for down.
restart_line=$(audit_lines)
setsid "${cmd[@]}" >>"$DRAINER_CLUSTER_DIR/kube-apiserver.log" 2>&1 </dev/null &
newpid=$!
echo "$newpid $(starttime "$newpid")" >"$DRAINER_CLUSTER_DIR/pids/kube-apiserver.pid"
api_up() { [ "$(api_get /readyz 2>/dev/null)" = ok ]; }
check "kube-apiserver back" wait_until 90 api_up

kubectl run e2e-restart-probe -n default --image=registry.invalid/pause --restart=Never \
	--overrides='{"spec":{"nodeName":"node-1"}}' >/dev/null
# Reconnect backoff is capped at 30 s.
check "the watch shows a pod created after the restart" wait_until 60 grep -q e2e-restart-probe "$out"
sleep 5
n=$(tail -n +"$((restart_line + 1))" "$AUDIT" | grep '"userAgent":"drainer/' | jq -r 'select(.stage=="ResponseComplete" or .stage=="ResponseStarted") | .auditID' | sort -u | wc -l)
check "requests after the restart are bounded: $n (<= 24 for 4 informers)" [ "$n" -le 24 ]

kill -INT "$dpid"
wait "$dpid"
check_eq "watch exits 0 on SIGINT" 0 $?
# The controller-manager and scheduler started afresh, so that the scripts after this
# one find a control plane whose informers are not behind (tests/e2e/clients.sh).
clients_restart
finish
