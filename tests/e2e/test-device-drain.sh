#!/usr/bin/env bash
# --device DRIVER/POOL/DEVICE: one device of node-1 out of service, on real nodes.
# node-1 runs the demo: two gpu-inference pods with a GPU each, two shared-workers pods
# sharing one GPU, web, batch-helper, a mirror pod and the DRA driver. drain node-1
# --device (the GPU of ONE gpu-inference pod) must, from the API server's record: create
# one NoSchedule DeviceTaintRule selecting exactly that device, before the first
# eviction; evict (Eviction API, a PodDisruptionBudget respected, never a DELETE) exactly
# the pod whose claim holds it; leave the node schedulable and every other pod, the
# driver's too, running with the same UID; end once no claim holds the device; keep
# its state under drainer.io/KEY.device.ID. A kill mid-drain (held by a budget) resumes.
# While the rule is there no claim is allocated the device (the evicted pod's
# replacement gets another GPU). A node drain and an overlapping device drain are
# refused (exit 4, nothing written to the Node); a device the node does not publish is
# refused (exit 4), bad usage is exit 2, all before any write. uncordon --device deletes
# the rule and the record. plan --device shows the None-effect preview (the device taint
# eviction controller's count of the pods a NoExecute taint would evict; its rule made
# and deleted). Where no DeviceTaintRule is served (1.34): drain and plan exit 11,
# nothing written.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

delete_node_events "$node"
cleanup_device_drain() {
	kubectl -n demo delete pdb e2e-device-hold --ignore-not-found >/dev/null 2>&1
	kubectl get devicetaintrules -o name 2>/dev/null | grep "/$(rule_prefix "$node")" | xargs -r kubectl delete >/dev/null 2>&1
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_device_drain)

# Bad usage: exit 2, nothing sent.
bad_start=$(audit_lines)
for args in "drain $node --device foo" "drain $node --device gpu.example.com/$node/gpu-0 --driver gpu.example.com" \
	"drain -l kubernetes.io/hostname=$node --device gpu.example.com/$node/gpu-0" "serve --device gpu.example.com/$node/gpu-0" \
	"drain $node --device gpu.example.com/$node/gpu-0 --device gpu.example.com/$node/gpu-0" \
	"maintain $node --device gpu.example.com/$node/gpu-0 -- true"; do
	# shellcheck disable=SC2086
	"$DRAINER" $args >/dev/null 2>"$e2e_tmp/bad.err"
	check_eq "drainer $args: bad usage" 2 $?
done
audit_window "$bad_start" "$e2e_tmp/audit-bad.json"
check_eq "bad usage sent nothing" 0 "$(jq '[.[] | select(.userAgent | startswith("drainer/"))] | length' "$e2e_tmp/audit-bad.json" 2>/dev/null || echo 0)"

served=$(kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null)
if ! grep -qx devicetaintrules.resource.k8s.io <<<"$served"; then
	echo "  the API server serves no DeviceTaintRule: a device drain must be refused (exit 11)"
	drainer_run unsup drain "$node" --device "gpu.example.com/$node/gpu-0" -o json --timeout 30s
	check_rc "drain --device without DeviceTaintRules" 11 unsup
	check_eq "the summary says unsupported" unsupported "$(jq -r .error "$e2e_tmp/unsup.out")"
	audit_window "$run_start" "$e2e_tmp/audit-unsup.json"
	check_eq "it wrote nothing (an Event of the refusal aside)" "" "$(drainer_writes "$e2e_tmp/audit-unsup.json" except-events | grep -v '^(no request' || true)"
	check_eq "the node is schedulable" false "$(node_unschedulable "$node")"
	check_eq "no drainer.io/ annotation on the Node" "{}" "$(node_drainer_anns "$node")"
	drainer_run unsupplan plan "$node" --device "gpu.example.com/$node/gpu-0"
	check_rc "plan --device without DeviceTaintRules" 11 unsupplan
	check "the plan says why" grep -q "serves no DeviceTaintRule" "$e2e_tmp/unsupplan.err"
	audit_window "$run_start" "$e2e_tmp/audit-unsupplan.json"
	check_eq "the plan wrote nothing" "" "$(drainer_writes "$e2e_tmp/audit-unsupplan.json" | grep -v '^(no request' || true)"
	finish
	exit
fi

demo || { fail "demo workload"; finish; exit 1; }
pods_on_node "$node" "$e2e_tmp/pods.json"
classify_pods "$e2e_tmp/pods.json" >"$e2e_tmp/classes.json"
kubectl -n demo get resourceclaims -o json >"$e2e_tmp/claims-before.json"
# The device: the GPU of the first gpu-inference pod (by name); its holder is that pod.
holder=$(kubectl -n demo get pods -l app=gpu-inference --field-selector "spec.nodeName=$node" -o json |
	jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | sort | first // ""')
claim=$(kubectl -n demo get pod "$holder" -o json | jq -r '.status.resourceClaimStatuses[0].resourceClaimName // ""')
dev=$(jq -r --arg c "$claim" '.items[] | select(.metadata.name == $c) | .status.allocation.devices.results[0] | "\(.driver)/\(.pool)/\(.device)"' "$e2e_tmp/claims-before.json")
echo "  device $dev, held by claim demo/$claim of pod demo/$holder"
found=no
[ -n "$holder" ] && [ -n "$claim" ] && [[ $dev == */*/* ]] && found=yes
check_eq "the device is allocated to one claim of one pod" yes "$found"
check_eq "no other claim holds $dev" 1 "$(jq --arg d "$dev" '[.items[] | select(any(.status.allocation.devices.results[]?; "\(.driver)/\(.pool)/\(.device)" == $d))] | length' "$e2e_tmp/claims-before.json")"
driver=$(driver_pod "$node")
check "a driver pod runs on $node ($driver)" [ -n "$driver" ]

# A device the node does not publish: refused, nothing written.
drainer_run unknown drain "$node" --device "gpu.example.com/$node/gpu-99" -o json --timeout 30s
check_rc "drain --device of a device $node does not publish" 4 unknown
check_eq "the refusal names it" true "$(jq -r '.message | test("publishes no such device")' "$e2e_tmp/unknown.out")"
audit_window "$run_start" "$e2e_tmp/audit-unknown.json"
check_eq "the refused drain wrote nothing" "" "$(drainer_writes "$e2e_tmp/audit-unknown.json" except-events | grep -v '^(no request' || true)"

# The plan: exactly the holder, the rule.
drainer_run plan plan "$node" --device "$dev" -o json
check_rc "plan --device" 0 plan
check_eq "the plan evicts exactly the holder" "demo/$holder" \
	"$(jq -r '[.groups[] | .pods[] | "\(.namespace)/\(.name)"] | join(",")' "$e2e_tmp/plan.out")"
check_eq "the plan's isolation" deviceTaintRule "$(jq -r .scope.isolation "$e2e_tmp/plan.out")"
# The None-effect preview: the device taint eviction controller's count of what a
# NoExecute taint would evict, beside the claims-based list; its rule made and deleted.
check_eq "the None preview was asked, without a note" "true null" "$(jq -r '"\(.noneEffectPreview.asked) \(.noneEffectPreview.note)"' "$e2e_tmp/plan.out")"
check_eq "the controller says a NoExecute taint of $dev would evict 1 pod in 1 namespace" "$dev 1 1 1" \
	"$(jq -r '.noneEffectPreview.devices[0] | "\(.device) \(.pods) \(.namespaces) \(.allocatedDevices)"' "$e2e_tmp/plan.out")"
audit_window "$run_start" "$e2e_tmp/audit-plan.json"
jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules")] as $r
	| ([$r[] | select(.verb == "create" and .responseStatus.code == 201)]) as $c
	| ([$r[] | select(.verb == "delete" and .responseStatus.code == 200)]) as $d
	| if ($c | length) != 1 then "FAIL the plan created \($c | length) rules"
	  elif ($d | length) != 1 or $d[0].objectRef.name != $c[0].objectRef.name then "FAIL the preview rule \($c[0].objectRef.name) was not deleted once"
	  else "ok the plan made one preview rule and deleted it (\($c[0].objectRef.name))" end' "$e2e_tmp/audit-plan.json"
check_eq "no rule of $node is left after the plan" 0 "$(kubectl get devicetaintrules -o json | jq --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] | length')"

# Every version of the Node while the device is out: never unschedulable.
kubectl get node "$node" --watch -o jsonpath='{.metadata.resourceVersion}|{.spec.unschedulable}{"\n"}' \
	>"$e2e_tmp/node-watch.txt" 2>/dev/null &
watch_pid=$!
track_pid "$watch_pid"
e2e_cleanup_hooks+=("reap_pid $watch_pid")

# A budget holds the holder (gpu-inference, maxUnavailable 0): the drain waits in
# evict-claim-holders, retrying; it is killed there, the budget goes, a rerun resumes.
pdb demo e2e-device-hold gpu-inference maxUnavailable 0 | kubectl apply -f - >/dev/null
check "PDB e2e-device-hold allows 0 disruptions" wait_until 30 \
	bash -c "[ \"\$(kubectl -n demo get pdb e2e-device-hold -o jsonpath='{.status.disruptionsAllowed}/{.status.currentHealthy}')\" = 0/2 ]"
device_state() { kubectl get node "$node" -o json | jq -r '.metadata.annotations // {} | to_entries[] | select(.key | startswith("drainer.io/state.device.")) | .value' | head -n 1; }
killed_start=$(audit_lines)
echo "  \$ drainer drain $node --device $dev (killed once held by the budget)"
"$DRAINER" drain "$node" --device "$dev" -o json --timeout 80s >"$e2e_tmp/killed.out" 2>"$e2e_tmp/killed.err" &
drain_pid=$!
track_pid "$drain_pid"
held_by_budget() {
	[ "$(device_state)" = evict-claim-holders ] &&
		tail -n +"$((killed_start + 1))" "$AUDIT" | grep '"userAgent":"drainer/' | grep '"subresource":"eviction"' | grep -q '"code":429'
}
check "the drain is held by the budget in evict-claim-holders (an eviction answered 429)" wait_until 40 held_by_budget
reap_pid "$drain_pid" KILL
check_eq "after the kill the Node records the device drain" evict-claim-holders "$(device_state)"
check_eq "the holder still runs (the budget was respected)" Running "$(kubectl -n demo get pod "$holder" -o jsonpath='{.status.phase}')"
kubectl -n demo delete pdb e2e-device-hold >/dev/null

drainer_run drain drain "$node" --device "$dev" -o json --timeout 80s
check_rc "drain --device resumed after the kill" 0 drain
drain_secs=$run_secs
audit_window "$killed_start" "$e2e_tmp/audit.json"
cp "$e2e_tmp/drain.out" "$e2e_tmp/summary.json"

# From the API server's record: exactly the holder evicted, by the Eviction API only;
# the rule created (once: a rerun's 409 is read back) before the first eviction.
jq_checks --arg h "demo/$holder" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods")] as $p
	| ([$p[] | select(.verb == "create" and .objectRef.subresource == "eviction") | key] | unique) as $ev
	| ([$p[] | select(.verb == "delete")] | length) as $del
	| if $ev != [$h] then "FAIL evictions of \($ev), expected only \($h)"
	  elif $del > 0 then "FAIL drainer sent \($del) pod DELETEs"
	  else "ok drainer evicted exactly \($h), by the Eviction API only (no pod DELETE)" end' "$e2e_tmp/audit.json"
jq_checks '
	[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules" and .verb == "create")] as $c
	| ([$c[] | select(.responseStatus.code == 201)] | first) as $made
	| ([.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction")] | first) as $e
	| if $made == null then "FAIL drainer created no DeviceTaintRule"
	  elif ([$c[] | select(.responseStatus.code == 201)] | length) != 1 then "FAIL \([$c[] | select(.responseStatus.code == 201)] | length) rules created"
	  elif $e == null then "FAIL no eviction"
	  elif $made.requestReceivedTimestamp < $e.requestReceivedTimestamp
	  then "ok the DeviceTaintRule was created once (\($made.objectRef.name)), before the first eviction"
	  else "FAIL the first eviction came before the rule" end' "$e2e_tmp/audit.json"
kubectl get devicetaintrules -o json >"$e2e_tmp/rules.json"
jq_checks --arg n "$node" --arg p "$(rule_prefix "$node")" --arg d "$dev" '[.items[] | select(.metadata.name | startswith($p))] as $r
	| if ($r | length) == 1 and "\($r[0].spec.deviceSelector.driver)/\($r[0].spec.deviceSelector.pool)/\($r[0].spec.deviceSelector.device)" == $d
		and $r[0].spec.taint.effect == "NoSchedule" and $r[0].metadata.annotations["drainer.io/node"] == $n
	  then "ok one NoSchedule DeviceTaintRule selecting exactly \($d) (\($r[0].metadata.name))"
	  else "FAIL DeviceTaintRules of \($n): \($r | map({name: .metadata.name, spec}))" end' "$e2e_tmp/rules.json"

# Everything else stayed: same UIDs (the driver pod, the other claim holders, the rest).
pods_on_node "$node" "$e2e_tmp/pods-after.json"
jq_checks --slurpfile before "$e2e_tmp/classes.json" --arg h "$holder" '
	[.items[] | {key: "\(.metadata.namespace)/\(.metadata.name)", value: .metadata.uid}] | from_entries as $now
	| [$before[0][] | select(.name != $h)] as $stay
	| ($stay | map(select($now["\(.ns)/\(.name)"] != .uid)) | map("\(.ns)/\(.name)")) as $gone
	| if ($stay | length) < 5 then "FAIL only \($stay | length) other pods before the drain"
	  elif $gone == [] then "ok every other pod, the DRA driver pod too, runs with the same UID (\($stay | length))"
	  else "FAIL pods changed or gone: \($gone)" end' "$e2e_tmp/pods-after.json"
check_eq "the evicted holder is gone from $node" "" "$(jq -r --arg h "$holder" '.items[] | select(.metadata.name == $h) | .metadata.name' "$e2e_tmp/pods-after.json")"
check_eq "the node is schedulable" false "$(node_unschedulable "$node")"
check_eq "no drain taint on the node" false "$(node_tainted "$node")"
check_eq "no version of the Node during the drain was unschedulable" "" "$(awk -F'|' '$2 == "true"' "$e2e_tmp/node-watch.txt")"
check_eq "the device drain's state" drained "$(device_state)"
check_eq "no node-level drainer.io/state" "" "$(node_ann "$node" drainer.io/state)"

# While the rule is there, no claim gets the device: the holder's replacement (its
# Deployment pins it to node-1) is allocated another GPU.
new_claim_allocated() {
	kubectl -n demo get resourceclaims -o json | jq -e --arg c "$claim" '[.items[] | select(.metadata.name != $c
		and (.metadata.name | startswith("gpu-inference-")) and .status.allocation != null)] | length >= 2' >/dev/null
}
check "the replacement's claim is allocated" wait_until 60 new_claim_allocated
kubectl get resourceclaims -A -o json >"$e2e_tmp/claims-after.json"
check_eq "no claim holds $dev while it is tainted" 0 \
	"$(jq --arg d "$dev" '[.items[] | select(any(.status.allocation.devices.results[]?; "\(.driver)/\(.pool)/\(.device)" == $d))] | length' "$e2e_tmp/claims-after.json")"
echo "  claims now: $(jq -r '[.items[] | "\(.metadata.name)=\([.status.allocation.devices.results[]? | .device] | join("+"))"] | join(" ")' "$e2e_tmp/claims-after.json")"

# Events, status, -o json.
node_events "$node" "$e2e_tmp/events.json"
check_eq "a DrainerDone Event says the device is out of service" true \
	"$(jq --arg d "$dev" 'any(.[]; .reason == "DrainerDone" and (.message | contains("device \($d) of node node-1 is out of service")))' "$e2e_tmp/events.json")"
"$DRAINER" status "$node" -o json >"$e2e_tmp/status.json" 2>"$e2e_tmp/status.err"
check_eq "status shows the device out of service" "$dev drained" \
	"$(jq -r '.node.devicesOutOfService // [] | map("\(.devices) \(.state)") | join(",")' "$e2e_tmp/status.json")"
check_eq "status lists no driver out of service" 0 "$(jq '.node.driversOutOfService | length' "$e2e_tmp/status.json")"
check_eq "the summary: one pod evicted, one claim waited for" "1 1 deviceTaintRule" \
	"$(jq -r '"\(.podsEvicted) \(.claimsWaitedFor) \(.scope.isolation // "deviceTaintRule")"' "$e2e_tmp/summary.json")"

# Overlaps: refused, nothing written to the Node.
other=$(jq -r --arg d "$dev" '[.items[] | .status.allocation.devices.results[]? | "\(.driver)/\(.pool)/\(.device)" | select(. != $d)] | first' "$e2e_tmp/claims-after.json")
for args in "drain $node" "drain $node --device $dev --device $other" "drain $node --driver gpu.example.com --driver-stop none"; do
	# shellcheck disable=SC2086
	drainer_run overlap $args -o json --timeout 30s
	check_rc "drainer $args while $dev is out: refused" 4 overlap
	audit_window "$run_start" "$e2e_tmp/audit-overlap.json"
	check_eq "... and it wrote nothing to the Node" "" \
		"$(drainer_writes "$e2e_tmp/audit-overlap.json" except-events | grep -v '^(no request' | grep -E 'nodes|devicetaintrules|eviction' || true)"
done

drainer_run uncordon uncordon "$node" --device "$dev" -o json --timeout 60s
check_rc "uncordon $node --device $dev" 0 uncordon
audit_window "$run_start" "$e2e_tmp/audit-up.json"
check_eq "no drainer.io/ annotation left" "{}" "$(node_drainer_anns "$node")"
check_eq "the DeviceTaintRule is gone" 0 "$(kubectl get devicetaintrules -o json | jq --arg p "$(rule_prefix "$node")" '[.items[] | select(.metadata.name | startswith($p))] | length')"
jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules")] as $r
	| ([$r[] | select(.verb == "get")] | first) as $g | ([$r[] | select(.verb == "delete")] | first) as $d
	| if $d == null then "FAIL no DeviceTaintRule delete"
	  elif $g == null or $g.requestReceivedTimestamp > $d.requestReceivedTimestamp then "FAIL the rule was not read back before its delete"
	  else "ok the rule was read back, then deleted (\($d.objectRef.name))" end' "$e2e_tmp/audit-up.json"
check_eq "the node is schedulable" false "$(node_unschedulable "$node")"
check_eq "the driver pod is the same" "$driver" "$(driver_pod "$node")"
reap_pid "$watch_pid"
echo "  figure: device $dev out of service; drain (resumed) ${drain_secs:-?} s, uncordon ${run_secs:-?} s; $(jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length' "$e2e_tmp/pods-after.json") pods stayed on $node"
finish
