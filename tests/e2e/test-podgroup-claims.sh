#!/usr/bin/env bash
# A ResourceClaim reserved for a PodGroup (Kubernetes 1.37, the gate profile of
# tests/cluster: DRAINER_CLUSTER_FEATURES=next), on real kubelets: DESIGN.md "Claims of
# a PodGroup".
#
# Namespace e2e-pg: ResourceClaim gang-gpu (one gpu.example.com device), PodGroup gang
# whose spec.resourceClaims names it, and two pods of the group (spec.schedulingGroup)
# on node-3 that use it. The scheduler reserves the claim for the PodGroup, not for the
# pods (bare pods, hence --force, as kubectl drain's). drainer's plan lists it with podGroup e2e-pg/gang, used on the node, and the
# group's pods that use it with their nodes (read from the namespace). drain node-3
# exits 0: both pods of the group are evicted (the Eviction API) as claim holders, the
# kubelet unprepares the claim when the second one stops (the test DRA plugin's log
# "unprepared claim e2e-pg/gang-gpu", followed during the drain), and only after that,
# and after both pods are gone from the API server, drainer evicts node-3's driver pod
# (the audit log). The claim stays reserved for the PodGroup and allocated on node-3
# the whole time: the resourceclaim controller never writes its status, which is why
# waiting for "no claim on the node" would have waited for the PodGroup's deletion.
# plan then lists it as unused; status marks it. uncordon brings the driver back;
# deleting the PodGroup releases the claim.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
node=node-3
ns=e2e-pg
cluster_env=$DRAINER_CLUSTER_DIR/cluster.env

features=$(sed -n 's/^DRAINER_CLUSTER_FEATURES=//p' "$cluster_env" 2>/dev/null) || features=
if [ "$e2e_nodes" != real ] || e2e_no_driver || [ "$features" != next ]; then
	echo "  skipped: needs real nodes with the DRA driver and the 1.37 gate profile (this cluster: nodes ${e2e_nodes:-?}, DRA API $e2e_dra_api, DRAINER_CLUSTER_FEATURES=${features:-none})"
	finish
	exit
fi
need_drainer

objects() {
	cat <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $ns}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gang-gpu, namespace: $ns}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: gang, namespace: $ns}
spec:
  schedulingPolicy:
    basic: {}
  resourceClaims:
  - {name: gpu, resourceClaimName: gang-gpu}
YAML
	for i in 0 1; do
		cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: worker-$i, namespace: $ns}
spec:
  nodeSelector: {kubernetes.io/hostname: $node}
  schedulingGroup: {podGroupName: gang}
  terminationGracePeriodSeconds: 3
  resourceClaims:
  - {name: gpu, resourceClaimName: gang-gpu}
  containers:
  - name: c
    image: drainer.test/sleep:dev
    command: ["sleep", "3600"]
    resources:
      claims: [{name: gpu}]
YAML
	done
}
log_pid=
cleanup_pg() {
	[ -n "$log_pid" ] && reap_pid "$log_pid"
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
	"$DRAINER" uncordon "$node" --timeout 60s >/dev/null 2>&1
}
e2e_cleanup_hooks+=(cleanup_pg)
ns_settled "$ns"

echo "== a claim of PodGroup $ns/gang, used by two pods on $node"
objects | kubectl apply -f - >"$e2e_tmp/apply.out" 2>&1 || sed 's/^/    apply: /' "$e2e_tmp/apply.out"
running() { [ "$(kubectl -n "$ns" get pods -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 2 ]; }
check "both pods of the group run on $node" wait_until 90 running
claim_json() { kubectl -n "$ns" get resourceclaim gang-gpu -o json; }
claim_json >"$e2e_tmp/claim-before.json"
check_eq "the scheduler reserved the claim for the PodGroup, not for its pods" "scheduling.k8s.io/podgroups/gang" \
	"$(jq -r '[.status.reservedFor[]? | "\(.apiGroup // "")/\(.resource)/\(.name)"] | join(",")' "$e2e_tmp/claim-before.json")"
check_eq "it is allocated on $node" "$node" \
	"$(jq -r '.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0] // ""' "$e2e_tmp/claim-before.json")"

drainer_run plan plan "$node" -o json --force
check_rc "plan $node" 0 plan
check_eq "plan: the PodGroup's pods that use the claim, with their nodes" "worker-0@$node worker-1@$node" \
	"$(jq -r --arg ns "$ns" '.claims[] | select(.namespace == $ns and .name == "gang-gpu") | [.podGroupPods[]? | "\(.name)@\(.node)"] | sort | join(" ")' "$e2e_tmp/plan.out")"
check_eq "plan: the claim is the PodGroup's, used on the node, and holds the drain" "$ns/gang false true" \
	"$(jq -r --arg ns "$ns" '.claims[] | select(.namespace == $ns and .name == "gang-gpu") | "\(.podGroup) \(.podGroupUnused)"' "$e2e_tmp/plan.out") $(jq -r --arg ns "$ns" '[.groups[] | .pods[] | select(.namespace == $ns)] | length == 2' "$e2e_tmp/plan.out")"

echo "== drain $node"
drv=$(driver_pod "$node")
check "node $node runs a driver pod ($drv)" test -n "$drv"
# The plugin's log while the drain runs: the kubelet's NodeUnprepareResources calls.
kubectl -n "${drv%%/*}" logs -f "${drv#*/}" --timestamps --since=1s >"$e2e_tmp/plugin.log" 2>&1 &
log_pid=$!
track_pid "$log_pid"
sleep 1
drainer_run drain drain "$node" -o json --timeout 120s --force
check_rc "drain $node" 0 drain
sleep 1
reap_pid "$log_pid"
log_pid=
audit_window "$run_start" "$e2e_tmp/audit.json"
jq_checks --arg ns "$ns" --arg drv "$drv" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods"
		and .objectRef.subresource == "eviction" and .verb == "create" and .responseStatus.code < 300)] as $ev
	| [$ev[] | select(.objectRef.namespace == $ns)] as $group
	| [$ev[] | select(key == $drv)] as $d
	| [.[] | select((.user.username | startswith("system:node:")) and .verb == "delete" and .objectRef.resource == "pods"
		and .objectRef.subresource == null and .objectRef.namespace == $ns and .responseStatus.code == 200)] as $gone
	| [.[] | select(.objectRef.resource == "resourceclaims" and .objectRef.namespace == $ns
		and (.verb | IN("update", "patch", "delete")) and .responseStatus.code < 300)] as $claimwrites
	| (if ($group | map(.objectRef.name) | unique) == ["worker-0", "worker-1"]
	   then "ok both pods of the group were evicted through the Eviction API"
	   else "FAIL evictions of the group: \($group | map(.objectRef.name))" end),
	  (if ([.[] | select((.userAgent | startswith("drainer/")) and .verb == "delete" and .objectRef.resource == "pods")] | length) == 0
	   then "ok drainer deleted no pod" else "FAIL drainer deleted a pod" end),
	  (if ($d | length) == 0 then "FAIL the driver pod \($drv) was never evicted"
	   elif ($gone | length) < 2 then "FAIL the kubelet deleted \($gone | length) of the 2 pods of the group"
	   elif ([$d[].requestReceivedTimestamp] | min) > ([$gone[].stageTimestamp] | max)
	   then "ok the driver pod was evicted (\([$d[].requestReceivedTimestamp] | min)) after the kubelet deleted both pods of the group (\([$gone[].stageTimestamp] | max))"
	   else "FAIL the driver pod was evicted at \([$d[].requestReceivedTimestamp] | min), before the group was gone (\([$gone[].stageTimestamp] | max))" end),
	  (if ($claimwrites | length) == 0
	   then "ok nobody wrote the claim during the drain: it stayed reserved for the PodGroup and allocated"
	   else "FAIL the claim was written during the drain: \($claimwrites | map("\(.verb) by \(.user.username)"))" end)
' "$e2e_tmp/audit.json"
driver_at=$(jq -r --arg drv "$drv" '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction"
	and "\(.objectRef.namespace)/\(.objectRef.name)" == $drv) | .requestReceivedTimestamp] | min // ""' "$e2e_tmp/audit.json")
unprep=$(grep -m1 "unprepared claim $ns/gang-gpu" "$e2e_tmp/plugin.log" | cut -d' ' -f1)
echo "    plugin: unprepared at ${unprep:-never}; driver pod evicted at ${driver_at:-never}"
check "the kubelet unprepared the claim on $node (the plugin's log)" test -n "$unprep"
if [ -n "$unprep" ] && [ -n "$driver_at" ]; then
	# both RFC 3339 UTC; the log's has nanoseconds, the audit's microseconds
	check "...before drainer evicted the driver pod" test "$(date -d "$unprep" +%s%6N)" -lt "$(date -d "$driver_at" +%s%6N)"
fi
claim_json >"$e2e_tmp/claim-after.json"
check_eq "after the drain the claim is still reserved for the PodGroup and allocated on $node" "scheduling.k8s.io/podgroups/gang $node" \
	"$(jq -r '"\([.status.reservedFor[]? | "\(.apiGroup // "")/\(.resource)/\(.name)"] | join(",")) \(.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0] // "")"' "$e2e_tmp/claim-after.json")"
check_eq "node $node is drained" drained "$(node_ann "$node" drainer.io/state)"

drainer_run plan2 plan "$node" -o json --force
check_eq "plan: the claim is now unused on the node" "true" \
	"$(jq -r --arg ns "$ns" '.claims[] | select(.namespace == $ns and .name == "gang-gpu") | .podGroupUnused' "$e2e_tmp/plan2.out")"
drainer_run status status "$node"
check "status marks it" grep -q "gang-gpu .*its PodGroup's, used by no pod here" "$e2e_tmp/status.out"

echo "== uncordon $node, then the PodGroup deleted"
drainer_run uncordon uncordon "$node" --timeout 90s
check_rc "uncordon $node" 0 uncordon
check "the driver runs again on $node" wait_until 60 driver_running "$node"
kubectl -n "$ns" delete podgroup gang --wait=false >/dev/null 2>&1
released() { [ "$(claim_json | jq -r '(.status.reservedFor // []) | length')" = 0 ] && [ "$(claim_json | jq -r '.status.allocation == null')" = true ]; }
check "deleting the PodGroup released the claim (the resourceclaim controller)" wait_until 60 released
finish
