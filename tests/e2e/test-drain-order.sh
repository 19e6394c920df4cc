#!/usr/bin/env bash
# The order of a drain: drainer drain node-1 with the demo workload (claims
# from a template, one user-created claim shared by two StatefulSet pods) plus a
# claim-holding DaemonSet on node-1 (ResourceClaimTemplate, system-cluster-critical).
# From the audit log: every eviction of a claim holder precedes every eviction of
# a pod without claims (non-critical holders before the critical one); the driver
# pod is evicted only after the kubelet deleted every evicted pod
# and the resourceclaim controller released every claim of the node. After the
# drain the API server shows the node cordoned and tainted, only mirror pods
# left, no claim on it, no driver pod, state=drained. After the slice was wiped,
# uncordon brings the driver back (Running, Ready, slice republished) before it
# uncordons, and clears drainer's annotations.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_order() {
	kubectl -n demo delete daemonset e2e-claim-ds --wait=false >/dev/null 2>&1
	kubectl -n demo delete resourceclaimtemplate e2e-ds-gpu >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_order)

demo || { fail "demo workload"; finish; exit 1; }
{ claim_template demo e2e-ds-gpu; cat <<'YAML'; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: e2e-claim-ds
  namespace: demo
spec:
  selector:
    matchLabels: {app: e2e-claim-ds}
  template:
    metadata:
      labels: {app: e2e-claim-ds}
    spec:
      nodeSelector:
        kubernetes.io/hostname: node-1
      priorityClassName: system-cluster-critical
      containers:
      - name: monitor
        image: registry.example.com/gpu-monitor:v1
        resources:
          claims:
          - name: gpu
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: e2e-ds-gpu
YAML
ds_running() {
	[ "$(kubectl -n demo get pods -l app=e2e-claim-ds --field-selector spec.nodeName=node-1 -o json |
		jq '[.items[] | select(.status.phase == "Running" and (.status.resourceClaimStatuses // [] | length) > 0)] | length')" = 1 ]
}
check "the claim-holding DaemonSet pod runs on $node" wait_until 60 ds_running

pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
claims_on_node "$node" >"$e2e_tmp/claims.json"
echo "  pods: $(jq -r '[.[] | "\(.name)=\(.cls)"] | join(" ")' "$e2e_tmp/classes.json")"
echo "  claims on $node: $(jq -r '[.[].name] | join(" ")' "$e2e_tmp/claims.json")"
check "4 claims on $node before the drain (2 generated, shared-gpu, the DaemonSet's)" [ "$(jq length "$e2e_tmp/claims.json")" = 4 ]
check "the shared claim is reserved for two pods" \
	[ "$(kubectl -n demo get resourceclaim shared-gpu -o json | jq '.status.reservedFor | length')" = 2 ]
check "one critical claim holder (the DaemonSet pod)" [ "$(jq '[.[] | select(.cls == "holder-critical")] | length' "$e2e_tmp/classes.json")" = 1 ]
driver=$(driver_pod "$node")
check "a driver pod runs on $node ($driver)" [ -n "$driver" ]

drainer_run drain drain "$node" -o json --timeout 120s
check_rc "drain $node" 0 drain
audit_window "$run_start" "$e2e_tmp/audit.json"

# Rule 1 from the audit log.
check_order "$e2e_tmp/audit.json" "$e2e_tmp/classes.json" "$e2e_tmp/claims.json" "$node"
# The cordon came first: drainer's first write to the node was answered before its first eviction.
jq_checks '[.[] | select(.userAgent | startswith("drainer/"))] as $d
	| ([$d[] | select(.verb == "patch" and .objectRef.resource == "nodes")] | first) as $p
	| ([$d[] | select(.objectRef.subresource == "eviction")] | first) as $e
	| if $p == null or $e == null then "FAIL no node patch or no eviction by drainer"
	  elif $p.stageTimestamp < $e.requestReceivedTimestamp then "ok the node was patched (cordon) before the first eviction"
	  else "FAIL an eviction (\($e.objectRef.name)) was requested before the cordon patch was answered" end' "$e2e_tmp/audit.json"
check_eq "drainer only evicted (no pod DELETE without --disable-eviction)" "" \
	"$(drainer_writes "$e2e_tmp/audit.json" | grep '^delete ' || true)"
check_eq "drainer wrote only the node, evictions and Events" "" \
	"$(drainer_writes "$e2e_tmp/audit.json" | grep -Ev '^(patch nodes |create pods/eviction |create events |patch events )' || true)"

# What the API server holds after the drain.
check_eq "node unschedulable" true "$(node_unschedulable "$node")"
check_eq "node has the drain taint" true "$(node_tainted "$node")"
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
check_eq "drainer.io/was-unschedulable=false" false "$(node_ann "$node" drainer.io/was-unschedulable)"
check_eq "drainer.io/driver-stop records the taint strategy" taint "$(node_ann "$node" drainer.io/driver-stop | jq -r '.[0].strategy' 2>/dev/null)"
pods_on_node "$node" "$e2e_tmp/after.json"
left=$(classify_pods "$e2e_tmp/after.json" | jq -r '.[] | select(.cls != "mirror" and .cls != "ds") | "\(.ns)/\(.name)(\(.cls))"')
check_eq "only mirror pods and claim-less DaemonSet pods left on $node" "" "$left"
check_eq "no pod on $node is terminating" 0 "$(jq '[.items[] | select(.metadata.deletionTimestamp != null)] | length' "$e2e_tmp/after.json")"
check_eq "the mirror pod stays" "demo/node-agent-node-1" "$(classify_pods "$e2e_tmp/after.json" | jq -r '.[] | select(.cls == "mirror") | "\(.ns)/\(.name)"')"
check_eq "no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
check_eq "no claim allocated from node-1's pool" 0 \
	"$(kubectl get resourceclaims -A -o json | jq '[.items[] | select(.status.allocation != null) | .status.allocation.devices.results[] | select(.pool == "node-1")] | length')"
check "no driver pod on $node" no_driver_pod "$node"
check "the claim-holding DaemonSet pod did not come back" \
	[ "$(kubectl -n demo get pods -l app=e2e-claim-ds --field-selector spec.nodeName=node-1 -o name | wc -l)" = 0 ]
check_eq "-o json: result" done "$(jq -r .result "$e2e_tmp/drain.out" 2>/dev/null)"
check_eq "-o json: exitCode" 0 "$(jq -r .exitCode "$e2e_tmp/drain.out" 2>/dev/null)"
check_eq "-o json: phases in order" "evict-claim-holders evict-rest wait-released stop-drivers drained" \
	"$(jq -r '[.phases[].name] | join(" ")' "$e2e_tmp/drain.out" 2>/dev/null)"
accepted=$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .responseStatus.code == 201)] | length' "$e2e_tmp/audit.json")
check_eq "-o json: podsEvicted = accepted evictions in the audit log" "$accepted" "$(jq -r .podsEvicted "$e2e_tmp/drain.out" 2>/dev/null)"
check "-o json: claimsWaitedFor >= the 4 claims on the node" [ "$(jq -r '.claimsWaitedFor // 0' "$e2e_tmp/drain.out" 2>/dev/null)" -ge 4 ]
echo "  info: drain took $run_secs s, $(drainer_requests "$e2e_tmp/audit.json") requests in the audit log (drainer says apiRequests=$(jq -r .apiRequests "$e2e_tmp/drain.out" 2>/dev/null))"

# Uncordon after the kubelet wiped the slice: the driver and its slice must be back first.
check "the slice of $node is wiped after the driver stopped (<= 50 s)" wait_until 50 no_slice "$node"
drainer_run uncordon uncordon "$node"
check_rc "uncordon $node" 0 uncordon
audit_window "$run_start" "$e2e_tmp/audit-u.json"
check "driver pod Running and Ready again" driver_running "$node"
check "slice of $node published again" slice_published "$node"
check_eq "node schedulable" false "$(node_unschedulable "$node")"
check_eq "drain taint removed" false "$(node_tainted "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
newdriver=$(driver_pod "$node")
jq_checks --arg drv "${newdriver#*/}" --arg slice "$node-gpu.example.com" '
	([.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch" and .objectRef.resource == "nodes")] | last) as $fin
	| ([.[] | select(.verb == "create" and .objectRef.resource == "resourceslices" and .objectRef.name == $slice and .responseStatus.code < 300)] | first) as $sl
	| ([.[] | select((.user.username | test("^(drainer-sim|system:node:.+)$")) and .objectRef.resource == "pods" and .objectRef.subresource == "status" and .objectRef.name == $drv)] | first) as $st
	| if $fin == null then "FAIL uncordon did not patch the node"
	  else (if $sl == null then "FAIL the slice was not re-created during uncordon"
	        elif $sl.stageTimestamp < $fin.requestReceivedTimestamp then "ok the node was uncordoned after the slice was published again"
	        else "FAIL the node was uncordoned (\($fin.requestReceivedTimestamp)) before the slice was published (\($sl.stageTimestamp))" end),
	       (if $st == null then "FAIL no status update of the new driver pod \($drv)"
	        elif $st.stageTimestamp < $fin.requestReceivedTimestamp then "ok the node was uncordoned after the new driver pod \($drv) reported its status"
	        else "FAIL the node was uncordoned before the new driver pod ran" end) end' "$e2e_tmp/audit-u.json"
check_eq "uncordon wrote only the node and Events" "" \
	"$(drainer_writes "$e2e_tmp/audit-u.json" | grep -Ev '^(patch nodes |create events |patch events )' || true)"
finish
