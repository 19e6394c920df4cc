#!/usr/bin/env bash
# --driver NAME: a drain of one DRA driver of node-1, on real nodes.
# node-1 runs the demo's claim holders of gpu.example.com and two plain pods.
# drain node-1 --driver gpu.example.com --driver-stop label:gpu.example.com/present
# (the key of the driver DaemonSet's nodeSelector) must, from the API server's record:
# evict exactly the claim holders; never cordon the node where DeviceTaintRules are
# served (one NoSchedule rule for the driver's pool on node-1 exists while the driver
# is out), or cordon it and say so where they are not (the fallback); leave the plain
# pods running with the same UIDs; stop the driver (its DaemonSet controller deletes the
# pod once the label no longer matches) only after the kubelet deleted every
# evicted pod and the resourceclaim controller released every claim of the node; keep
# its state under drainer.io/KEY.gpu.example.com. A node drain meanwhile is refused
# (exit 4, no write to the Node). uncordon node-1 --driver ... brings the driver back
# (Running, Ready, slice published), deletes the rule only after that, and leaves no
# drainer.io/ annotation. Prints the time the driver was out and the pods that stayed.
# Which path runs is what API discovery shows: 1.37 serves DeviceTaintRule (v1) by
# default, 1.36 only with DRAINER_CLUSTER_DEVICE_TAINTS=1 (the gate), 1.34 never (the
# fallback).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
drv=gpu.example.com
stop=label:gpu.example.com/present

delete_node_events "$node"
cleanup_driver_drain() {
	kubectl -n demo delete pod e2e-plain-a e2e-plain-b --wait=false >/dev/null 2>&1
	kubectl get devicetaintrules -o name 2>/dev/null | grep "/$(rule_prefix "$node")" | xargs -r kubectl delete >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_driver_drain)

served=$(kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null)
if grep -qx devicetaintrules.resource.k8s.io <<<"$served"; then
	rules=1
	echo "  the API server serves DeviceTaintRule: the driver's devices get a NoSchedule rule"
else
	rules=0
	echo "  the API server serves no DeviceTaintRule: drainer must cordon the node instead (the fallback)"
fi

# Bad usage: exit 2, nothing sent.
bad_start=$(audit_lines)
for args in "drain $node --driver $drv --driver-stop taint" "serve --driver $drv" \
	"plan $node --driver Bad_Name --driver-stop none" "uncordon $node --driver $drv --driver $drv --driver-stop none"; do
	# shellcheck disable=SC2086
	"$DRAINER" $args >/dev/null 2>"$e2e_tmp/bad.err"
	check_eq "drainer $args: bad usage" 2 $?
done
audit_window "$bad_start" "$e2e_tmp/audit-bad.json"
check_eq "bad usage sent nothing" 0 "$(jq '[.[] | select(.userAgent | startswith("drainer/"))] | length' "$e2e_tmp/audit-bad.json" 2>/dev/null || echo 0)"

demo || { fail "demo workload"; finish; exit 1; }
plain_pods "$node" e2e-plain-a e2e-plain-b
plain_running() {
	[ "$(kubectl -n demo get pods -l app=e2e-plain --field-selector spec.nodeName=$node -o json |
		jq '[.items[] | select(.status.phase == "Running")] | length')" = 2 ]
}
check "two plain pods (no claims) run on $node" wait_until 60 plain_running

pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
claims_on_node "$node" >"$e2e_tmp/claims.json"
echo "  pods: $(jq -r '[.[] | "\(.name)=\(.cls)"] | join(" ")' "$e2e_tmp/classes.json")"
echo "  claims on $node: $(jq -r '[.[].name] | join(" ")' "$e2e_tmp/claims.json")"
check "claim holders of $drv on $node before the drain" [ "$(jq '[.[] | select(.cls | startswith("holder"))] | length' "$e2e_tmp/classes.json")" -ge 1 ]
check "claims on $node before the drain" [ "$(jq length "$e2e_tmp/claims.json")" -ge 1 ]
driver=$(driver_pod "$node")
check "a driver pod runs on $node ($driver)" [ -n "$driver" ]

# The plan says how new claims are kept off the driver's devices.
drainer_run plan plan "$node" --driver "$drv" --driver-stop "$stop" -o json
check_rc "plan --driver" 0 plan
check_eq "the plan's isolation" "$([ "$rules" = 1 ] && echo deviceTaintRule || echo cordon)" \
	"$(jq -r '.scope.isolation' "$e2e_tmp/plan.out")"
check_eq "the plan evicts no pod without claims" 0 \
	"$(jq '[.groups[] | select(.name | startswith("rest")) | .pods[]] | length' "$e2e_tmp/plan.out")"

# Every version of the Node the API server sends while the driver is out (the audit log
# has node patches at level Metadata only): spec.unschedulable and the driver label.
kubectl get node "$node" --watch -o jsonpath='{.metadata.resourceVersion}|{.spec.unschedulable}|{.metadata.labels.gpu\.example\.com/present}{"\n"}' \
	>"$e2e_tmp/node-watch.txt" 2>/dev/null &
watch_pid=$!
track_pid "$watch_pid"
e2e_cleanup_hooks+=("reap_pid $watch_pid")
sleep 0.5
drainer_run drain drain "$node" --driver "$drv" --driver-stop "$stop" -o json --timeout 80s
check_rc "drain $node --driver $drv" 0 drain
drain_secs=$run_secs
audit_window "$run_start" "$e2e_tmp/audit.json"
cp "$e2e_tmp/drain.out" "$e2e_tmp/summary.json"

# Exactly the claim holders were evicted; the plain pods stayed, same UIDs.
jq_checks --slurpfile pods "$e2e_tmp/classes.json" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods"
		and ((.verb == "create" and .objectRef.subresource == "eviction") or .verb == "delete")) | key] | unique as $ev
	| [$pods[0][] | select(.cls | startswith("holder")) | "\(.ns)/\(.name)"] | unique as $h
	| if $ev == $h then "ok evicted exactly the claim holders (\($h | join(", ")))"
	  else "FAIL evicted \($ev) but the claim holders are \($h)" end' "$e2e_tmp/audit.json"
pods_on_node "$node" "$e2e_tmp/pods-after.json"
jq_checks --slurpfile before "$e2e_tmp/classes.json" '
	[.items[] | {key: "\(.metadata.namespace)/\(.metadata.name)", value: .metadata.uid}] | from_entries as $now
	| [$before[0][] | select(.cls | IN("rest", "rest-critical", "ds", "mirror"))] as $stay
	| ($stay | map(select($now["\(.ns)/\(.name)"] != .uid)) | map("\(.ns)/\(.name)")) as $gone
	| if ($stay | length) == 0 then "FAIL no pod without claims before the drain: nothing to check"
	  elif $gone == [] then "ok every pod without claims still runs with the same UID (\($stay | length))"
	  else "FAIL pods without claims changed or gone: \($gone)" end' "$e2e_tmp/pods-after.json"
echo "  pods that stayed: $(jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | join(" ")' "$e2e_tmp/pods-after.json")"

# How new claims were kept off the driver's devices.
if [ "$rules" = 1 ]; then
	check_eq "the node was never cordoned" false "$(node_unschedulable "$node")"
	check_eq "no drain taint on the node" false "$(node_tainted "$node")"
	check "the Node was seen paused (label drainer-paused) while the driver was out" grep -q '|drainer-paused$' "$e2e_tmp/node-watch.txt"
	check_eq "no version of the Node during the drain was unschedulable" "" "$(awk -F'|' '$2 == "true"' "$e2e_tmp/node-watch.txt")"
	kubectl get devicetaintrules -o json >"$e2e_tmp/rules.json"
	jq_checks --arg n "$node" --arg d "$drv" --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] as $r
		| if ($r | length) == 1 and $r[0].spec.deviceSelector.driver == $d and $r[0].spec.deviceSelector.pool == $n
			and $r[0].spec.taint.effect == "NoSchedule"
		  then "ok one NoSchedule DeviceTaintRule for \($d) pool \($n) while the driver is out (\($r[0].metadata.name))"
		  else "FAIL DeviceTaintRules of \($n): \($r | map({name: .metadata.name, spec}))" end' "$e2e_tmp/rules.json"
	check_eq "the summary says deviceTaintRule" deviceTaintRule "$(jq -r '.scope.isolation' "$e2e_tmp/summary.json")"
else
	check_eq "fallback: the node is cordoned" true "$(node_unschedulable "$node")"
	check_eq "the summary says the cordon fallback" cordon "$(jq -r '.scope.isolation' "$e2e_tmp/summary.json")"
fi

# The driver's stop (its DaemonSet controller deleting the pod once the label no longer
# matches) only after every evicted pod is gone and every claim released.
jq_checks --slurpfile claims "$e2e_tmp/claims.json" --slurpfile pods "$e2e_tmp/classes.json" --arg node "$node" --arg drvpod "${driver#*/}" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	([.[] | select(.objectRef.resource == "pods" and .verb == "delete" and .objectRef.name == $drvpod
		and .user.username == "system:kube-controller-manager")] | first) as $l
	| ([$claims[0][] | "\(.ns)/\(.name)"]) as $ck
	| [$pods[0][] | select(.cls | startswith("holder")) | "\(.ns)/\(.name)"] as $holders
	| [.[] | select((.user.username | test("^(drainer-sim|system:node:.+)$")) and .verb == "delete" and .objectRef.resource == "pods"
		and (key as $k | $holders | index($k)))] as $kdel
	| [.[] | select(.user.username == "system:kube-controller-manager" and .objectRef.resource == "resourceclaims"
		and (.verb | IN("update", "patch", "delete")) and (key as $k | $ck | index($k)))] as $writes
	# a release: a claim update (reservation dropped, deallocated), or the DELETE of a claim
	# with no update before it; the DELETE of a claim already deallocated is its cleanup
	| [$writes[] | . as $w | select(.verb != "delete"
		or ([$writes[] | select(key == ($w | key) and .verb != "delete" and .requestReceivedTimestamp < $w.requestReceivedTimestamp)] | length) == 0)] as $rel
	| if $l == null then "FAIL the DaemonSet controller never deleted driver pod \($drvpod) in the audit window"
	  elif ($kdel | length) == 0 then "FAIL no kubelet DELETE of an evicted pod in the window"
	  elif ($rel | length) == 0 then "FAIL no release of a claim by the resourceclaim controller in the window"
	  elif ([$kdel[], $rel[] | select(.requestReceivedTimestamp > $l.requestReceivedTimestamp)] | length) == 0
	  then "ok the driver pod was stopped after the kubelet deleted the \($kdel | length) evicted pods and the \($rel | length) claim releases"
	  else "FAIL the driver pod was stopped before a pod deletion or claim release" end' "$e2e_tmp/audit.json"
check "the driver pod is gone" wait_until 60 no_driver_pod "$node"
check_eq "the driver's state is under its own key" drained "$(node_ann "$node" "drainer.io/state.$drv")"
check_eq "no node-level drainer.io/state" "" "$(node_ann "$node" drainer.io/state)"
check "no claim of $drv left on $node" no_claims_on_node "$node"

# Events as for a node drain: DrainerDone naming the driver.
node_events "$node" "$e2e_tmp/events.json"
check "a DrainerDone Event says the driver is out of service" \
	jq -e 'any(.[]; .reason == "DrainerDone" and (.message | test("DRA driver gpu.example.com of node node-1 is out of service")))' "$e2e_tmp/events.json"

# status shows the driver out of service.
"$DRAINER" status "$node" -o json >"$e2e_tmp/status.json" 2>"$e2e_tmp/status.err"
check_eq "status shows $drv out of service" "$drv drained" \
	"$(jq -r '.node.driversOutOfService // [] | map("\(.driver) \(.state)") | join(",")' "$e2e_tmp/status.json")"

# A node drain of the same node meanwhile: refused, nothing written to the Node.
drainer_run nodedrain drain "$node" -o json --timeout 30s
check_rc "a node drain while the driver is out is refused" 4 nodedrain
audit_window "$run_start" "$e2e_tmp/audit-node.json"
check_eq "the refusal names the driver drain" true \
	"$(jq -r '.message | test("DRA driver gpu.example.com of node node-1 is out of service")' "$e2e_tmp/nodedrain.out")"
check_eq "the refused node drain wrote nothing to the Node" "" \
	"$(drainer_writes "$e2e_tmp/audit-node.json" except-events | grep -v '^(no request' | grep nodes || true)"

# Meanwhile the evicted holders' controllers made new pods: none got a claim on node-1.
kubectl -n demo get pods -o json >"$e2e_tmp/demo-pods.json"
echo "  replacement claim holders: $(jq -r '[.items[] | select(.metadata.deletionTimestamp == null and (.spec.resourceClaims // [] | length) > 0)
	| "\(.metadata.name)@\(.spec.nodeName // "pending")"] | join(" ")' "$e2e_tmp/demo-pods.json")"
check "no claim allocated or reserved on $node while $drv is out" no_claims_on_node "$node"
check_eq "no claim-holding pod bound to $node while $drv is out" 0 \
	"$(jq --arg n "$node" '[.items[] | select(.spec.nodeName == $n and (.spec.resourceClaims // [] | length) > 0 and .metadata.deletionTimestamp == null)] | length' "$e2e_tmp/demo-pods.json")"

drainer_run uncordon uncordon "$node" --driver "$drv" --driver-stop "$stop" -o json --timeout 80s
check_rc "uncordon $node --driver $drv" 0 uncordon
audit_window "$run_start" "$e2e_tmp/audit-up.json"
check "the driver pod is Running and Ready again" driver_running "$node"
check "its ResourceSlice is published" slice_published "$node"
check_eq "no drainer.io/ annotation left" "{}" "$(node_drainer_anns "$node")"
check_eq "the driver label is back" true "$(kubectl get node "$node" -o json | jq -r '.metadata.labels["gpu.example.com/present"]')"
check_eq "the node is schedulable" false "$(node_unschedulable "$node")"
if [ "$rules" = 1 ]; then
	check_eq "the DeviceTaintRule is gone" 0 "$(kubectl get devicetaintrules -o json | jq --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] | length')"
	# the rule went only after the driver was back: not before its new pod's Ready
	# condition turned True (the API server's lastTransitionTime, whole seconds)
	ready_at=$(driver_pods_json "$node" | jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .status.conditions[]
		| select(.type == "Ready" and .status == "True") | .lastTransitionTime] | first // ""')
	jq_checks --arg ready "$ready_at" '
		([.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules" and .verb == "delete")] | first) as $d
		| if $d == null then "FAIL drainer deleted no DeviceTaintRule"
		  elif $ready == "" then "FAIL the new driver pod has no Ready condition"
		  elif ($d.requestReceivedTimestamp | sub("\\.[0-9]+Z$"; "Z")) >= $ready
		  then "ok the DeviceTaintRule was deleted (\($d.requestReceivedTimestamp)) once the new driver pod was Ready (\($ready))"
		  else "FAIL the DeviceTaintRule was deleted (\($d.requestReceivedTimestamp)) before the new driver pod was Ready (\($ready))" end' "$e2e_tmp/audit-up.json"
fi
reap_pid "$watch_pid"
check_eq "no version of the Node during drain and uncordon was unschedulable ($([ "$rules" = 1 ] && echo rules || echo fallback: expected))" \
	"$([ "$rules" = 1 ] && echo 0 || echo yes)" \
	"$(if [ "$rules" = 1 ]; then awk -F'|' '$2 == "true"' "$e2e_tmp/node-watch.txt" | wc -l; else grep -q '|true|' "$e2e_tmp/node-watch.txt" && echo yes; fi)"

# The figure: how long the driver was out of service, from its DaemonSet controller's
# DELETE of the driver pod to drainer's last write of the uncordon (the rule deleted or
# the node uncordoned, the record cleared).
out=$(jq -rs --arg drvpod "${driver#*/}" 'def t: .requestReceivedTimestamp | sub("\\.[0-9]+Z$"; "Z") | fromdate;
	([.[0][] | select(.objectRef.resource == "pods" and .verb == "delete" and .objectRef.name == $drvpod)] | first) as $a
	| ([.[1][] | select((.userAgent | startswith("drainer/")) and (.verb | IN("patch", "delete")))] | last) as $b
	| if $a and $b then ($b | t) - ($a | t) else "?" end' "$e2e_tmp/audit.json" "$e2e_tmp/audit-up.json")
echo "  figure: driver $drv out of service on $node for ~${out} s (drain ${drain_secs} s, uncordon ${run_secs} s); $(jq -r '[.items[] | select(.metadata.deletionTimestamp == null)] | length' "$e2e_tmp/pods-after.json") pods stayed running"
finish
