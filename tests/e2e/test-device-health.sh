#!/usr/bin/env bash
# One device reported unhealthy by its driver, on real nodes, and the 1.37 feature
# profile (tests/cluster: DRAINER_CLUSTER_FEATURES=next) when the cluster runs with it.
#
# Profile (only when cluster.env says DRAINER_CLUSTER_FEATURES=next): the API server
# and node-1's kubelet run with GenericWorkload, DRAWorkloadResourceClaims,
# DRAOptionalNodeOperations and EvictionRequestAPI on (the API server's
# kubernetes_feature_enabled, the kubelet's /configz); scheduling.k8s.io/v1beta1 serves
# workloads and podgroups, lifecycle.k8s.io/v1alpha1 evictionrequests; and the API
# server keeps the gated fields (a server-side dry run, nothing stored): a PodGroup's
# spec.resourceClaims and a ResourceSlice's spec.skipNodeOperations; a pod whose claim's
# device skips node operations runs without any driver, and drainer's plan lists that
# claim as not holding a drain back (noNodeOperations; --driver: 0 claims to wait for).
#
# Health (any release from 1.36, where ResourceHealthStatus is on by default): node-1
# runs the demo; the test DRA plugin reports every device Healthy, so the GPU pod's
# container status (as the API server has it) lists its device in
# allocatedResourcesStatus as Healthy. node-1 annotates itself (its own kubelet
# credentials) sim.drainer.io/unhealthy-devices=DEVICE: that pod's device becomes
# Unhealthy, every other pod's device stays Healthy, the slice carries the NoSchedule
# device taint gpu.example.com/unhealthy on that device only; nothing is evicted (the
# pod keeps its UID and runs). The annotation removed: Healthy again, no taint.
#
# Throughout, `drainer serve --node node-1 --on-unhealthy-device=report` runs: the API
# server receives one Warning Event DrainerDeviceUnhealthy on node-1 naming the device,
# the slice's taint and the pod's report, then one Normal DrainerDeviceHealthy; its
# /metrics shows drainer_device_unhealthy for the device meanwhile; the audit log has
# no eviction, no pod delete and no write but Events from it.
#
# Then `serve --on-unhealthy-device=drain-device --max-parallel 1` (where DeviceTaintRules
# are served): the device marked unhealthy again is drained alone, from the API server's
# record: a slot Lease taken for node-1, one NoSchedule DeviceTaintRule selecting that
# device, then exactly the pod whose claim holds it evicted through the Eviction API;
# node-1 stays schedulable, every other pod on it, the driver's too, keeps its UID; the
# Node records the device drain as drained; the slot is released. Healthy again, the
# device stays drained (the rule stays) until `drainer uncordon node-1 --device`, which
# deletes the rule and the record.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
node=node-1
cluster_env=$DRAINER_CLUSTER_DIR/cluster.env

if [ "$e2e_nodes" != real ] || e2e_no_driver; then
	echo "  skipped: needs real nodes with the DRA driver (this cluster: nodes ${e2e_nodes:-?}, DRA API $e2e_dra_api)"
	finish
	exit
fi
kube_minor=${e2e_kube_version#1.}
kube_minor=${kube_minor%%.*}
if [ "${kube_minor:-0}" -lt 36 ]; then
	echo "  skipped: Kubernetes $e2e_kube_version (the ResourceHealthStatus gate is on by default from 1.36)"
	finish
	exit
fi

features=$(sed -n 's/^DRAINER_CLUSTER_FEATURES=//p' "$cluster_env" 2>/dev/null) || features=
cleanup_health() {
	kubectl annotate node "$node" sim.drainer.io/unhealthy-devices- >/dev/null 2>&1
}
e2e_cleanup_hooks+=(cleanup_health)

# ---- the feature profile ----
if [ "$features" = next ]; then
	metrics=$("$KUBECTL" get --raw /metrics 2>/dev/null) || metrics=
	at=$("$KUBECTL" get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}:{.status.daemonEndpoints.kubeletEndpoint.Port}')
	pki=$DRAINER_CLUSTER_DIR/pki
	configz=$(curl -sf --cacert "$pki/ca.crt" --cert "$pki/kubelet-client.crt" --key "$pki/kubelet-client.key" "https://$at/configz") || configz='{}'
	for g in GenericWorkload:BETA DRAWorkloadResourceClaims:BETA DRAOptionalNodeOperations:ALPHA EvictionRequestAPI:ALPHA; do
		name=${g%%:*} stage=${g#*:}
		check "the API server runs with $name ($stage) on" grep -qx "kubernetes_feature_enabled{name=\"$name\",stage=\"$stage\"} 1" <<<"$metrics"
		check_eq "$node's kubelet runs with $name on" true "$(jq -r --arg g "$name" '.kubeletconfig.featureGates[$g] // false' <<<"$configz")"
	done
	served() { # GROUP/VERSION: its resources' names
		"$KUBECTL" get --raw "/apis/$1" 2>/dev/null | jq -r '.resources[].name' | sort | tr '\n' ' '
	}
	sched=$(served scheduling.k8s.io/v1beta1)
	life=$(served lifecycle.k8s.io/v1alpha1)
	check "scheduling.k8s.io/v1beta1 serves workloads and podgroups ($sched)" grep -q 'podgroups .*workloads ' <<<"$sched"
	check "lifecycle.k8s.io/v1alpha1 serves evictionrequests ($life)" grep -q 'evictionrequests ' <<<"$life"
	# Fields the API server drops while their gate is off (the registry strategies);
	# a dry run stores nothing.
	pg=$(kubectl -n default create --dry-run=server -o json -f - 2>"$e2e_tmp/pg.err" <<'YAML'
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: e2e-health-pg
spec:
  schedulingPolicy:
    basic: {}
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: e2e-health-gpu
YAML
	) || pg='{}'
	check_eq "a PodGroup keeps spec.resourceClaims (DRAWorkloadResourceClaims) $(head -c 300 "$e2e_tmp/pg.err")" \
		e2e-health-gpu "$(jq -r '.spec.resourceClaims[0].resourceClaimTemplateName // ""' <<<"$pg")"
	sl=$(kubectl create --dry-run=server -o json -f - 2>"$e2e_tmp/sl.err" <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: e2e-health-skip
spec:
  driver: skip.example.com
  pool:
    name: e2e-health
    generation: 1
    resourceSliceCount: 1
  allNodes: true
  skipNodeOperations: ["*"]
  devices:
  - name: dev-0
YAML
	) || sl='{}'
	check_eq "a ResourceSlice keeps spec.skipNodeOperations (DRAOptionalNodeOperations) $(head -c 300 "$e2e_tmp/sl.err")" \
		'*' "$(jq -r '.spec.skipNodeOperations // [] | join(",")' <<<"$sl")"
	# A claim without node operations: a slice of the driver skip.example.com (no
	# kubelet plugin anywhere) with skipNodeOperations ["*"]; the kubelet starts the
	# pod without calling a driver, and drainer's plan lists its claim as one that
	# does not hold a drain back (DESIGN.md "Claims without node operations").
	skip_objects() {
		cat <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: e2e-skip}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: skip.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "skip.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-skip.example.com}
spec:
  driver: skip.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  skipNodeOperations: ["*"]
  devices:
  - name: dev-0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: skip, namespace: e2e-skip}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: skip.example.com}
---
apiVersion: v1
kind: Pod
metadata: {name: skip-holder, namespace: e2e-skip}
spec:
  nodeSelector: {kubernetes.io/hostname: node-1}
  terminationGracePeriodSeconds: 5
  resourceClaims:
  - {name: r, resourceClaimName: skip}
  containers:
  - name: c
    image: drainer.test/sleep:dev
    command: ["sleep", "3600"]
    resources:
      claims: [{name: r}]
YAML
	}
	cleanup_skip() { skip_objects | kubectl delete --ignore-not-found --wait=true -f - >/dev/null 2>&1; }
	e2e_cleanup_hooks+=(cleanup_skip)
	ns_settled e2e-skip
	skip_objects | kubectl apply -f - >/dev/null
	skip_running() { [ "$(kubectl -n e2e-skip get pod skip-holder -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
	wait_until 60 skip_running
	check "a pod whose claim skips node operations runs on $node without any driver of skip.example.com" skip_running
	check_eq "its allocation carries skipNodeOperations" '*' \
		"$(kubectl -n e2e-skip get resourceclaim skip -o json | jq -r '.status.allocation.devices.results[0].skipNodeOperations // [] | join(",")')"
	if [ -x "$DRAINER" ]; then
		"$DRAINER" plan "$node" -o json >"$e2e_tmp/plan-skip.json" 2>"$e2e_tmp/plan-skip.err"
		check_eq "plan $node: e2e-skip/skip has noNodeOperations, the gpu claims not" "true false" \
			"$(jq -r '[(.claims[] | select(.namespace == "e2e-skip") | .noNodeOperations), ([.claims[] | select(.namespace != "e2e-skip") | .noNodeOperations] | any)] | map(tostring) | join(" ")' "$e2e_tmp/plan-skip.json")"
		"$DRAINER" plan "$node" --driver skip.example.com >"$e2e_tmp/plan-skip.txt" 2>&1
		check "plan $node --driver skip.example.com waits for no claim" grep -q '(0 claims now)' "$e2e_tmp/plan-skip.txt"
	fi
	cleanup_skip
else
	echo "  (cluster without DRAINER_CLUSTER_FEATURES=next: the profile's checks are skipped)"
fi

# ---- device health ----
demo || { fail "demo workload"; finish; exit 1; }
holder=$(kubectl -n demo get pods -l app=gpu-inference --field-selector "spec.nodeName=$node" -o json |
	jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | sort | first // ""')
claim=$(kubectl -n demo get pod "$holder" -o json | jq -r '.status.resourceClaimStatuses[0].resourceClaimName // ""')
res=$(kubectl -n demo get resourceclaim "$claim" -o json | jq -r '.status.allocation.devices.results[0] | "\(.driver)/\(.pool)/\(.device)"')
dev=${res##*/}
holder_uid=$(kubectl -n demo get pod "$holder" -o jsonpath='{.metadata.uid}')
echo "  device $res, held by claim demo/$claim of pod demo/$holder"
check "the GPU pod holds one device of $node" [ "${res%/*}" = "gpu.example.com/$node" ]

# health RESOURCE_ID: the health the API server has for it in the containers of the
# demo pods on the node, one "pod=health" per holder, sorted.
health_of() {
	kubectl -n demo get pods --field-selector "spec.nodeName=$node" -o json | jq -r --arg id "$1" '
		[.items[] | .metadata.name as $p | .status.containerStatuses[]? | .allocatedResourcesStatus[]?
		 | .resources[]? | select(.resourceID == $id) | "\($p)=\(.health)"] | unique | join(" ")'
}
# others: the health of every other device the demo pods hold ("Healthy" once each).
others_health() {
	kubectl -n demo get pods --field-selector "spec.nodeName=$node" -o json | jq -r --arg id "$1" '
		[.items[] | .status.containerStatuses[]? | .allocatedResourcesStatus[]? | .resources[]?
		 | select(.resourceID != $id) | .health] | unique | join(" ")'
}
slice_taints() { # the devices of node's slice that carry the taint gpu.example.com/unhealthy, and its effect
	kubectl get resourceslices -o json | jq -r --arg n "$node" '
		[.items[] | select(.spec.nodeName == $n and .spec.driver == "gpu.example.com") | .spec.devices[]
		 | select(any(.taints[]?; .key == "gpu.example.com/unhealthy")) | "\(.name):\(.taints[] | select(.key == "gpu.example.com/unhealthy") | .effect)"]
		| join(" ")'
}
is_health() { [ "$(health_of "$1")" = "$2" ]; }

wait_until 60 is_health "$res" "$holder=Healthy"
check_eq "before: the API server has $res Healthy in $holder's status" "$holder=Healthy" "$(health_of "$res")"

# serve --on-unhealthy-device=report watches the node's device health from here on.
health_events() { # REASON: the messages of drainer's Events of that reason on node since the serve started
	node_events "$node" "$e2e_tmp/events.json"
	jq -r --arg r "$1" --arg t "$serve_t0" '.[] | select(.reason == $r and .component == "drainer" and .t >= $t) | .message' "$e2e_tmp/events.json"
}
metrics_port=$((DRAINER_CLUSTER_API_PORT + 61))
unhealthy_metric() {
	curl -sf "http://127.0.0.1:$metrics_port/metrics" | grep -F "drainer_device_unhealthy{node=\"$node\",device=\"$res\"}"
}
serve_t0=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 1
serve_line=$(audit_lines)
serve_start h serve --node "$node" --max-parallel 0 --on-unhealthy-device=report --metrics-addr "127.0.0.1:$metrics_port"
e2e_cleanup_hooks+=("serve_stop h KILL")
check "serve --on-unhealthy-device=report is up (its /readyz answers)" wait_until 20 curl -sf "http://127.0.0.1:$metrics_port/readyz"
sleep 2
check_eq "serve: no device reported unhealthy while every device is Healthy" "" "$(health_events DrainerDeviceUnhealthy)"
check_eq "before: every other allocated device is Healthy" Healthy "$(others_health "$res")"
check_eq "before: no device of $node's slice is tainted" "" "$(slice_taints)"

# The node itself marks its device (its kubelet's credentials: the annotation is
# node-writable under NodeRestriction).
t0=$(date +%s.%N)
if "$KUBECTL" --kubeconfig "$DRAINER_CLUSTER_DIR/pki/$node.kubeconfig" annotate node "$node" \
	"sim.drainer.io/unhealthy-devices=$dev" --overwrite >/dev/null 2>"$e2e_tmp/ann.err"; then
	pass "$node annotated itself sim.drainer.io/unhealthy-devices=$dev"
else
	fail "$node could not annotate itself: $(head -c 300 "$e2e_tmp/ann.err")"
	kubectl annotate node "$node" "sim.drainer.io/unhealthy-devices=$dev" --overwrite >/dev/null
fi
wait_until 60 is_health "$res" "$holder=Unhealthy"
t1=$(date +%s.%N)
check_eq "the API server has $res Unhealthy in $holder's status" "$holder=Unhealthy" "$(health_of "$res")"
echo "  Unhealthy in the pod's status $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after the annotation"
check_eq "every other allocated device stays Healthy" Healthy "$(others_health "$res")"
wait_until 30 bash -c "[ \"\$(kubectl get resourceslices -o json | jq -r '[.items[].spec.devices[] | select(any(.taints[]?; .key == \"gpu.example.com/unhealthy\"))] | length')\" = 1 ]"
check_eq "the slice taints $dev only, NoSchedule" "$dev:NoSchedule" "$(slice_taints)"
check_eq "$holder still runs with the same UID (nothing evicted)" "$holder_uid Running" \
	"$(kubectl -n demo get pod "$holder" -o jsonpath='{.metadata.uid} {.status.phase}' 2>/dev/null)"
has_event() { [ -n "$(health_events "$1")" ]; }
wait_until 20 has_event DrainerDeviceUnhealthy
echo "  the Event DrainerDeviceUnhealthy in the API server $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after the annotation (at most; polled)"
unhealthy_msg=$(health_events DrainerDeviceUnhealthy)
echo "  Event: ${unhealthy_msg:0:400}"
check_eq "serve: one Warning Event DrainerDeviceUnhealthy on $node" 1 "$(grep -c . <<<"$unhealthy_msg")"
check "... naming $res, the slice's taint and $holder's report" \
	grep -q "device $res is unhealthy: .*taints it gpu.example.com/unhealthy=true:NoSchedule.*pod demo/$holder reports it Unhealthy" <<<"$unhealthy_msg"
check "... and how to take it out of service" grep -qF "drainer drain $node --device $res" <<<"$unhealthy_msg"
check "serve's /metrics: drainer_device_unhealthy for $res is 1" bash -c "[ \"\$(curl -sf http://127.0.0.1:$metrics_port/metrics | grep -F 'drainer_device_unhealthy{node=\"$node\",device=\"$res\"}' | awk '{print \$2}')\" = 1 ]"

# A name that is no device of the node is ignored (the plugin logs it).
kubectl annotate node "$node" "sim.drainer.io/unhealthy-devices=gpu-99, $dev" --overwrite >/dev/null
sleep 3
check_eq "\"gpu-99, $dev\": still $dev only, tainted" "$dev:NoSchedule" "$(slice_taints)"
check_eq "\"gpu-99, $dev\": $res still Unhealthy" "$holder=Unhealthy" "$(health_of "$res")"

kubectl annotate node "$node" sim.drainer.io/unhealthy-devices- >/dev/null
wait_until 60 is_health "$res" "$holder=Healthy"
check_eq "annotation removed: $res Healthy again" "$holder=Healthy" "$(health_of "$res")"
wait_until 30 bash -c "[ -z \"\$(kubectl get resourceslices -o json | jq -r '[.items[].spec.devices[] | select(any(.taints[]?; .key == \"gpu.example.com/unhealthy\"))] | .[].name')\" ]"
check_eq "annotation removed: no device of $node's slice is tainted" "" "$(slice_taints)"
wait_until 20 has_event DrainerDeviceHealthy
check "serve: a Normal Event DrainerDeviceHealthy names $res" grep -q "device $res is no longer reported unhealthy" <<<"$(health_events DrainerDeviceHealthy)"
check_eq "... and no second DrainerDeviceUnhealthy" 1 "$(health_events DrainerDeviceUnhealthy | grep -c .)"
check "serve's /metrics: no drainer_device_unhealthy for $res any more" bash -c "! curl -sf http://127.0.0.1:$metrics_port/metrics | grep -qF 'drainer_device_unhealthy{node=\"$node\",device=\"$res\"}'"
check "serve's /metrics: drainer_device_health_changes_total counted both" bash -c "curl -sf http://127.0.0.1:$metrics_port/metrics | grep -qx 'drainer_device_health_changes_total{health=\"unhealthy\"} 1' && curl -sf http://127.0.0.1:$metrics_port/metrics | grep -qx 'drainer_device_health_changes_total{health=\"healthy\"} 1'"
serve_stop h
check_eq "serve exits 0 on SIGTERM" 0 "$serve_rc"
if audit_log_present; then
	audit_since "$serve_line" "$e2e_tmp/serve-audit.json"
	check_eq "audit log: drainer's writes while it watched were Events only (no eviction, no delete, no patch)" "" \
		"$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and (.verb | IN("get", "list", "watch") | not) and .objectRef.resource != "events") | "\(.verb) \(.requestURI)"] | unique | join(", ")' "$e2e_tmp/serve-audit.json")"
	check "audit log: drainer watched node-1's ResourceSlices and pods" bash -c "jq -e '[.[] | select((.userAgent | startswith(\"drainer/\")) and .verb == \"watch\") | .objectRef.resource] | (index(\"resourceslices\") != null and index(\"pods\") != null)' '$e2e_tmp/serve-audit.json' >/dev/null"
fi
serve_log h 15 "device|error|warn"

# ---- --on-unhealthy-device=drain-device ----
if ! kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null | grep -qx devicetaintrules.resource.k8s.io; then
	echo "  the API server serves no DeviceTaintRule: --on-unhealthy-device=drain-device is not exercised here"
	finish
	exit
fi
lease_ns=e2e-health
jq_ok() { jq -e "$@" >/dev/null; }
cleanup_drain_device() {
	kubectl annotate node "$node" sim.drainer.io/unhealthy-devices- >/dev/null 2>&1
	kubectl get devicetaintrules -o name 2>/dev/null | grep "/$(rule_prefix "$node")" | xargs -r kubectl delete >/dev/null 2>&1
	kubectl delete namespace "$lease_ns" --ignore-not-found --wait=false >/dev/null 2>&1
	reset_node "$node"
}
e2e_cleanup_hooks+=(cleanup_drain_device)
ns_settled "$lease_ns"
kubectl create namespace "$lease_ns" >/dev/null
demo || { fail "demo workload"; finish; exit 1; }
wait_until 60 is_health "$res" "$holder=Healthy"
pods_on_node "$node" "$e2e_tmp/pods-before.json"
others_before=$(jq -r --arg h "$holder" '[.items[] | select(.metadata.name != $h and .metadata.deletionTimestamp == null) | "\(.metadata.namespace)/\(.metadata.name)=\(.metadata.uid)"] | sort | join(" ")' "$e2e_tmp/pods-before.json")
driver=$(driver_pod "$node")
serve_t0=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 1
drain_line=$(audit_lines)
serve_start d serve --node "$node" --max-parallel 1 --lease-namespace "$lease_ns" --on-unhealthy-device=drain-device \
	--metrics-addr "127.0.0.1:$metrics_port" --timeout 120s
e2e_cleanup_hooks+=("serve_stop d KILL")
check "serve --on-unhealthy-device=drain-device is up" wait_until 20 curl -sf "http://127.0.0.1:$metrics_port/readyz"
scope_drained() { kubectl get node "$node" -o json | jq -e '[.metadata.annotations // {} | to_entries[] | select((.key | startswith("drainer.io/state.device.")) and .value == "drained")] | length == 1' >/dev/null; }
kubectl annotate node "$node" "sim.drainer.io/unhealthy-devices=$dev" --overwrite >/dev/null
t0=$(date +%s.%N)
check "the device drain of $res reaches drained" wait_until 90 scope_drained
t1=$(date +%s.%N)
echo "  drained $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after the device was marked unhealthy"
check_eq "$holder is gone (evicted)" "" "$(kubectl -n demo get pod "$holder" -o jsonpath='{.metadata.uid}' 2>/dev/null | grep -x "$holder_uid" || true)"
check_eq "$node is schedulable throughout the end" false "$(node_unschedulable "$node")"
pods_on_node "$node" "$e2e_tmp/pods-after.json"
others_after=$(jq -r '.items[] | select(.metadata.deletionTimestamp == null) | "\(.metadata.namespace)/\(.metadata.name)=\(.metadata.uid)"' "$e2e_tmp/pods-after.json" | sort)
check_eq "every other pod on $node runs with the same UID (the driver $driver too)" "" \
	"$(comm -23 <(tr ' ' '\n' <<<"$others_before" | sort) <(echo "$others_after") | tr '\n' ' ')"
rules=$(kubectl get devicetaintrules -o json | jq -c --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p)) | {effect: .spec.taint.effect, sel: .spec.deviceSelector}]')
check_eq "one DeviceTaintRule of $node: NoSchedule, selecting exactly $res" \
	"[{\"effect\":\"NoSchedule\",\"sel\":{\"device\":\"${res##*/}\",\"driver\":\"gpu.example.com\",\"pool\":\"$node\"}}]" "$rules"
check "the slot Lease was released (no holder)" bash -c "[ -z \"\$(kubectl -n $lease_ns get leases -o json | jq -r '[.items[] | select(.spec.holderIdentity != null)] | .[].metadata.name')\" ]"
if audit_log_present; then
	audit_since "$drain_line" "$e2e_tmp/drain-audit.json"
	check_eq "audit log: drainer evicted exactly $holder (Eviction API), deleted no pod" "demo/$holder" \
		"$(jq -r '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods" and .verb == "create" and .objectRef.subresource == "eviction" and .stage == "ResponseComplete") | "\(.objectRef.namespace)/\(.objectRef.name)"] | unique | join(" ")' "$e2e_tmp/drain-audit.json")"
	check_eq "audit log: no pod DELETE from drainer" 0 "$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods" and .verb == "delete")] | length' "$e2e_tmp/drain-audit.json")"
	check "audit log: the slot Lease was taken before the rule, the rule created before the first eviction" jq_ok '
		[.[] | select(.userAgent | startswith("drainer/")) | select(.stage == "ResponseComplete")] as $d
		| ([$d[] | select(.objectRef.resource == "leases" and (.verb | IN("create", "update")))][0].requestReceivedTimestamp) as $l
		| ([$d[] | select(.objectRef.resource == "devicetaintrules" and .verb == "create")][0].requestReceivedTimestamp) as $r
		| ([$d[] | select(.objectRef.subresource == "eviction")][0].requestReceivedTimestamp) as $e
		| $l != null and $r != null and $e != null and $l <= $r and $r <= $e' "$e2e_tmp/drain-audit.json"
	check_eq "audit log: no write of node-1's spec (never cordoned)" 0 "$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "nodes" and (.verb | IN("patch", "update")) and ((.requestObject.spec // {}) | has("unschedulable")))] | length' "$e2e_tmp/drain-audit.json")"
fi
check "an Event DrainerDeviceUnhealthy says drainer drains it" grep -q "drainer drains it (--on-unhealthy-device=drain-device)" <<<"$(health_events DrainerDeviceUnhealthy)"
node_events "$node" "$e2e_tmp/ev2.json"
check "an Event DrainerDone on $node" jq_ok --arg t "$serve_t0" '[.[] | select(.reason == "DrainerDone" and .t >= $t)] | length >= 1' "$e2e_tmp/ev2.json"

# Healthy again: the device stays out of service, the rule stays.
kubectl annotate node "$node" sim.drainer.io/unhealthy-devices- >/dev/null
wait_until 20 has_event DrainerDeviceHealthy
check "healthy again: the Event says the drain stays until uncordon --device" grep -q "a drain of it stays until" <<<"$(health_events DrainerDeviceHealthy | tail -n 1)"
sleep 2
check_eq "... the DeviceTaintRule is still there" 1 "$(kubectl get devicetaintrules -o json | jq --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] | length')"
check "... and the Node still records the device drained" scope_drained
serve_stop d
check_eq "serve exits 0 on SIGTERM" 0 "$serve_rc"
serve_log d 12 "device|error|warn"
drainer_run undo uncordon "$node" --device "$res"
check_rc "drainer uncordon $node --device $res" 0 undo
check_eq "the rule is gone" 0 "$(kubectl get devicetaintrules -o json | jq --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] | length')"
check_eq "no drainer.io/ annotation left on $node" "{}" "$(node_drainer_anns "$node")"
finish
