#!/usr/bin/env bash
# Issue 14, item 7: a real kubelet SIGKILLed during a drain. drainer drains node-1
# (the demo workload), slowed by its client rate limit; as soon as a watch on the
# Node shows evict-claim-holders, node-1's kubelet is SIGKILLed (its runtime and
# containers keep running, as when a kubelet crashes on a machine). Judged from the
# API server:
#  - the pods drainer evicts stay Terminating (nobody stops them: no DELETE by the
#    kubelet), drainer neither force-deletes a claim holder nor stops the driver
#    while pods and claims are on the node (the driver pod is never evicted);
#  - once the node lifecycle controller marks the silent node not Ready (its grace
#    period, 50 s), drainer.io/message on the Node says why the drain waits;
#  - drainer, interrupted (SIGTERM), leaves the drain recorded on the Node;
#  - the kubelet started again as tests/cluster/up starts it (tests/cluster/kubelet:
#    in its node's mount namespace) finishes the Terminating pods; a drain started
#    then continues from the Node's record and completes (exit 0), in the safe order
#    (check_order over both runs, rule 5 for the claim holders), and the message no
#    longer names the kubelet; uncordon puts the node back.
# Real nodes only (the simulator is no kubelet to kill).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
if [ "${DRAINER_CLUSTER_NODES:-}" != real ]; then
	echo "  skipped: the cluster in $DRAINER_CLUSTER_DIR has simulated nodes (this test needs a real kubelet)"
	finish
	exit 0
fi
kubelet_ctl=$e2e_root/tests/cluster/kubelet

cleanup_kill() {
	[ -z "${dpid:-}" ] || reap_pid "$dpid" KILL
	"$kubelet_ctl" pid "$node" >/dev/null 2>&1 || "$kubelet_ctl" start "$node" >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_kill)

demo || { fail "demo workload"; finish; exit 1; }
check "node-1's kubelet runs" "$kubelet_ctl" pid "$node"
pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
claims_on_node "$node" >"$e2e_tmp/claims.json"
first=$(audit_lines)
nodes_watch_start "$e2e_tmp/watch.jsonl" "$node"

echo "  \$ drainer --kube-api-qps 2 --kube-api-burst 1 drain $node -o json --timeout 300s &"
"$DRAINER" --kube-api-qps 2 --kube-api-burst 1 drain "$node" -o json --timeout 300s \
	>"$e2e_tmp/first.out" 2>"$e2e_tmp/first.err" </dev/null &
dpid=$!
track_pid "$dpid"
if wait_watch "$e2e_tmp/watch.jsonl" 60 '.state == "evict-claim-holders"'; then
	"$kubelet_ctl" kill "$node" 2>"$e2e_tmp/kill.err"
	check "node-1's kubelet SIGKILLed as the drain entered evict-claim-holders" bash -c "! '$kubelet_ctl' pid $node >/dev/null 2>&1"
else
	fail "the drain never reached evict-claim-holders: phases $(phases_seen "$e2e_tmp/watch.jsonl")"
fi
t_kill=$(now_rfc3339)
kill_line=$(audit_lines)

# The node lifecycle controller: Ready Unknown once its grace period passes.
node_ready() { kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
t0=$SECONDS
check "the node lifecycle controller marks node-1 not Ready (Unknown)" wait_until 120 bash -c "[ \"\$('$KUBECTL' get node $node -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = Unknown ]"
echo "  node-1 not Ready $((SECONDS - t0)) s after the kill"
noted='.message | test("the node is not Ready \\(its kubelet is down or not reporting\\): its pods finish terminating only once it is back")'
check "drainer.io/message names the node that is not Ready" wait_watch "$e2e_tmp/watch.jsonl" 30 "$noted"
jq -rs --argjson n "$(jq -s 'map(select(.message | test("is not Ready"))) | length' "$e2e_tmp/watch.jsonl")" \
	'[.[] | select(.message | test("is not Ready"))][0] | "    Node \(.name) in \(.state): drainer.io/message: \(.message) (\($n) versions)"' "$e2e_tmp/watch.jsonl"
check_eq "the drain waits in wait-released" wait-released "$(node_state "$node")"
check "drainer still runs (it waits, it does not give up)" kill -0 "$dpid"

# What the API server saw while the kubelet was gone.
audit_window "$first" "$e2e_tmp/audit-first.json"
terminating=$(kubectl get pods -A --field-selector "spec.nodeName=$node" -o json |
	jq '[.items[] | select(.metadata.deletionTimestamp != null and .metadata.namespace == "demo")] | length')
check "evicted pods stay Terminating while the kubelet is gone ($terminating)" test "$terminating" -ge 1
jq_checks --arg since "$t_kill" '
	[.[] | select(.requestReceivedTimestamp > $since)] as $after
	| ([$after[] | select(.user.username == "system:node:node-1")] | length) as $k
	| (if $k == 0 then "ok no request of node-1 kubelet after the kill" else "FAIL \($k) requests of system:node:node-1 after the kill" end),
	  ([.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods" and .objectRef.namespace == "dra-system"
		and (.verb == "delete" or .objectRef.subresource == "eviction"))] | length) as $d
	| (if $d == 0 then "ok drainer did not stop the driver while pods and claims are on the node"
	   else "FAIL drainer evicted or deleted \($d) driver pods" end),
	  ([.[] | select((.userAgent | startswith("drainer/")) and .verb == "delete" and .objectRef.resource == "pods")] | length) as $del
	| (if $del == 0 then "ok drainer force-deleted nothing (evictions only)" else "FAIL drainer sent \($del) pod DELETEs" end)' \
	"$e2e_tmp/audit-first.json"

kill -TERM "$dpid"
wait "$dpid"
rc=$?
untrack_pid "$dpid"
dpid=
check_eq "drainer interrupted (SIGTERM): exit 1, -o json result interrupted" "1 interrupted" "$rc $(jq -r .result "$e2e_tmp/first.out" 2>/dev/null)"
jq -r '"    -o json: result \(.result), phase \(.phase), message: \(.message)"' "$e2e_tmp/first.out" 2>/dev/null
check_eq "the drain stays recorded on the Node (wait-released)" wait-released "$(node_state "$node")"

# The kubelet back, as up starts it; then a new drain.
t0=$SECONDS
"$kubelet_ctl" start "$node" 2>"$e2e_tmp/start.err"
check "node-1's kubelet started again in its node's mount namespace; node-1 Ready" test $? = 0
sed 's/^/    /' "$e2e_tmp/start.err"
echo "  node-1 Ready again $((SECONDS - t0)) s after the restart"
drainer_run second drain "$node" -o json --timeout 120s
check_rc "a drain started after the kubelet is back completes" 0 second
sleep 0.5
nodes_watch_stop
audit_window "$first" "$e2e_tmp/audit.json"
check_order "$e2e_tmp/audit.json" "$e2e_tmp/classes.json" "$e2e_tmp/claims.json" "$node"
check_grace "$e2e_tmp/audit.json" "$e2e_tmp/classes.json"
check_node_invariants "$e2e_tmp/watch.jsonl" false
echo "  phases seen: $(phases_seen "$e2e_tmp/watch.jsonl")"
check_eq "drainer.io/state=drained" drained "$(node_state "$node")"
check "the message no longer names a node that is not Ready" bash -c "! grep -q 'not Ready' <<<\"\$1\"" _ "$(node_ann "$node" drainer.io/message)"
check_eq "no ResourceClaim on node-1" "[]" "$(claims_on_node "$node")"
check "no driver pod on node-1" no_driver_pod "$node"
drainer_run uncordon uncordon "$node"
check_rc "uncordon" 0 uncordon
check_eq "schedulable again" false "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
finish
