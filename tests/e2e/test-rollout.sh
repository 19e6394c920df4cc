#!/usr/bin/env bash
# drainer rollout NAMESPACE/DAEMONSET: the test driver gpu.example.com
# rolled out to a new revision across the 3 real nodes, 1 at a time, with a claim-holding
# Deployment (3 replicas spread over the nodes, PodDisruptionBudget minAvailable 2) that
# keeps replicas running throughout. From the API server's record (audit log, and watches
# of the ResourceClaims and the driver pods, ordered by resourceVersion):
# - a RollingUpdate DaemonSet is refused (exit 4, the message says how to set OnDelete),
#   nothing written; with OnDelete and no change every node is skipped, nothing written;
# - after the template changes (an env var), every driver pod of the old revision is
#   replaced by one of the update revision, Ready, its ResourceSlice back;
# - no driver pod was deleted while a claim allocated on its node existed (the claims'
#   versions before the pod's deletion, by resourceVersion);
# - never more than one node out at a time (one DeviceTaintRule of drainer at a time);
# - a replica of the workload ran throughout; pods without claims kept their UIDs;
# - a SIGKILL of the rollout mid-way and a rerun that resumes (the nodes done before are
#   skipped, the interrupted one finishes);
# - at the end no DeviceTaintRule of drainer, no drainer.io/ key on any node.
# Figures: each node's driver out of service, the pods that stayed running, against a
# whole-node drain of the same node. The driver goes back to its original template with
# a second rollout, and its updateStrategy back to what it was: the cluster is left as
# it was found.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
drv=gpu.example.com
ds_ns=dra-system
ds=dra-driver
ns=e2e-rollout
lease_ns=e2e-rollout-leases
nodes="node-1 node-2 node-3"
ro_timeout=${E2E_ROLLOUT_TIMEOUT:-150s}

kubectl -n $ds_ns get ds $ds -o json >"$e2e_tmp/ds-orig.json" || { fail "no DaemonSet $ds_ns/$ds"; finish; exit 1; }
orig_strategy=$(jq -c '.spec.updateStrategy' "$e2e_tmp/ds-orig.json")
orig_env=$(jq -c '.spec.template.spec.containers[0].env' "$e2e_tmp/ds-orig.json")
orig_args=$(jq -c '.spec.template.spec.containers[0].args' "$e2e_tmp/ds-orig.json")

ds_patch() { kubectl -n $ds_ns patch ds $ds --type merge -p "$1" >/dev/null; }
ds_observed() {
	[ "$(kubectl -n $ds_ns get ds $ds -o json | jq '.status.observedGeneration == .metadata.generation')" = true ]
}
# The hash of the DaemonSet's update revision (its newest ControllerRevision).
update_hash() {
	local uid
	uid=$(kubectl -n $ds_ns get ds $ds -o jsonpath='{.metadata.uid}')
	kubectl -n $ds_ns get controllerrevisions -o json | jq -r --arg u "$uid" '[.items[]
		| select(any(.metadata.ownerReferences[]?; .uid == $u and .controller == true))] | max_by(.revision)
		| .metadata.labels["controller-revision-hash"]'
}
# Every node runs one Ready driver pod of revision $1 and no other, its slice published.
all_on() {
	local n
	for n in $nodes; do
		[ "$(driver_pods_json "$n" | jq --arg h "$1" '[.items[] | select(.metadata.deletionTimestamp == null and .metadata.labels["controller-revision-hash"] == $h
			and any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length')" = 1 ] || return 1
		[ "$(driver_count "$n")" = 1 ] && slice_published "$n" || return 1
	done
}
no_drainer_keys() {
	local n
	for n in $nodes; do [ "$(node_drainer_anns "$n")" = "{}" ] || return 1; done
}
drainer_rules() { kubectl get devicetaintrules -o json 2>/dev/null | jq '[.items[] | select(.metadata.name | startswith("drainer-"))] | length'; }

cleanup_rollout() {
	local n
	[ -n "${claims_watch:-}" ] && reap_pid "$claims_watch"
	[ -n "${pods_watch:-}" ] && reap_pid "$pods_watch"
	[ -n "${sampler:-}" ] && reap_pid "$sampler"
	kubectl delete namespace $ns $lease_ns --wait=false >/dev/null 2>&1
	kubectl get devicetaintrules -o name 2>/dev/null | grep '/drainer-' | xargs -r kubectl delete >/dev/null 2>&1
	# the driver's template and strategy as found (a last resort: the test's own second
	# rollout normally did this safely already)
	kubectl -n $ds_ns patch ds $ds --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/updateStrategy\",\"value\":$orig_strategy},
		{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/env\",\"value\":$orig_env},
		{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args\",\"value\":$orig_args}]" >/dev/null 2>&1
	for n in $nodes; do reset_node "$n"; done
	demo
}
e2e_cleanup_hooks+=(cleanup_rollout)

served=$(kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null)
if grep -qx devicetaintrules.resource.k8s.io <<<"$served"; then rules=1; else rules=0; fi
echo "  DeviceTaintRule served: $([ $rules = 1 ] && echo yes || echo "no (the cordon fallback)")"
for n in $nodes; do wait_until 60 driver_running "$n" || fail "no Ready driver pod on $n"; done
demo || { fail "demo workload"; finish; exit 1; }
kubectl create namespace $ns >/dev/null
kubectl create namespace $lease_ns >/dev/null

# ---- usage and refusals ----
drainer_run usage rollout
check_rc "no NAMESPACE/DAEMONSET: bad usage" 2 usage
drainer_run usage2 rollout $ds_ns/$ds
check_rc "no --driver: bad usage" 2 usage2
drainer_run usage3 rollout $ds --driver $drv
check_rc "not NAMESPACE/DAEMONSET: bad usage" 2 usage3

ds_patch '{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}}}}'
wait_until 30 ds_observed
drainer_run refused rollout $ds_ns/$ds --driver $drv --lease-namespace $lease_ns
check_rc "a RollingUpdate DaemonSet is refused" 4 refused
check "the refusal says how to set OnDelete" grep -q 'patch daemonset dra-driver --type merge.*OnDelete' "$e2e_tmp/refused.err"
audit_window "$run_start" "$e2e_tmp/audit-refused.json"
check_eq "the refusal wrote nothing" "" "$(drainer_writes "$e2e_tmp/audit-refused.json" | grep -v '^(no request' || true)"

ds_patch '{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}'
wait_until 30 ds_observed
old_hash=$(update_hash)
check "every node runs the current revision $old_hash" all_on "$old_hash"
drainer_run noop rollout $ds_ns/$ds --driver $drv --lease-namespace $lease_ns -o json
check_rc "OnDelete, nothing changed: done" 0 noop
check_eq "every node skipped" "skipped skipped skipped" "$(jq -r '[.nodes[].result] | join(" ")' "$e2e_tmp/noop.out")"
audit_window "$run_start" "$e2e_tmp/audit-noop.json"
check_eq "nothing written when every node is on the update revision" "" \
	"$(drainer_writes "$e2e_tmp/audit-noop.json" | grep -v '^(no request' || true)"

# ---- the workload: one GPU per replica, spread over the nodes, at most one disrupted ----
{ claim_template "$ns" one-gpu; pdb "$ns" ro-gpu ro-gpu minAvailable 2; cat <<YAML; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: Deployment
metadata: {name: ro-gpu, namespace: $ns}
spec:
  replicas: 3
  selector: {matchLabels: {app: ro-gpu}}
  template:
    metadata: {labels: {app: ro-gpu}}
    spec:
      terminationGracePeriodSeconds: 5
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector: {matchLabels: {app: ro-gpu}}
      containers:
      - name: c
        image: registry.example.com/inference:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
YAML
replicas_running() {
	kubectl -n $ns get pods -l app=ro-gpu -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running"
		and any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}
spread() { [ "$(kubectl -n $ns get pods -l app=ro-gpu -o json | jq '[.items[] | select(.status.phase == "Running") | .spec.nodeName] | unique | length')" = 3 ]; }
check "3 replicas of ro-gpu Running, one per node" wait_until 90 spread
# A pod without claims on node-2 and node-3 (node-1 has the demo's): they must keep running.
for n in node-2 node-3; do
	kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: plain-$n, namespace: $ns, labels: {app: e2e-plain}}
spec:
  nodeName: $n
  terminationGracePeriodSeconds: 5
  containers: [{name: c, image: registry.example.com/plain:v1}]
YAML
done
plain_running() { [ "$(kubectl -n $ns get pods -l app=e2e-plain -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 2 ]; }
check "a plain pod runs on node-2 and node-3" wait_until 60 plain_running
for n in $nodes; do pods_on_node "$n" "$e2e_tmp/pods-$n.json"; done

# ---- the new revision ----
ds_patch "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"e2e.drainer.io/rollout\":\"$(date +%s)\"}}}}}"
kubectl -n $ds_ns set env ds/$ds E2E_ROLLOUT_MARK=2 >/dev/null
wait_until 30 ds_observed
new_hash=$(update_hash)
check "the template change made a new revision ($old_hash -> $new_hash)" [ -n "$new_hash" ] && [ "$new_hash" != "$old_hash" ]
sleep 2
check "OnDelete: the old driver pods still run" all_on "$old_hash"

# Recorders: every version of every ResourceClaim and of every driver pod, and a sample of
# the running replicas every 0.5 s.
kubectl get resourceclaims -A --watch --output-watch-events -o json >"$e2e_tmp/claims-watch.json" 2>/dev/null &
claims_watch=$!
track_pid $claims_watch
kubectl -n $ds_ns get pods --watch --output-watch-events -o json >"$e2e_tmp/pods-watch.json" 2>/dev/null &
pods_watch=$!
track_pid $pods_watch
(while :; do echo "$(date +%s.%N) $(replicas_running)"; sleep 0.5; done) >"$e2e_tmp/replicas.txt" 2>/dev/null &
sampler=$!
track_pid $sampler
sleep 1
audit_start=$(audit_lines)

# ---- rollout, SIGKILLed once node-2 is under way, then resumed ----
echo "  \$ drainer rollout $ds_ns/$ds --driver $drv --max-parallel 1 (SIGKILL once node-2 starts)"
t_ro=$(date +%s.%N)
"$DRAINER" rollout $ds_ns/$ds --driver $drv --max-parallel 1 --lease-namespace $lease_ns --timeout "$ro_timeout" \
	>"$e2e_tmp/ro1.out" 2>"$e2e_tmp/ro1.err" &
ro_pid=$!
track_pid $ro_pid
node2_started() { [ -n "$(node_ann node-2 "drainer.io/state.$drv")" ]; }
if wait_until 240 node2_started; then
	kill -KILL $ro_pid
	wait $ro_pid 2>/dev/null
	untrack_pid $ro_pid
	echo "  killed the rollout with node-2 at $(node_ann node-2 "drainer.io/state.$drv")"
	pass "the rollout was SIGKILLed with node-2 in progress"
else
	fail "node-2's driver drain never started"
	tail -n 20 "$e2e_tmp/ro1.err" | sed 's/^/    stderr: /'
	reap_pid $ro_pid KILL
fi
check_eq "node-1 was done before the kill (no drainer.io/ key)" "{}" "$(node_drainer_anns node-1)"
check_eq "node-2 records the rollout's target" "$new_hash" "$(node_ann node-2 "drainer.io/rollout.$drv")"
DRAINER_RUN_TIMEOUT=400 drainer_run ro2 rollout $ds_ns/$ds --driver $drv --max-parallel 1 --lease-namespace $lease_ns \
	--timeout "$ro_timeout" -o json
check_rc "the rerun resumes and finishes" 0 ro2
ro_secs=$(awk -v a="$t_ro" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
check_eq "the rerun: node-1 skipped, node-2 and node-3 updated" "node-1=skipped node-2=updated node-3=updated" \
	"$(jq -r '[.nodes[] | "\(.node)=\(.result)"] | join(" ")' "$e2e_tmp/ro2.out")"
check "every node runs one Ready driver pod of the new revision, its slice published" wait_until 30 all_on "$new_hash"
check_eq "no DeviceTaintRule of drainer left" 0 "$(drainer_rules)"
check "no drainer.io/ key on any node" no_drainer_keys
sleep 1
reap_pid $claims_watch
reap_pid $pods_watch
reap_pid $sampler
claims_watch= pods_watch= sampler=
audit_window "$audit_start" "$e2e_tmp/audit-ro.json"

# Every old driver pod was evicted by drainer (never a plain DELETE, never grace 0).
jq_checks --arg h "$old_hash" --slurpfile w "$e2e_tmp/pods-watch.json" '
	([$w[] | .object | select(.metadata.labels["controller-revision-hash"] == $h) | .metadata.name] | unique) as $old
	| [.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods" and .objectRef.namespace == "dra-system"
		and ((.verb == "create" and .objectRef.subresource == "eviction") or .verb == "delete"))] as $ev
	| ($ev | map(select(.verb == "delete" or (.requestObject.deleteOptions.gracePeriodSeconds // 1) == 0))) as $bad
	| if ($old | length) != 3 then "FAIL expected 3 old driver pods, saw \($old)"
	  elif ($ev | map(.objectRef.name) | unique) != $old then "FAIL drainer evicted \($ev | map(.objectRef.name) | unique), the old pods are \($old)"
	  elif ($bad | length) > 0 then "FAIL a driver pod deleted, or evicted with grace 0: \($bad | map(.objectRef.name))"
	  else "ok drainer evicted exactly the 3 old driver pods, each with its own grace period" end' "$e2e_tmp/audit-ro.json"

# No driver pod deleted while a claim allocated on its node existed: for each old driver
# pod, the first version of it with a deletionTimestamp; every claim's last version
# before it (by resourceVersion) must not be allocated on that node.
jq_checks -n --slurpfile w "$e2e_tmp/pods-watch.json" --slurpfile c "$e2e_tmp/claims-watch.json" --arg h "$old_hash" '
	def rv: .metadata.resourceVersion | tonumber;
	def on($n): (.status.allocation.nodeSelector.nodeSelectorTerms // [])
		| any(.[]; (.matchFields // []) | any(.[]; .key == "metadata.name" and (.values | index($n))));
	[$w[] | .object | select(.metadata.labels["controller-revision-hash"] == $h and .metadata.deletionTimestamp != null)]
	| group_by(.metadata.name) | map(min_by(rv)) as $dels
	| [$dels[] | . as $d | ($d | rv) as $t | $d.spec.nodeName as $n
		| [$c[] | select(.object.metadata.resourceVersion | tonumber < $t)] | group_by(.object.metadata.uid)
		| map(max_by(.object.metadata.resourceVersion | tonumber)) | map(select(.type != "DELETED" and (.object | on($n))))
		| {pod: $d.metadata.name, node: $n, claims: map("\(.object.metadata.namespace)/\(.object.metadata.name)")}] as $r
	| if ($dels | length) != 3 then "FAIL expected 3 old driver pod deletions in the watch, saw \($dels | length)"
	  elif ($c | length) == 0 then "FAIL no ResourceClaim events recorded"
	  elif ($r | map(select(.claims | length > 0)) | length) == 0
	  then "ok no driver pod was deleted while a claim was allocated on its node (\($r | map("\(.node): 0 claims") | join(", ")))"
	  else "FAIL driver pods deleted with claims allocated on their node: \($r | map(select(.claims | length > 0)))" end'
# The deletions did happen while claims of those nodes had been in use before (the check
# above is not vacuous): each node had a claim allocated in the recorded window.
jq_checks -n --slurpfile c "$e2e_tmp/claims-watch.json" '
	[$c[] | .object.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0] // empty] | unique as $n
	| if ($n | index("node-1")) and ($n | index("node-2")) and ($n | index("node-3"))
	  then "ok claims were allocated on every node during the window" else "FAIL claims allocated only on \($n)" end'

# Never more than one node out at a time: drainer's DeviceTaintRules, one at a time.
if [ "$rules" = 1 ]; then
	jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules"
			and (.verb | IN("create", "delete")) and (.responseStatus.code // 0) < 300)]
		| sort_by(.requestReceivedTimestamp) as $e
		| (reduce $e[] as $x ({n: 0, max: 0}; .n += (if $x.verb == "create" then 1 else -1 end) | .max = ([.max, .n] | max))) as $r
		| ($e | map(select(.verb == "create")) | length) as $created
		| if $created < 3 then "FAIL only \($created) DeviceTaintRules created (one per node expected)"
		  elif $r.max == 1 and $r.n == 0 then "ok one DeviceTaintRule at a time (\($created) created, all deleted): never 2 nodes out"
		  else "FAIL at most \($r.max) rules at once, \($r.n) left" end' "$e2e_tmp/audit-ro.json"
else
	pass "(no DeviceTaintRule served: the one-at-a-time check on rules does not apply)"
fi
min_running=$(awk 'NR > 1 && $2 != "" { if (m == "" || $2 < m) m = $2 } END { print m }' "$e2e_tmp/replicas.txt")
check "a replica of ro-gpu ran throughout (at least $min_running of 3 Running and Ready at every sample)" [ "${min_running:-0}" -ge 1 ]
for n in $nodes; do
	pods_on_node "$n" "$e2e_tmp/pods-after-$n.json"
	jq_checks --slurpfile before "$e2e_tmp/pods-$n.json" --arg n "$n" '
		[.items[] | .metadata.uid] as $now
		| [$before[0].items[] | select(.status.phase == "Running" and (.spec.resourceClaims // [] | length) == 0
			and ((.metadata.ownerReferences // []) | any(.kind == "DaemonSet" and .name == "dra-driver") | not))] as $plain
		| ($plain | map(select(.metadata.uid as $u | $now | index($u) | not)) | map(.metadata.name)) as $gone
		| if ($plain | length) == 0 then "FAIL \($n): no pod without claims to check"
		  elif $gone == [] then "ok \($n): every pod without claims (\($plain | length)) kept running with the same UID"
		  else "FAIL \($n): pods without claims gone: \($gone)" end' "$e2e_tmp/pods-after-$n.json"
done

# Figures: each node's driver out of service, from the old pod's eviction to the new pod
# Ready (both in the API server's record: the audit log and the pods watch).
jq -rn --slurpfile a "$e2e_tmp/audit-ro.json" --slurpfile w "$e2e_tmp/pods-watch.json" --arg h "$new_hash" '
	def t: sub("\\.[0-9]+Z$"; "Z") | fromdate;
	def tf: (capture("^(?<s>.*T[0-9:]+)(?<f>\\.[0-9]+)?Z$") | (.s + "Z" | fromdate) + ((.f // "0") | tonumber));
	[$a[0][] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .objectRef.namespace == "dra-system")
		| {name: .objectRef.name, at: (.requestReceivedTimestamp | tf)}] as $ev
	| [$w[] | .object | select(.metadata.labels["controller-revision-hash"] == $h)
		| {node: .spec.nodeName, ready: ([.status.conditions[]? | select(.type == "Ready" and .status == "True") | .lastTransitionTime] | first)}
		| select(.ready != null)] | group_by(.node) | map(first) as $up
	| [$w[] | .object | select(.metadata.labels["controller-revision-hash"] != $h) | {name: .metadata.name, node: .spec.nodeName}] | unique as $old
	| $up[] | . as $u | ([$old[] | select(.node == $u.node) | .name]) as $names
	| ([$ev[] | select(.name as $x | $names | index($x))] | first) as $e
	| "  figure: \($u.node): driver out of service \(if $e then (($u.ready | t) - $e.at | . * 10 | round / 10 | tostring) + " s (old pod evicted -> new pod Ready)" else "?" end)"'
jq -r '.nodes[] | select(.result == "updated") | "  figure: \(.node): rollout said driver out \(.driverOutSeconds // "?") s, \(.podsKeptRunning) other pods kept running"' "$e2e_tmp/ro2.out"
for n in $nodes; do
	echo "  figure: $n: pods before $(jq '[.items[] | select(.status.phase == "Running")] | length' "$e2e_tmp/pods-$n.json"), of them still running with the same UID $(jq --slurpfile b "$e2e_tmp/pods-$n.json" '[.items[].metadata.uid] as $u | [$b[0].items[] | select(.status.phase == "Running" and (.metadata.uid as $x | $u | index($x)))] | length' "$e2e_tmp/pods-after-$n.json")"
done
echo "  figure: the rollout of 3 nodes (with the kill and the rerun) took ${ro_secs} s"

# ---- the same node drained whole, for comparison ----
cmp=node-1
pods_on_node $cmp "$e2e_tmp/pods-cmp.json"
drainer_run wdrain drain $cmp --timeout 120s -o json
check_rc "whole-node drain of $cmp" 0 wdrain
wdrain_start=$run_start
wdrain_secs=$run_secs
pods_on_node $cmp "$e2e_tmp/pods-cmp-drained.json"
drainer_run wup uncordon $cmp --timeout 120s -o json
check_rc "uncordon of $cmp" 0 wup
check "the driver of $cmp is back" wait_until 60 driver_running $cmp
audit_window "$wdrain_start" "$e2e_tmp/audit-whole.json"
ready_at=$(driver_pods_json $cmp | jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .status.conditions[]? | select(.type == "Ready" and .status == "True") | .lastTransitionTime] | first // ""')
w_out=$(jq -r --arg r "$ready_at" 'def tf: (capture("^(?<s>.*T[0-9:]+)(?<f>\\.[0-9]+)?Z$") | (.s + "Z" | fromdate) + ((.f // "0") | tonumber));
	([.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .objectRef.namespace == "dra-system")] | first) as $e
	| if $e and $r != "" then (($r | tf) - ($e.requestReceivedTimestamp | tf)) * 10 | round / 10 | tostring else "?" end' "$e2e_tmp/audit-whole.json")
echo "  figure: whole-node drain of $cmp: driver out of service $w_out s (its pod evicted -> new pod Ready after the uncordon; drain $wdrain_secs s + uncordon $run_secs s); pods still running with the same UID: $(jq --slurpfile b "$e2e_tmp/pods-cmp.json" '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.uid] as $u | [$b[0].items[] | select(.status.phase == "Running" and (.metadata.uid as $x | $u | index($x)))] | length' "$e2e_tmp/pods-cmp-drained.json") of $(jq '[.items[] | select(.status.phase == "Running")] | length' "$e2e_tmp/pods-cmp.json")"

# ---- a new revision whose plugin never gets Ready: the rollout stops at the first node ----
bad_args=$(jq -c '. + ["--devices=999"]' <<<"$orig_args")
kubectl -n $ds_ns patch ds $ds --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args\",\"value\":$bad_args}]" >/dev/null
wait_until 30 ds_observed
bad_hash=$(update_hash)
delete_node_events node-1
drainer_run bad rollout $ds_ns/$ds --driver $drv --lease-namespace $lease_ns --timeout 25s -o json
check_rc "a new driver that never gets Ready: the rollout stops, timed out" 3 bad
check_eq "node-1 timed out, node-2 and node-3 not started" "node-1=timeout node-2=not-started node-3=not-started" \
	"$(jq -r '[.nodes[] | "\(.node)=\(.result)"] | join(" ")' "$e2e_tmp/bad.out")"
check "the output says node-1's driver stays out of service" \
	jq -e '.nodes[0].message | test("stays out of service")' "$e2e_tmp/bad.out"
check_eq "node-1's driver is still out (drained, the rollout recorded)" "drained $bad_hash" \
	"$(node_ann node-1 "drainer.io/state.$drv") $(node_ann node-1 "drainer.io/rollout.$drv")"
if [ "$rules" = 1 ]; then
	check_eq "node-1's DeviceTaintRule stays" 1 "$(drainer_rules)"
fi
node_events node-1 "$e2e_tmp/events-bad.json"
check "a DrainerFailed Event on node-1 says so" \
	jq -e 'any(.[]; .reason == "DrainerFailed" and (.message | test("did not become healthy")))' "$e2e_tmp/events-bad.json"
check_eq "node-2 and node-3 still run the previous revision" "$new_hash $new_hash" \
	"$(for n in node-2 node-3; do driver_pods_json $n | jq -r '.items[0].metadata.labels["controller-revision-hash"]'; done | xargs)"

# ---- back to the original template, with drainer rollout again (it also recovers
# node-1: its broken pod is not of the update revision any more), then the strategy ----
kubectl -n $ds_ns patch ds $ds --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/env\",\"value\":$orig_env},
	{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args\",\"value\":$orig_args},
	{\"op\":\"remove\",\"path\":\"/spec/template/metadata/annotations/e2e.drainer.io~1rollout\"}]" >/dev/null
wait_until 30 ds_observed
check_eq "the original template is the update revision again" "$old_hash" "$(update_hash)"
DRAINER_RUN_TIMEOUT=400 drainer_run back rollout $ds_ns/$ds --driver $drv --lease-namespace $lease_ns --timeout "$ro_timeout" -o json
check_rc "the rollout back to the original revision" 0 back
check_eq "the rollout back: node-1 recovered, node-2 and node-3 updated" "node-1=updated node-2=updated node-3=updated" \
	"$(jq -r '[.nodes[] | "\(.node)=\(.result)"] | join(" ")' "$e2e_tmp/back.out")"
check "every node runs the original revision again" wait_until 30 all_on "$old_hash"

# ---- item 2: a driver that upgrades seamlessly needs no drain ----
drainer_run plan-no plan node-2 --driver $drv --driver-stop none -o json
check_rc "plan --driver (OnDelete)" 0 plan-no
check_eq "plan: OnDelete is no seamless upgrade" "false dra-system/dra-driver" \
	"$(jq -r '"\(.seamlessUpgrade.seamless) \(.seamlessUpgrade.daemonset)"' "$e2e_tmp/plan-no.out")"
drainer_run plan-notext plan node-2 --driver $drv --driver-stop none
check "plan's text points at drainer rollout" grep -q "drainer rollout dra-system/dra-driver --driver $drv" "$e2e_tmp/plan-notext.out"
ds_patch '{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}}}'
wait_until 30 ds_observed
sleep 1
check "maxSurge 1 replaced no driver pod (the template is unchanged)" all_on "$old_hash"
drainer_run plan-yes plan node-2 --driver $drv --driver-stop none -o json
check_eq "plan: RollingUpdate with maxSurge on 1.33+ kubelets is seamless" true "$(jq -r '.seamlessUpgrade.seamless' "$e2e_tmp/plan-yes.out")"
check "plan: the reason names the kubelets" jq -e '.seamlessUpgrade.reason | test("all 3 of its nodes run kubelet 1.33 or newer")' "$e2e_tmp/plan-yes.out"
pods_on_node node-2 "$e2e_tmp/pods-seam.json"
drainer_run seam maintain node-2 --driver $drv --driver-stop none -o json -- touch "$e2e_tmp/seam-ran"
check_rc "maintain --driver of a seamless driver" 0 seam
check "its command ran" test -e "$e2e_tmp/seam-ran"
audit_window "$run_start" "$e2e_tmp/audit-seam.json"
check_eq "nothing evicted, nothing written (no drain needed)" "" \
	"$(drainer_writes "$e2e_tmp/audit-seam.json" | grep -v '^(no request' || true)"
check_eq "the summary says seamless, 0 pods evicted" "true 0" "$(jq -r '"\(.seamlessUpgrade.seamless) \(.podsEvicted)"' "$e2e_tmp/seam.out")"
drainer_run seamf maintain node-2 --driver $drv --driver-stop none --force-drain --timeout 60s -o json -- true
check_rc "maintain --driver --force-drain drains anyway" 0 seamf
audit_window "$run_start" "$e2e_tmp/audit-seamf.json"
check "--force-drain: the claim holder of node-2 was evicted" \
	[ "$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction" and .objectRef.namespace == "'$ns'")] | length' "$e2e_tmp/audit-seamf.json")" -ge 1 ]
check_eq "--force-drain: restored, no drainer.io/ key" "{}" "$(node_drainer_anns node-2)"
drainer_run seamusage maintain node-2 --force-drain -- true
check_rc "--force-drain without --driver: bad usage" 2 seamusage

kubectl -n $ds_ns patch ds $ds --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/updateStrategy\",\"value\":$orig_strategy}]" >/dev/null
wait_until 30 ds_observed
sleep 2
check "the original strategy back: no driver pod replaced by it" all_on "$old_hash"
check_eq "no DeviceTaintRule of drainer left" 0 "$(drainer_rules)"
check "no drainer.io/ key on any node" no_drainer_keys
finish
