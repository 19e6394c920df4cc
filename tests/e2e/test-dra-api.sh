#!/usr/bin/env bash
# Every DRA API version drainer reads, and none. Run on a cluster of
# DRAINER_CLUSTER_DRA_API=v1beta2, v1beta1 or off (tests/cluster/up; simulated
# nodes: 1.36's kubelet, scheduler and resourceclaim controller speak v1 only, see
# up), as tests/run-all does, one cluster per setting. On v1 it runs too.
#
# With a DRA API: one claim-holding pod and two pods without claims on node-1. The
# claim is allocated and reserved by this script, and released by it once its pod is
# gone, as 1.36's scheduler and resourceclaim controller would on a v1 cluster (they
# cannot run here). status and plan read the claim through the served version and
# say which; doctor reads it there (PASS dra-api); drain evicts in the safe order and
# stops the driver only after the claim was released (the audit log, check_order);
# guard on the drained node returns 0.
# With none: status and plan say DRA is not served (exit 0), doctor's dra-api
# finding is a WARN and it exits 6; drain evicts the two pods and leaves the driver
# DaemonSet pod alone (kubectl drain's behaviour), saying so once; guard returns at
# once without watching claims.
# Every setting: serve --max-parallel with a Lease namespace that does not exist
# names it and what to do (no bare errno), within 10 s.
# On 1.33 (the release's own DRA API, beta) it runs on real nodes: v1beta2 serves
# v1beta1 too and drainer must pick v1beta2; off runs no DRA driver on the nodes.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
# The node with the fewest pods of other tests (on real nodes the demo workload may
# be on node-1): its pods are the script's own, plus DaemonSet and mirror pods.
node=$(kubectl get pods -A -o json | jq -r --argjson nodes "$(kubectl get nodes -o json | jq '[.items[].metadata.name]')" '
	[.items[] | select(.spec.nodeName != null and ((.metadata.ownerReferences // []) | map(.kind) | index("DaemonSet") | not)
		and (.metadata.annotations["kubernetes.io/config.mirror"] == null)) | .spec.nodeName] as $busy
	| [$nodes[] | . as $n | {n: ., c: ([$busy[] | select(. == $n)] | length)}] | sort_by(.c, .n) | .[0].n')
ns=e2e-dra-api
api=$e2e_dra_api
t_script=$SECONDS

cleanup_dra_api() {
	[ -n "${releaser_pid:-}" ] && reap_pid "$releaser_pid"
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
	reset_node "$node"
}
e2e_cleanup_hooks+=(cleanup_dra_api)

served=$(kubectl api-versions | sed -n 's|^resource\.k8s\.io/||p' | grep -v alpha | tr '\n' ' ')
want_served=$([ "$api" = off ] || echo "$api ")
# 1.33 with v1beta2: v1beta1 is served as well (its own components read it).
kube_minor=$(cut -d. -f2 <<<"$e2e_kube_version")
[ "${kube_minor:-99}" -lt 34 ] && [ "$api" = v1beta2 ] && want_served="v1beta1 v1beta2 "
check_eq "the API server serves resource.k8s.io as DRAINER_CLUSTER_DRA_API=$api says" "$want_served" "$served"
kubectl create namespace "$ns" >/dev/null

# Two pods without claims (no controller: drained with --force, as kubectl drain
# --force would), pinned to node-1: the scheduler of a non-v1 cluster schedules nothing.
for p in plain-a plain-b; do
	kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $p, labels: {app: e2e-dra-api}}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 5
  containers: [{name: c, image: registry.example.com/app:v1}]
YAML
done
if [ "$api" != off ]; then
	# The claim in the served version's shape (v1beta1: deviceClassName in the request).
	if [ "$api" = v1beta1 ]; then
		req='{"name": "gpu", "deviceClassName": "gpu.example.com"}'
	else
		req='{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}'
	fi
	# Real nodes (1.33): the release's scheduler allocates and reserves the claim and its
	# resourceclaim controller releases it. Simulated nodes (a release whose scheduler
	# reads v1 only, up): the pod is pinned and this script does both, as they would.
	if [ "$e2e_nodes" = real ]; then
		holder_placement="nodeSelector: {kubernetes.io/hostname: $node}"
	else
		holder_placement="nodeName: $node"
	fi
	kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/$api
kind: ResourceClaim
metadata: {name: e2e-gpu}
spec: {devices: {requests: [$req]}}
---
apiVersion: v1
kind: Pod
metadata: {name: holder, labels: {app: e2e-dra-api}}
spec:
  $holder_placement
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: registry.example.com/gpu-app:v1
    resources: {claims: [{name: gpu}]}
  resourceClaims: [{name: gpu, resourceClaimName: e2e-gpu}]
YAML
	uid=$(kubectl -n "$ns" get pod holder -o jsonpath='{.metadata.uid}')
	claim_reserved() { [ "$(kubectl -n "$ns" get resourceclaim e2e-gpu -o json | jq -r '.status.reservedFor[0].uid')" = "$uid" ]; }
	claim_placed() { claim_reserved && claim_on_node; }
	claim_on_node() { [ "$(kubectl -n "$ns" get resourceclaim e2e-gpu -o json | jq -r '.status.allocation.devices.results[0].pool')" = "$node" ]; }
fi
if [ "$api" != off ] && [ "$e2e_nodes" = real ]; then
	check "the scheduler allocated the claim on $node and reserved it for its pod" \
		wait_until 60 claim_placed
elif [ "$api" != off ]; then
	# A device of the node's pool that no claim holds (the driver prepares a device
	# for one claim at a time).
	taken=$(kubectl get resourceclaims -A -o json | jq -c --arg n "$node" '[.items[].status.allocation.devices.results[]? | select(.pool == $n) | .device]')
	device=$(kubectl get resourceslices -o json | jq -r --arg n "$node" --argjson taken "$taken" '
		[.items[] | select(.spec.nodeName == $n and .spec.driver == "gpu.example.com") | .spec.devices[].name
			| select(. as $d | $taken | index($d) | not)] | sort | .[0] // "none"')
	# Allocated on node-1's pool and reserved for the pod, as the scheduler writes it.
	kubectl -n "$ns" patch "resourceclaims.$api.resource.k8s.io" e2e-gpu --subresource=status --type=merge -p "$(jq -nc --arg uid "$uid" --arg n "$node" --arg d "$device" '{status: {
		allocation: {devices: {results: [{request: "gpu", driver: "gpu.example.com", pool: $n, device: $d}]},
			nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: "metadata.name", operator: "In", values: [$n]}]}]}},
		reservedFor: [{resource: "pods", name: "holder", uid: $uid}]}}')" >/dev/null
	check "the claim is allocated on $node and reserved for its pod" claim_reserved
fi
pods_running() { [ "$(kubectl -n "$ns" get pods -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = "$1" ]; }
want_pods=$([ "$api" = off ] && echo 2 || echo 3)
check "$want_pods pods Running on $node" wait_until 60 pods_running "$want_pods"

# ---- status, plan, doctor ----
drainer_run status status "$node" -o json
check_rc "status" 0 status
if [ "$api" = off ]; then
	check_eq "status -o json: draServed false, draApi null" "false null" "$(jq -r '"\(.draServed) \(.draApi)"' "$e2e_tmp/status.out")"
	drainer_run status-t status "$node"
	check "status says DRA is not served" grep -q 'DRA: not served by this cluster' "$e2e_tmp/status-t.out"
else
	check_eq "status -o json: draApi" "resource.k8s.io/$api" "$(jq -r .draApi "$e2e_tmp/status.out")"
	check_eq "status -o json: the claim on $node" "$ns/e2e-gpu" "$(jq -r --arg ns "$ns" '[.claims[] | "\(.namespace // .ns)/\(.name)" | select(startswith($ns + "/"))] | join(",")' "$e2e_tmp/status.out")"
fi
drainer_run plan plan "$node" --force -o json
check_rc "plan" 0 plan
if [ "$api" = off ]; then
	check_eq "plan -o json: draServed false" false "$(jq -r .draServed "$e2e_tmp/plan.out")"
	check_eq "plan: no claims, no DRA driver to stop" "0 0" "$(jq -r '"\(.claims | length) \([.pods[]? | select(.class == "driver")] | length)"' "$e2e_tmp/plan.out")"
else
	check_eq "plan -o json: draApi" "resource.k8s.io/$api" "$(jq -r .draApi "$e2e_tmp/plan.out")"
	check_eq "plan: the claim to be released" "e2e-gpu" "$(jq -r --arg ns "$ns" '[.claims[] | select((.namespace // .ns) == $ns) | .name] | join(",")' "$e2e_tmp/plan.out")"
fi
drainer_run doctor doctor -o json
if [ "$api" = off ]; then
	check_rc "doctor: no DRA API" 6 doctor
	check_eq "doctor -o json: exitCode" 6 "$(jq -r .exitCode "$e2e_tmp/doctor.out")"
	check_eq "doctor: the dra-api finding" WARN "$(jq -r '.findings[] | select(.check == "dra-api") | .status' "$e2e_tmp/doctor.out")"
else
	check "doctor: not the no-DRA exit (got $run_rc)" [ "$run_rc" != 6 ]
	check_eq "doctor: dra-api names the served version" "PASS resource.k8s.io/$api" \
		"$(jq -r '.findings[] | select(.check == "dra-api") | "\(.status) \(.message | capture("serves (?<v>[^:]+)").v)"' "$e2e_tmp/doctor.out")"
fi
doctor_start=$run_start
audit_window "$doctor_start" "$e2e_tmp/audit-doctor.json"
if [ "$api" = off ]; then
	check_eq "doctor read no slices or claims" 0 "$(jq '[.[] | select((.userAgent | startswith("drainer/")) and (.objectRef.resource // "" | IN("resourceslices", "resourceclaims")))] | length' "$e2e_tmp/audit-doctor.json")"
else
	check_eq "doctor listed slices and claims at $api only" "$api $api" \
		"$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and (.objectRef.resource // "" | IN("resourceslices", "resourceclaims"))) | .objectRef.apiVersion] | unique | join(" ") as $v | "\($v) \($v)"' "$e2e_tmp/audit-doctor.json")"
fi

# ---- drain ----
pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
[ "$api" = off ] || claims_on_node "$node" >"$e2e_tmp/claims.json"
driver=$(driver_pod "$node")
if e2e_no_driver; then
	check "no DRA driver on $node (real nodes without DRA)" [ -z "$driver" ]
else
	check "a driver pod runs on $node ($driver)" [ -n "$driver" ]
fi
if [ "$api" != off ] && [ "$e2e_nodes" != real ]; then
	# The resourceclaim controller's part: once the pod is gone, the claim is released.
	(
		while kubectl -n "$ns" get pod holder >/dev/null 2>&1; do sleep 0.2; done
		# (a merge patch: a real resourceclaim controller may have dropped the reservation
		# of the pod already; it does not deallocate a claim it did not allocate, one
		# without its finalizer)
		kubectl -n "$ns" patch "resourceclaims.$api.resource.k8s.io" e2e-gpu --subresource=status --type=merge \
			-p '{"status": {"reservedFor": null, "allocation": null}}' >/dev/null
	) &
	releaser_pid=$!
	track_pid "$releaser_pid"
fi
drainer_run drain drain "$node" --force -o json --timeout 120s
check_rc "drain $node" 0 drain
audit_window "$run_start" "$e2e_tmp/audit.json"
evicted=$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .responseStatus.code == 201) | "\(.objectRef.namespace)/\(.objectRef.name)"] | sort | join(" ")' "$e2e_tmp/audit.json")
if [ "$api" = off ]; then
	check_eq "drain evicted the two pods, and not the DaemonSet pod $driver" "$ns/plain-a $ns/plain-b" "$evicted"
	check_eq "drain said once that no DRA API is served" 1 "$(grep -c 'serves no DRA API' "$e2e_tmp/drain.err")"
	e2e_no_driver || check "the driver DaemonSet pod stays (kubectl drain leaves DaemonSet pods)" driver_running "$node"
	check_eq "drainer read no claims or slices" 0 "$(jq '[.[] | select((.userAgent | startswith("drainer/")) and (.objectRef.resource // "" | IN("resourceslices", "resourceclaims")) and .responseStatus.code < 300)] | length' "$e2e_tmp/audit.json")"
else
	[ -z "${releaser_pid:-}" ] || reap_pid "$releaser_pid"
	# (the releaser: the resourceclaim controller on real nodes, this script on simulated ones)
	check_order "$e2e_tmp/audit.json" "$e2e_tmp/classes.json" "$e2e_tmp/claims.json" "$node" $([ "$e2e_nodes" = real ] || echo admin)
	check_eq "drainer listed and watched claims and slices at $api only" "$api" \
		"$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and (.objectRef.resource // "" | IN("resourceslices", "resourceclaims")) and .responseStatus.code < 300) | .objectRef.apiVersion] | unique | join(" ")' "$e2e_tmp/audit.json")"
	check "no driver pod on $node" no_driver_pod "$node"
	check_eq "no ResourceClaim on $node" "[]" "$(claims_on_node "$node")"
fi
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
check_eq "node unschedulable" true "$(node_unschedulable "$node")"
check_eq "-o json: result" done "$(jq -r .result "$e2e_tmp/drain.out" 2>/dev/null)"
echo "  info: drain took $run_secs s"

# ---- guard on the drained node ----
guard_start=$(audit_lines)
drainer_run guard guard --node "$node"
check_rc "guard on the drained node" 0 guard
audit_window "$guard_start" "$e2e_tmp/audit-guard.json"
if [ "$api" = off ]; then
	check_eq "guard opened no watch of claims or slices (none served)" 0 "$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "watch" and (.objectRef.resource // "" | IN("resourceslices", "resourceclaims")))] | length' "$e2e_tmp/audit-guard.json")"
fi
echo "  info: guard took $run_secs s"

# ---- serve --max-parallel without its Lease namespace ----
reset_node "$node"
serve_out=$e2e_tmp/serve.err
timeout -k 2 15 "$DRAINER" serve --all-nodes --max-parallel 1 --lease-namespace e2e-no-such-ns >/dev/null 2>"$serve_out" &
serve_pid=$!
track_pid "$serve_pid"
kubectl annotate node "$node" drainer.io/request=drain --overwrite >/dev/null
slot_said() { grep -q 'cannot take a drain slot' "$serve_out"; }
check "serve says within 10 s why it cannot take a drain slot" wait_until 10 slot_said
check "... naming the Lease namespace and what to do, no bare errno" \
	grep -q 'namespace e2e-no-such-ns not found .*: create it' "$serve_out"
check "... and not 'No such file or directory'" bash -c "! grep -q 'No such file or directory' '$serve_out'"
# whoever annotated the Node reads why there: the API server holds it
node_says_slot() { node_ann "$node" drainer.io/message | grep -q 'cannot take a drain slot: namespace e2e-no-such-ns not found'; }
check "the Node says it too within 10 s (drainer.io/message)" wait_until 10 node_says_slot
check_eq "... in drainer.io/state=waiting, not cordoned (no slot, no drain)" "waiting false" \
	"$(node_ann "$node" drainer.io/state) $(node_unschedulable "$node")"
reap_pid "$serve_pid"
kubectl annotate node "$node" drainer.io/request- >/dev/null 2>&1
reset_node "$node"
echo "  info: test-dra-api ($api) took $((SECONDS - t_script)) s"
finish
