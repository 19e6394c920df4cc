#!/usr/bin/env bash
# drainer as Cluster API's pre-drain hook owner against Cluster API's own Machine
# controller (v1.14.2): needs a cluster started with DRAINER_CLUSTER_PEERS=capi
# (tests/cluster/capi.sh: Machines capi-test/node-N with drainer's hook, Running with
# their real kubelet Nodes). tests/run-all runs it at the end of its side lane on a
# cluster of its own (capi_peer); see tests/cluster/README.md.
#  1. claim holders and a plain pod on node-2, a PDB over the claim holders that allows
#     no disruption; `serve --all-nodes --cluster-api`; Machine node-2 deleted: the hook
#     stays, and the Machine's Events and the Node's message name the PDB; the Node's
#     Event of the drain's start and drainer status name the Machine that asked; serve
#     SIGKILLed there and started again picks the drain up from the Node, the hook kept;
#  2. the PDB deleted: from the audit log, drainer evicts the claim holders, every claim
#     is released (the resourceclaim controller deletes them) before drainer evicts the
#     DRA driver's pod, drainer removes the hook after that, Cluster API's own drain (its
#     user, capi-manager) comes after the hook went, then it deletes the TestMachine, and
#     the Node last; node-2 registers again (restarted kubelet if need be) and its Machine
#     is made again as up made it;
#  3. the same Machine without drainer's hook: Cluster API's drain alone (timed).
# Times: Machine deleted -> hook removed -> Machine gone, with and without the hook.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$e2e_root/tests/cluster/capi.sh"

node=node-2
ns=capi-peer
machine=$node
hook=$capi_hook

if ! kubectl -n "$capi_ns" get machine "$machine" >/dev/null 2>&1; then
	echo "  skipped: no Machine $capi_ns/$machine (start the cluster with DRAINER_CLUSTER_PEERS=capi)"
	finish
	exit 0
fi
need_drainer

machine_there() { kubectl -n "$capi_ns" get machine "$machine" >/dev/null 2>&1; }
machine_gone() { ! machine_there; }
hook_on() { [ "$(kubectl -n "$capi_ns" get machine "$machine" -o json | jq -r --arg k "$hook" '.metadata.annotations // {} | has($k)')" = true ]; }
hook_gone() { machine_gone || ! hook_on; }
node_there() { kubectl get node "$node" >/dev/null 2>&1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
running() { [ "$(kubectl -n "$capi_ns" get machine "$machine" -o jsonpath='{.status.phase}/{.status.nodeRef.name}' 2>/dev/null)" = "Running/$node" ]; }

# restore_node: node-2 back as up made it: its Node (the kubelet registers it again;
# restarted if it does not within 10 s: a 1.37 kubelet whose Node was deleted does not register it again by itself), its TestMachine and Machine with the hook
# (ARG "nohook": without it), Running with its nodeRef.
restore_node() {
	node_back "$node" || return 1
	local y
	y=$(capi_machine_yaml 2)
	[ "${1:-}" = nohook ] && y=$(grep -vF -e "$hook" -e "annotations:" <<<"$y")
	kubectl apply -f - >/dev/null <<<"$y" || { fail "Machine $machine made again"; return 1; }
	wait_until 120 running || { fail "Machine $machine Running again with nodeRef $node"; return 1; }
}

cleanup() {
	[ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	kubectl -n "$ns" delete pdb peer-budget --ignore-not-found >/dev/null 2>&1
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
	# The cluster as up made it: Machine node-2 with the hook, Running. A Machine left
	# deleting (a failed run: drainer never removed its hook) goes, the hook removed here.
	if machine_there && [ -n "$(kubectl -n "$capi_ns" get machine "$machine" -o jsonpath='{.metadata.deletionTimestamp}')" ]; then
		kubectl -n "$capi_ns" annotate machine "$machine" "$hook-" >/dev/null 2>&1
		wait_until 180 machine_gone
	fi
	if machine_gone || ! hook_on; then
		machine_gone || kubectl -n "$capi_ns" delete machine "$machine" --timeout=180s >/dev/null 2>&1
		restore_node >/dev/null
	fi
	kubectl delete -k "$e2e_root/deploy/cluster-api" --ignore-not-found >/dev/null 2>&1
}
e2e_cleanup_hooks+=(cleanup)

echo "-- workload on $node: 2 claim holders (a PDB allows no disruption), a plain pod"
{
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
	echo ---
	claim_template "$ns" gpu
	pdb "$ns" peer-budget holder minAvailable 2
	for app in holder plain; do
		replicas=2 claims=
		[ "$app" = plain ] && replicas=1
		[ "$app" = holder ] && claims='
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]'
		cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $app, namespace: $ns}
spec:
  replicas: $replicas
  selector: {matchLabels: {app: $app}}
  template:
    metadata: {labels: {app: $app}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      terminationGracePeriodSeconds: 2$claims
      containers:
      - name: main
        image: registry.example.com/web:v1
$([ "$app" = holder ] && echo '        resources: {claims: [{name: gpu}]}')
---
EOF
	done
} | kubectl apply -f - >/dev/null || { fail "workload"; finish; exit 1; }
workload_running() {
	[ "$(kubectl -n "$ns" get pods --field-selector "spec.nodeName=$node,status.phase=Running" -o name | grep -c .)" = 3 ] &&
		[ "$(kubectl -n "$ns" get pdb peer-budget -o jsonpath='{.status.currentHealthy}/{.status.disruptionsAllowed}')" = 2/0 ]
}
check "3 pods Running on $node, the PDB allows no disruption" wait_until 120 workload_running
check "Machine $machine Running with nodeRef $node" running

ns_settled drainer-system || fail "namespace drainer-system still terminating after 120 s"
kubectl create namespace drainer-system >/dev/null 2>&1
kubectl apply -k "$e2e_root/deploy/cluster-api" >/dev/null || fail "apply deploy/cluster-api"
"$DRAINER" serve --all-nodes --cluster-api --max-parallel 1 --metrics-addr "" --identity e2e-capi-peer \
	>"$e2e_tmp/serve.out" 2>"$e2e_tmp/serve.err" &
serve_pid=$!
wait_until 30 grep -q 'owning the pre-drain hook' "$e2e_tmp/serve.err" || fail "serve did not start: $(tail -n 3 "$e2e_tmp/serve.err")"
sleep 1

echo "-- 1. Machine $machine deleted while a PDB blocks"
run_start=$(audit_lines)
# (this Machine's Events: one of an earlier Machine of the same name may still be there)
machine_uid=$(kubectl -n "$capi_ns" get machine "$machine" -o jsonpath='{.metadata.uid}')
kubectl -n "$capi_ns" delete machine "$machine" --wait=false >/dev/null
machine_event_names_pdb() {
	kubectl -n "$capi_ns" get events --field-selector "involvedObject.name=$machine" -o json |
		jq -e --arg uid "$machine_uid" '[.items[] | select(.involvedObject.kind == "Machine" and .involvedObject.uid == $uid)
			| .message // "" | select(test("peer-budget"))] | length > 0' >/dev/null
}
node_message_names_pdb() { grep -q peer-budget <<<"$(node_ann "$node" drainer.io/message)"; }
check "an Event on the Machine names the PDB $ns/peer-budget" wait_until 90 machine_event_names_pdb
check "the Node's drainer.io/message names the PDB" wait_until 30 node_message_names_pdb
check "the hook stays while the PDB blocks" hook_on
check "the Node is still there" node_there
echo "    Node message: $(node_ann "$node" drainer.io/message)"
# What an admin reads names the peer that asked: the Node's Event of the drain's start
# and drainer status (the request's drainer.io/requested-by, written by the hook).
node_uid=$(kubectl get node "$node" -o jsonpath='{.metadata.uid}')
node_event_names_machine() {
	kubectl -n default get events --field-selector "involvedObject.kind=Node,involvedObject.name=$node" -o json |
		jq -e --arg p "drain started (asked by Cluster API: Machine $capi_ns/$machine is being deleted): " --arg uid "$node_uid" \
			'[.items[] | select(.involvedObject.uid == $uid and (.message // "" | startswith($p)))] | length > 0' >/dev/null
}
check "the Node's Event of the drain's start names who asked: Cluster API's Machine $capi_ns/$machine" \
	wait_until 30 node_event_names_machine
"$DRAINER" status "$node" >"$e2e_tmp/status.out" 2>&1
check "drainer status $node names who asked (drainer.io/requested-by)" \
	grep -q "drainer.io/requested-by: Cluster API: Machine $capi_ns/$machine is being deleted" "$e2e_tmp/status.out"
kubectl -n "$capi_ns" get events --field-selector "involvedObject.name=$machine" -o json |
	jq -r '.items[] | "    Machine Event \(.reason): \(.message)"' | head -n 4

echo "-- 1b. drainer killed mid-way (SIGKILL) and started again: it resumes from the Node"
state_before=$(node_ann "$node" drainer.io/state)
kill -KILL "$serve_pid" 2>/dev/null
wait "$serve_pid" 2>/dev/null
check "the Node keeps the drain's record across the kill (drainer.io/state=${state_before:-none})" \
	test -n "$state_before" -a "$state_before" != drained
"$DRAINER" serve --all-nodes --cluster-api --max-parallel 1 --metrics-addr "" --identity e2e-capi-peer \
	>"$e2e_tmp/serve2.out" 2>"$e2e_tmp/serve2.err" &
serve_pid=$!
check "the restarted serve owns the pre-drain hook again" wait_until 60 grep -q 'owning the pre-drain hook' "$e2e_tmp/serve2.err"
sleep 3
held_where_node_says() { hook_on && [ "$(node_ann "$node" drainer.io/state)" = "$state_before" ]; }
check "... and keeps Machine $machine's hook while the PDB blocks, its drain where the Node says" held_where_node_says

echo "-- 2. the PDB deleted: drainer's drain, then Cluster API's"
t0=$(date +%s.%N)
kubectl -n "$ns" delete pdb peer-budget >/dev/null
if wait_until 180 hook_gone; then
	t_hook=$(since "$t0")
else
	fail "the hook is still there after 180 s: $(node_ann "$node" drainer.io/message)"
fi
if wait_until 300 machine_gone; then
	t_gone=$(since "$t0")
	pass "hook removed $t_hook s, Machine gone $t_gone s after the PDB went"
else
	fail "Machine $machine still there after 300 s: $(kubectl -n "$capi_ns" get machine "$machine" -o json | jq -c '.status.deletion, .status.conditions[]? | select(.status != "True")' | head -n 5)"
fi
sleep 2
audit_window "$run_start" "$e2e_tmp/window.json"
# One line each: time, who, verb, resource, name.
jq -r --arg ns "$ns" --arg node "$node" --arg m "$machine" '.[]
	| (if (.userAgent // "" | startswith("drainer/")) then "drainer" elif .user.username == "capi-manager" then "capi"
	   elif .user.username == "system:kube-controller-manager" then "kcm" else "other" end) as $who
	| select(.responseStatus.code < 300)
	| select(
	    (.objectRef.subresource == "eviction")
	    or (.verb == "delete" and .objectRef.resource == "pods" and $who == "capi")
	    or (.verb == "delete" and .objectRef.resource == "resourceclaims" and .objectRef.namespace == $ns)
	    or (.verb == "patch" and .objectRef.resource == "machines" and $who == "drainer")
	    or (.verb == "delete" and .objectRef.resource == "testmachines")
	    or (.verb == "delete" and .objectRef.resource == "nodes" and .objectRef.name == $node))
	| "\(.requestReceivedTimestamp) \($who) \(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.namespace // "")/\(.objectRef.name)"' \
	"$e2e_tmp/window.json" >"$e2e_tmp/order.txt"
sed 's/^/    audit: /' "$e2e_tmp/order.txt"
first() { grep -n -m1 "$1" "$e2e_tmp/order.txt" | cut -d: -f1; }
last() { grep -n "$1" "$e2e_tmp/order.txt" | tail -n 1 | cut -d: -f1; }
l_holder=$(last "drainer create pods/eviction $ns/holder-")
l_claims=$(last "delete resourceclaims $ns/")
l_driver=$(first "drainer create pods/eviction dra-system/")
l_hook=$(first "drainer patch machines $capi_ns/$machine")
l_capi=$(first "^[^ ]* capi \(create pods/eviction\|delete pods\)")
l_infra=$(first "capi delete testmachines $capi_ns/$machine")
l_node=$(first "capi delete nodes /$node")
echo "    lines: holders..$l_holder claims..$l_claims driver $l_driver hook $l_hook capi drain ${l_capi:-none} infra $l_infra node $l_node"
lt() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" -lt "$2" ]; }
check "drainer evicted both claim holders" test "$(grep -c "drainer create pods/eviction $ns/holder-" "$e2e_tmp/order.txt")" -ge 2
check "every claim released (deleted) before drainer evicted the DRA driver's pod" lt "$l_claims" "$l_driver"
check "the claim holders were evicted before the driver" lt "$l_holder" "$l_driver"
check "drainer removed the hook after the driver's eviction" lt "$l_driver" "$l_hook"
check "Cluster API drained only after the hook went" sh -c "[ -z '$l_capi' ] || [ '$l_capi' -gt '$l_hook' ]"
check "Cluster API deleted the TestMachine after the hook went" lt "$l_hook" "$l_infra"
check "Cluster API deleted the Node last" lt "$l_infra" "$l_node"
check "the Node's deletion is the last line" test "$l_node" = "$(wc -l <"$e2e_tmp/order.txt")"
t_back0=$(date +%s.%N)
restore_node nohook && pass "$node and its Machine (without the hook) back in $(since "$t_back0") s"

echo "-- 3. the Machine without drainer's hook: Cluster API's drain alone"
check "3 pods Running on $node again" wait_until 120 sh -c "[ \"\$($KUBECTL -n $ns get pods --field-selector spec.nodeName=$node,status.phase=Running -o name | grep -c .)\" = 3 ]"
run2=$(audit_lines)
t0=$(date +%s.%N)
kubectl -n "$capi_ns" delete machine "$machine" --wait=false >/dev/null
if wait_until 300 machine_gone; then
	pass "without the hook: Machine gone $(since "$t0") s after its deletion"
else
	fail "without the hook: Machine still there after 300 s"
fi
sleep 2
audit_window "$run2" "$e2e_tmp/window2.json"
check_eq "drainer evicted nothing without its hook" 0 \
	"$(jq '[.[] | select(.userAgent // "" | startswith("drainer/")) | select(.objectRef.subresource == "eviction")] | length' "$e2e_tmp/window2.json")"
echo "    Cluster API's evictions: $(jq -r '[.[] | select(.user.username == "capi-manager" and .objectRef.subresource == "eviction") | .objectRef.namespace + "/" + .objectRef.name] | unique | join(" ")' "$e2e_tmp/window2.json")"
t_back0=$(date +%s.%N)
restore_node && pass "$node and its Machine (with the hook) back in $(since "$t_back0") s"
finish
