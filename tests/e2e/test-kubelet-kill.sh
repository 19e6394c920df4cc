#!/usr/bin/env bash
# A real kubelet SIGKILLed during a drain. drainer drains node-1
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
# A node that is not Ready: while the node is not Ready the API server also gets a Warning
# Event DrainerNodeNotReady (its claims are not released), the interrupted run's -o json
# says nodeReady false with that message, and a DrainerNodeReady Event follows the
# kubelet's return.
# (b) --out-of-service: node-1 switched off (kubelet, runtime, containers SIGKILLed:
# tests/cluster/kubelet power-off) during a drain with --out-of-service
# --out-of-service-after 20s. Judged from the API server: the taint
# node.kubernetes.io/out-of-service=nodeshutdown:NoExecute is added (by drainer, with
# drainer.io/out-of-service) only once the Ready condition has been not True for 20 s;
# the pods are force-deleted by the control plane (kube-controller-manager's pod GC,
# grace 0), never by drainer; every claim is released by the resourceclaim controller
# before drainer enters stop-drivers; the drain completes (exit 0); uncordon is refused
# (exit 1, taint kept) while the node is not Ready; the machine powered on again, the
# node Ready, uncordon removes the taint and puts the node back.
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
	"$kubelet_ctl" pid "$node" >/dev/null 2>&1 || "$kubelet_ctl" power-on "$node" >/dev/null 2>&1
	kubectl taint node "$node" node.kubernetes.io/out-of-service- >/dev/null 2>&1
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
delete_node_events "$node"
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
node_events "$node" "$e2e_tmp/events-first.json"
jq_checks '[.[] | select(.reason == "DrainerNodeNotReady")] as $e
	| if ($e | length) == 1 and $e[0].type == "Warning" and ($e[0].message | test("not released"))
	  then "ok one Warning Event DrainerNodeNotReady: \($e[0].message)"
	  else "FAIL Events DrainerNodeNotReady: \($e | tostring)" end' "$e2e_tmp/events-first.json"
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
check_eq "drainer interrupted (SIGTERM): exit 143, -o json result interrupted" "143 interrupted" "$rc $(jq -r .result "$e2e_tmp/first.out" 2>/dev/null)"
jq -r '"    -o json: result \(.result), phase \(.phase), message: \(.message)"' "$e2e_tmp/first.out" 2>/dev/null
check_eq "-o json of the interrupted run: nodeReady false, its message names the node not Ready" "false true" \
	"$(jq -r '"\(.nodeReady) \(.message // "" | test("is not Ready"))"' "$e2e_tmp/first.out" 2>/dev/null)"
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
node_events "$node" "$e2e_tmp/events-a.json"
check "a DrainerNodeReady Event once the kubelet was back" \
	bash -c 'jq -e "any(.[]; .reason == \"DrainerNodeReady\" and .type == \"Normal\")" "$1" >/dev/null' _ "$e2e_tmp/events-a.json"

# ---- (b) --out-of-service: the machine switched off during a drain ---------------------
t_b=$SECONDS
after=20
demo || { fail "demo workload (b)"; finish; exit 1; }
pods_on_node "$node" "$e2e_tmp/pods-b.json"
classify_pods "$e2e_tmp/pods-b.json" >"$e2e_tmp/classes-b.json"
claims_on_node "$node" >"$e2e_tmp/claims-b.json"
check "claims on node-1 before the drain (b)" test "$(jq length "$e2e_tmp/claims-b.json")" -ge 1
first_b=$(audit_lines)
delete_node_events "$node"
nodes_watch_start "$e2e_tmp/watch-b.jsonl" "$node"
echo "  \$ drainer --kube-api-qps 2 --kube-api-burst 1 drain $node --out-of-service --out-of-service-after ${after}s -o json --timeout 300s &"
"$DRAINER" --kube-api-qps 2 --kube-api-burst 1 drain "$node" --out-of-service --out-of-service-after "${after}s" -o json --timeout 300s \
	>"$e2e_tmp/oos.out" 2>"$e2e_tmp/oos.err" </dev/null &
dpid=$!
track_pid "$dpid"
if wait_watch "$e2e_tmp/watch-b.jsonl" 60 '.state == "evict-claim-holders"'; then
	"$kubelet_ctl" power-off "$node" 2>"$e2e_tmp/off.err"
	sed 's/^/    /' "$e2e_tmp/off.err"
	check "node-1 powered off (kubelet, runtime, containers) as the drain entered evict-claim-holders" \
		bash -c "! '$kubelet_ctl' pid $node >/dev/null 2>&1"
else
	fail "(b) the drain never reached evict-claim-holders: phases $(phases_seen "$e2e_tmp/watch-b.jsonl")"
fi
t_off=$(now_rfc3339)
t0=$SECONDS
# The drain ends by itself: not Ready after the grace period, the taint 20 s later, the
# pod GC's next pass (every 20 s) force-deletes the pods, the claims are released.
waited=0
while kill -0 "$dpid" 2>/dev/null && [ "$waited" -lt 300 ]; do sleep 1; waited=$((waited + 1)); done
wait "$dpid"
rc=$?
untrack_pid "$dpid"
dpid=
echo "  the drain with --out-of-service ended $((SECONDS - t0)) s after the power-off (exit $rc)"
check_eq "the drain with --out-of-service completes (exit 0), -o json: done, nodeReady false, taint applied by drainer" \
	"0 done false applied by drainer" "$rc $(jq -r '"\(.result) \(.nodeReady) \(.outOfServiceTaint)"' "$e2e_tmp/oos.out" 2>/dev/null)"
[ "$rc" = 0 ] || tail -n 15 "$e2e_tmp/oos.err" | sed 's/^/    stderr: /'
check_eq "drainer.io/state=drained" drained "$(node_state "$node")"
check_eq "no ResourceClaim on node-1" "[]" "$(claims_on_node "$node")"
check_eq "none of the workload pods (claim holders and the rest) is left" "[]" \
	"$(kubectl get pods -A --field-selector "spec.nodeName=$node" -o json | jq -c --argjson pods "$(cat "$e2e_tmp/classes-b.json")" '
		[$pods[] | select(.cls | IN("holder", "holder-critical", "rest", "rest-critical")) | "\(.ns)/\(.name)"] as $want
		| [.items[] | "\(.metadata.namespace)/\(.metadata.name)" | select(. as $k | $want | index($k))]')"
# The taint: only after 20 s of not Ready, by drainer, with its record.
jq_checks -s --argjson after "$after" '
	def epoch: if . == "" or . == null then null else (.[0:19] + "Z" | fromdateiso8601) end;
	([.[] | select(.oos)][0]) as $f
	| if $f == null then "FAIL the out-of-service taint never showed on node-1"
	  elif $f.ready == "True" then "FAIL the out-of-service taint was added while node-1 was Ready"
	  elif $f.oosann == null then "FAIL the out-of-service taint came without drainer.io/out-of-service"
	  elif ($f.t - ($f.readySince | epoch)) < $after then "FAIL the taint came \($f.t - ($f.readySince | epoch) | floor) s after the Ready condition changed (\($f.readySince)), before \($after) s"
	  else "ok the taint went on \($f.t - ($f.readySince | epoch) | floor) s after node-1 went not Ready (\($f.ready) since \($f.readySince)), with drainer.io/out-of-service=\($f.oosann)" end,
	([.[] | select(.oos and .ready == "True")] | length) as $r
	| if $r == 0 then "ok node-1 was never Ready with the out-of-service taint during the drain" else "FAIL \($r) versions Ready and tainted" end' \
	"$e2e_tmp/watch-b.jsonl"
jq -rs '[.[] | select(.oos)][0] | "    first tainted version: state \(.state), message: \(.message)"' "$e2e_tmp/watch-b.jsonl"
audit_window "$first_b" "$e2e_tmp/audit-b.json"
# The pods: deleted with grace 0 by the control plane after the taint, never by drainer;
# the claims released by the resourceclaim controller before drainer stopped the drivers.
t_stop=$(jq -rs '[.[] | select(.state == "stop-drivers")][0].t // 0' "$e2e_tmp/watch-b.jsonl")
t_taint=$(jq -rs '[.[] | select(.oos)][0].t // 0' "$e2e_tmp/watch-b.jsonl")
jq_checks --argjson pods "$(cat "$e2e_tmp/classes-b.json")" --argjson claims "$(cat "$e2e_tmp/claims-b.json")" \
	--arg since "$t_off" --argjson tstop "$t_stop" --argjson ttaint "$t_taint" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	def epoch: (.[0:19] + "Z" | fromdateiso8601) + ((.[20:26] // "0") | tonumber) / 1e6;
	. as $ev
	| [$pods[] | select(.cls | IN("holder", "holder-critical", "rest", "rest-critical")) | "\(.ns)/\(.name)"] as $want
	| [$ev[] | select(.verb == "delete" and .objectRef.resource == "pods" and .objectRef.subresource == null
		and .responseStatus.code < 300)] as $del
	| ([$del[] | select(.userAgent | startswith("drainer/"))] | length) as $dd
	| (if $ttaint == 0 then "FAIL the node watch saw no out-of-service taint: nothing to compare with" else empty end),
	  (if $dd == 0 then "ok drainer deleted no pod (evictions only)" else "FAIL drainer sent \($dd) pod DELETEs" end),
	  ([$want[] as $k | select([$del[] | select(key == $k and .user.username == "system:kube-controller-manager"
		and .requestObject.gracePeriodSeconds == 0 and (.requestReceivedTimestamp | epoch) >= $ttaint)] | length == 0) | $k] as $nf
	   | if ($want | length) == 0 then "FAIL no workload pod on node-1 before the drain"
	     elif ($nf | length) == 0 then "ok every workload pod (\($want | length)) was force-deleted (grace 0) by kube-controller-manager after the taint"
	     else "FAIL not force-deleted by the control plane after the taint: \($nf | join(", "))" end),
	  ([$ev[] | select(.requestReceivedTimestamp > $since and .user.username == "system:node:node-1")] | length) as $k
	  | (if $k == 0 then "ok no request of node-1 kubelet while it was off" else "FAIL \($k) requests of system:node:node-1 while it was off" end),
	  ($claims[] | "\(.ns)/\(.name)" as $c
	   # (as check_order: its status writes release it; a generated claim deleted without
	   # one was released by the delete; a delete after the release does not matter)
	   | [$ev[] | select(.user.username == "system:kube-controller-manager" and .objectRef.resource == "resourceclaims"
		and key == $c and .responseStatus.code < 300)] as $all
	   | [$all[] | select((.verb | IN("update", "patch")) and .objectRef.subresource == "status")] as $st
	   | (if ($st | length) > 0 then $st else [$all[] | select(.verb == "delete")] end) as $w
	   | if ($w | length) == 0 then "FAIL the resourceclaim controller never released claim \($c)"
	     elif $tstop == 0 then "FAIL the drain never entered stop-drivers"
	     elif ([$w[].requestReceivedTimestamp | epoch] | max) >= $tstop then "FAIL claim \($c) was still being released when drainer entered stop-drivers"
	     else "ok claim \($c) released by the resourceclaim controller (\([$w[].requestReceivedTimestamp] | max)) before drainer entered stop-drivers" end)' \
	"$e2e_tmp/audit-b.json"
node_events "$node" "$e2e_tmp/events-b.json"
jq_checks '[.[] | select(.reason == "DrainerOutOfService" and .type == "Warning")] as $e
	| if ($e | length) == 1 and ($e[0].message | test("node.kubernetes.io/out-of-service")) then "ok one Warning Event DrainerOutOfService: \($e[0].message[0:160])..."
	  else "FAIL Events DrainerOutOfService: \($e | tostring)" end' "$e2e_tmp/events-b.json"
# uncordon while the machine is still off: refused, nothing changed.
drainer_run uncordon-off uncordon "$node"
check_rc "uncordon while node-1 is not Ready is refused" 1 uncordon-off
check_eq "... the taint and the cordon stay, the node stays drained" "true true drained" \
	"$(kubectl get node "$node" -o json | jq -r '"\([.spec.taints // [] | .[] | select(.key == "node.kubernetes.io/out-of-service")] | length == 1) \(.spec.unschedulable // false) \(.metadata.annotations["drainer.io/state"] // "")"')"
check "... and drainer.io/message says why" bash -c 'grep -q "is not Ready" <<<"$1"' _ "$(node_ann "$node" drainer.io/message)"
# The machine back.
t0=$SECONDS
"$kubelet_ctl" power-on "$node" 2>"$e2e_tmp/on.err"
check "node-1 powered on (runtime, kubelet); Ready" test $? = 0
sed 's/^/    /' "$e2e_tmp/on.err"
echo "  node-1 Ready $((SECONDS - t0)) s after the power-on"
DRAINER_RUN_TIMEOUT=150 drainer_run uncordon-on uncordon "$node" --timeout 120s
check_rc "uncordon once node-1 is Ready" 0 uncordon-on
check_eq "the out-of-service taint is gone, node-1 schedulable, no drainer.io annotation" "0 false {}" \
	"$(kubectl get node "$node" -o json | jq -r '"\([.spec.taints // [] | .[] | select(.key == "node.kubernetes.io/out-of-service")] | length) \(.spec.unschedulable // false)"') $(node_drainer_anns "$node")"
check "a driver pod runs on node-1 again" wait_until 60 driver_running "$node"
nodes_watch_stop
echo "  (b) took $((SECONDS - t_b)) s"
finish
