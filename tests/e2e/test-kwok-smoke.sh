#!/usr/bin/env bash
# A fleet smoke on kwok nodes (tests/cluster with DRAINER_CLUSTER_NODES=kwok; CI runs it
# on 200): one `drainer serve --all-nodes --max-parallel 10` (cluster mode, as
# deploy/cluster-mode runs it) and a wave of 40 nodes asked at once (PATCHed in parallel,
# not at kubectl's 5 requests/s), each with 2 claim holders (one GPU each, from a
# ResourceClaimTemplate) and 1 plain pod, pinned by Deployments. Each node is asked to
# uncordon as soon as it is drained (a drained node holds its slot until then). Judged
# from what the API server saw (watches of the Nodes, the slot Leases, the pods and the
# claims, and the audit log), not from drainer's log:
#  - every asked node reached drainer.io/state=drained;
#  - never more than 10 nodes out at once (cordoned, or in a drain or undo phase) over
#    one watch of every Node (the API server's order), and only the Leases
#    drainer-slot-0 .. drainer-slot-9 were ever taken;
#  - every claim holder was evicted through the Eviction API by drainer; drainer
#    deleted no pod;
#  - on each node, every claim allocated there was released (deleted or its allocation
#    cleared) before its driver pod began to terminate (resourceVersions of one etcd),
#    and the driver was evicted after every other pod of the node;
#  - after the undo every asked node is schedulable, untainted, without a drainer.io/
#    key, its driver Running and Ready, and the workloads Running again.
#  - with KWOK_SMOKE_HA=1 (the default) two replicas run with --leader-elect (the
#    default durations: lease 15 s), each as its own user (--as): once half the
#    wave is drained the leader is SIGKILLed; the standby takes the Lease and finishes
#    the wave from the Nodes, and the killed replica wrote nothing after the new
#    leader's first write (audit log).
# Prints the wave's time, drainer's requests by verb and resource (audit log) and its
# RSS. With another kind of nodes it says it needs kwok and stops (0 checks).
# Settings: KWOK_SMOKE_NODES (40), KWOK_SMOKE_PARALLEL (10), KWOK_SMOKE_TIMEOUT (600 s),
# KWOK_SMOKE_HA (1).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
if [ "${DRAINER_CLUSTER_NODES:-}" != kwok ]; then
	echo "  skipped: the fleet smoke needs kwok nodes (DRAINER_CLUSTER_NODES=kwok DRAINER_CLUSTER_NODE_COUNT=300 tests/cluster/up); the cluster in $DRAINER_CLUSTER_DIR has ${DRAINER_CLUSTER_NODES:-no} nodes"
	finish
	exit 0
fi
ask=${KWOK_SMOKE_NODES:-40}
slots=${KWOK_SMOKE_PARALLEL:-10}
budget=${KWOK_SMOKE_TIMEOUT:-600}
ha=${KWOK_SMOKE_HA:-1}
ns=e2e-kwok-smoke
lease_ns=e2e-kwok-smoke-leases

# The asked nodes, spread over the fleet: node-1, node-1+step, ...
total=$(kubectl get nodes -l type=kwok -o name | grep -c .)
if [ "$total" -lt "$ask" ]; then
	fail "the cluster has $total kwok nodes, the smoke asks $ask of them"
	finish
	exit 1
fi
step=$((total / ask))
nodes=()
for ((k = 0; k < ask; k++)); do nodes+=("node-$((1 + k * step))"); done
names_json=$(printf '%s\n' "${nodes[@]}" | jq -R . | jq -sc .)
echo "- $total kwok nodes; asking $ask of them (${nodes[0]}, ${nodes[1]}, ... ${nodes[ask - 1]}), --max-parallel $slots"

cleanup_kwok_smoke() {
	local t n
	for t in "${!serve_pids[@]}"; do serve_stop "$t" KILL; done
	kubectl delete namespace "$ns" "$lease_ns" --ignore-not-found --wait=false >/dev/null 2>&1
	# Only the nodes a failed run left changed (reset_node is several requests each).
	for n in $(kubectl get nodes -o json | jq -r --argjson names "$names_json" '.items[] | select(.metadata.name as $n | $names | index($n))
		| select((.spec.unschedulable // false) or ((.metadata.annotations // {}) | keys | any(startswith("drainer.io/")))
			or any(.spec.taints // [] | .[]; .key == "drainer.io/draining")) | .metadata.name'); do
		reset_node "$n"
	done
}
e2e_cleanup_hooks+=(cleanup_kwok_smoke)

kubectl delete namespace "$ns" "$lease_ns" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1
kubectl create namespace "$lease_ns" >/dev/null
kubectl create namespace "$ns" >/dev/null
wait_until 30 kubectl -n "$ns" get serviceaccount default

# ---- the workloads: per node, 2 claim holders and 1 plain pod ----
t0=$SECONDS
{
	claim_template "$ns" one-gpu
	for n in "${nodes[@]}"; do
		for kind in gpu plain; do
			cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $kind-$n, namespace: $ns}
spec:
  replicas: $([ "$kind" = gpu ] && echo 2 || echo 1)
  selector: {matchLabels: {app: $kind-$n}}
  template:
    metadata: {labels: {app: $kind-$n, e2e-kind: $kind}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $n}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: registry.example.com/$kind:v1
$([ "$kind" = gpu ] && printf '%s\n' "        resources: {claims: [{name: gpu}]}" "      resourceClaims:" "      - {name: gpu, resourceClaimTemplateName: one-gpu}")
---
YAML
		done
	done
} | kubectl apply -f - >/dev/null
want_pods=$((ask * 3))
pods_running() {
	[ "$(kubectl -n "$ns" get pods -o json | jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = "$want_pods" ]
}
check "$want_pods pods Running on the $ask nodes (2 claim holders and 1 plain pod each)" wait_until 180 pods_running
claims_allocated() {
	[ "$(kubectl -n "$ns" get resourceclaims -o json | jq '[.items[] | select(.status.allocation != null and ((.status.reservedFor // []) | length) > 0)] | length')" = "$((ask * 2))" ]
}
check "$((ask * 2)) claims allocated and reserved" wait_until 60 claims_allocated
echo "  (workloads placed in $((SECONDS - t0)) s)"
kubectl -n "$ns" get pods -o json | jq -c '[.items[] | {key: "\(.metadata.namespace)/\(.metadata.name)", node: .spec.nodeName, kind: .metadata.labels["e2e-kind"]}]' >"$e2e_tmp/pods.before"
kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin -o json |
	jq -c --argjson names "$names_json" '[.items[] | select(.spec.nodeName as $n | $names | index($n)) | {key: "\(.metadata.namespace)/\(.metadata.name)", node: .spec.nodeName, kind: "driver"}]' >"$e2e_tmp/drivers.before"
check_eq "one driver pod on each asked node" "$ask" "$(jq '[.[].node] | unique | length' "$e2e_tmp/drivers.before")"

# ---- recorders ----
nodes_watch_start "$e2e_tmp/nodes.watch"
leases_watch_start "$lease_ns" "$e2e_tmp/leases.watch"
watch_to() { # FILE JQ ARGS...: a kubectl watch with events, each line through JQ
	local file=$1 filter=$2 pid
	shift 2
	: >"$file"
	"$KUBECTL" get "$@" -w -o json --output-watch-events --request-timeout=1800s \
		> >(jq --unbuffered -c "$filter" >>"$file" 2>/dev/null) 2>/dev/null &
	pid=$!
	track_pid "$pid"
	e2e_cleanup_hooks+=("reap_pid $pid")
	watch_pids+=("$pid")
}
watch_pids=()
watch_to "$e2e_tmp/pods.watch" '{t: now, type, rv: (.object.metadata.resourceVersion | tonumber), key: "\(.object.metadata.namespace)/\(.object.metadata.name)",
	node: .object.spec.nodeName, deleting: (.object.metadata.deletionTimestamp != null)}' pods -A
watch_to "$e2e_tmp/claims.watch" '{t: now, type, rv: (.object.metadata.resourceVersion | tonumber), key: "\(.object.metadata.namespace)/\(.object.metadata.name)",
	node: (.object.status.allocation.devices.results[0].pool // null), allocated: (.object.status.allocation != null),
	reserved: ((.object.status.reservedFor // []) | length)}' resourceclaims -n "$ns"
check "the pod and claim watches record" wait_until 20 eval '[ -s "$e2e_tmp/pods.watch" ] && [ -s "$e2e_tmp/claims.watch" ]'

# ---- serve, and the wave ----
start=$(audit_lines)
metrics_port=$(free_port)
leader=kwok
if [ "$ha" = 1 ]; then
	# (kube-controller-manager's durations, the defaults: lease 15 s, renew deadline 10 s,
	# retry period 2 s; 6/4/1 s lost the Lease on 2 loaded cores while a -vv leader
	# processed the wave)
	ha_args=(--leader-elect)
	serve_start kwok serve --all-nodes --max-parallel "$slots" --lease-namespace "$lease_ns" --identity e2e-kwok \
		--metrics-addr "127.0.0.1:$metrics_port" "${ha_args[@]}" --as e2e-kwok --as-group system:masters
	holds() { [[ "$(kubectl -n "$lease_ns" get lease drainer-leader -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" == "$1_"* ]]; }
	check "replica e2e-kwok holds the Lease drainer-leader" wait_until 30 holds e2e-kwok
	serve_start kwok2 serve --all-nodes --max-parallel "$slots" --lease-namespace "$lease_ns" --identity e2e-kwok2 \
		--metrics-addr "127.0.0.1:$(free_port)" "${ha_args[@]}" --as e2e-kwok2 --as-group system:masters
else
	serve_start kwok serve --all-nodes --max-parallel "$slots" --lease-namespace "$lease_ns" --identity e2e-kwok \
		--metrics-addr "127.0.0.1:$metrics_port"
fi
check "serve --all-nodes watches every Node" wait_until 30 watch_opened "$start" "/api/v1/nodes?"
sleep 1
t_ask=$(date +%s.%N)
check "$ask nodes annotated drainer.io/request=drain at once (parallel PATCHes, each 200)" \
	nodes_annotate_parallel drainer.io/request drain "${nodes[@]}"
echo "  (the $ask PATCHes took $(awk -v a="$t_ask" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s)"

# Each drained node is asked to uncordon at once (all the newly drained in one parallel
# batch), until every node is drained and back.
declare -A undone=()
end=$((SECONDS + budget))
while [ "${#undone[@]}" -lt "$ask" ] && [ "$SECONDS" -lt "$end" ]; do
	serve_alive "$leader" || {
		fail "serve ($leader) exited during the wave"
		serve_log "$leader" 40 'leader|lost|error|warning'
		break
	}
	mapfile -t fresh < <(jq -r --argjson names "$names_json" 'select(.state == "drained" and (.name as $n | $names | index($n))) | .name' \
		"$e2e_tmp/nodes.watch" | sort -u)
	new=()
	for n in "${fresh[@]}"; do [ -n "${undone[$n]:-}" ] || new+=("$n"); done
	if [ "${#new[@]}" -gt 0 ]; then
		nodes_annotate_parallel drainer.io/request uncordon "${new[@]}" || fail "asking ${new[*]} to uncordon"
		for n in "${new[@]}"; do undone[$n]=1; done
	fi
	if [ "$ha" = 1 ] && [ "$leader" = kwok ] && [ "${#undone[@]}" -ge $((ask / 2)) ]; then
		echo "  ${#undone[@]} of $ask drained: SIGKILL to the leader (e2e-kwok)"
		t_kill=$SECONDS kill_at=$(now_rfc3339)
		serve_stop kwok KILL
		leader=kwok2
		check "the standby (e2e-kwok2) takes the Lease (<= 30 s)" wait_until 30 holds e2e-kwok2
		echo "    (in $((SECONDS - t_kill)) s)"
	fi
	sleep 0.5
done
t_last_drained=$(date +%s.%N)
check_eq "every asked node reached drainer.io/state=drained within ${budget} s" "$ask" "${#undone[@]}"
# Back in service: no drainer.io/ key, schedulable, no drain taint, driver Running+Ready.
all_restored() {
	local nodes_ok drivers_ok
	nodes_ok=$(kubectl get nodes -o json | jq --argjson names "$names_json" '[.items[] | select(.metadata.name as $n | $names | index($n))
		| select((.spec.unschedulable // false) == false and ((.metadata.annotations // {}) | keys | any(startswith("drainer.io/")) | not)
			and (any(.spec.taints // [] | .[]; .key == "drainer.io/draining") | not))] | length')
	drivers_ok=$(kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin -o json | jq --argjson names "$names_json" '[.items[]
		| select((.spec.nodeName as $n | $names | index($n)) and .metadata.deletionTimestamp == null and .status.phase == "Running"
			and any(.status.conditions // [] | .[]; .type == "Ready" and .status == "True")) | .spec.nodeName] | unique | length')
	[ "$nodes_ok" = "$ask" ] && [ "$drivers_ok" = "$ask" ]
}
check "every asked node back in service (schedulable, no drain taint, no drainer.io/ key, its driver Running and Ready)" \
	wait_until $((end - SECONDS > 120 ? end - SECONDS : 120)) all_restored
t_restored=$(date +%s.%N)
check "the workloads Running again ($want_pods pods)" wait_until 180 pods_running

rss=$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d MiB (peak %d MiB)", r / 1024, h / 1024 }' "/proc/${serve_pids[$leader]}/status" 2>/dev/null)
sleep 1
nodes_watch_stop
leases_watch_stop
for p in "${watch_pids[@]}"; do reap_pid "$p"; done
sleep 0.3
serve_stop "$leader"
check_eq "serve exits 0 on SIGTERM" 0 "$serve_rc"
[ "$e2e_failed" = 0 ] || serve_log "$leader" 30
audit_since "$start" "$e2e_tmp/wave.audit"

# ---- 1. the Nodes: each drained, never more than $slots out at once ----
jq_checks -s --argjson names "$names_json" --argjson slots "$slots" '
	def out: .unsched or (.state | IN("cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained", "restore-drivers", "uncordon"));
	[.[] | select(.name as $n | $names | index($n))] as $v
	| [foreach $v[] as $x ({}; .[$x.name] = ($x | out); [to_entries[] | select(.value)] | length)] as $inflight
	| ($inflight | max // 0) as $max
	| ([$v[] | select(.state == "drained") | .name] | unique | length) as $drained
	| (if ($v | length) == 0 then "FAIL no version of the asked nodes in the Node watch"
	   elif $max <= $slots and $max >= 2 then "ok at most \($max) nodes out at once (--max-parallel \($slots)), over \($v | length) Node versions"
	   elif $max > $slots then "FAIL \($max) nodes out at once, --max-parallel \($slots)"
	   else "FAIL never more than one node out at once: the slots were not shared" end),
	  (if $drained == ($names | length) then "ok the Node watch saw all \($drained) asked nodes drained"
	   else "FAIL the Node watch saw \($drained) of \($names | length) asked nodes drained" end),
	  ([$v[] | select(out and (.name as $n | $names | index($n) | not))] | length) as $other
	  | (if $other == 0 then "ok no other node was touched" else "FAIL \($other) versions of nodes not asked, out of service" end)' "$e2e_tmp/nodes.watch"
jq_checks -s --argjson slots "$slots" --argjson ha "$ha" '
	([.[].name | select($ha != 1 or . != "drainer-leader")] | unique) as $names
	| (if ($names | length) > 0 and all($names[]; test("^drainer-slot-[0-9]+$") and (ltrimstr("drainer-slot-") | tonumber) < $slots)
	   then "ok only the Leases drainer-slot-0 .. drainer-slot-\($slots - 1) were taken (\($names | length) of them)"
	   else "FAIL Leases seen in the lease namespace: \($names | join(", "))" end)' "$e2e_tmp/leases.watch"

# ---- 2. the audit log: evictions only, every claim holder evicted, driver last ----
# An eviction whose answer the audit log has as an error still counts when nobody but
# drainer asked to delete or evict that pod (kwok only removes a pod already deleted):
# the SIGKILLed leader's requests in flight can be carried out with the client gone.
failed_before=$e2e_failed
jq_checks --slurpfile before "$e2e_tmp/pods.before" --slurpfile drivers "$e2e_tmp/drivers.before" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	[.[] | select(.stage == "ResponseComplete")] as $all
	| [$all[] | select(.userAgent // "" | startswith("drainer/"))] as $d
	| ([$all[] | select((.userAgent // "" | startswith("drainer/") | not) and .objectRef.resource == "pods" and .user.username != "kwok"
	      and (((.objectRef.subresource // "") == "eviction" and .verb == "create") or ((.objectRef.subresource // "") == "" and .verb == "delete")))
	    | key] | unique) as $others
	| [$d[] | select(.objectRef.resource == "pods" and .objectRef.subresource == "eviction" and .verb == "create")
	   | {key: key, at: .requestReceivedTimestamp, ok: (.responseStatus.code < 300)}
	   | select(.ok or (.key as $k | $others | index($k) | not))] as $ev
	| ($ev | group_by(.key) | map({key: .[0].key, value: (map(.at) | min)}) | from_entries) as $evicted
	| ([$ev | group_by(.key)[] | select(all(.[]; .ok | not)) | .[0].key]) as $lost
	| ($before[0] + $drivers[0]) as $pods
	| [$pods[] | select(.kind == "gpu") | select($evicted[.key] == null) | .key] as $missed
	| (if ($pods | length) == 0 then "FAIL no pod recorded before the wave"
	   elif ($missed | length) == 0 then "ok every claim holder (\([$pods[] | select(.kind == "gpu")] | length)) was evicted through the Eviction API by drainer\(if ($lost | length) > 0 then " (\($lost | length) by a request answered with an error, nobody else deleting the pod: \($lost | .[0:3] | join(", ")))" else "" end)"
	   else "FAIL claim holders never evicted by drainer: \($missed | .[0:5] | join(", "))" end),
	  ([$d[] | select(.objectRef.resource == "pods" and .verb == "delete")] | length) as $del
	  | (if $del == 0 then "ok drainer deleted no pod (\([$ev[] | select(.ok)] | length) evictions accepted)" else "FAIL drainer sent \($del) pod DELETEs" end),
	  ([$pods | group_by(.node)[] | .[0].node as $n
	    | ([.[] | select(.kind == "driver") | $evicted[.key]] | min) as $drv
	    | ([.[] | select(.kind != "driver") | $evicted[.key] // empty] | max) as $last
	    | select($drv == null or ($last != null and $last >= $drv)) | "\($n): driver evicted \($drv // "never"), last other pod \($last // "never")"]) as $order
	  | (if ($order | length) == 0 then "ok on each of the \([$pods[].node] | unique | length) nodes the driver pod was evicted after every other pod"
	     else "FAIL driver not last: \($order | .[0:5] | join("; "))" end)' "$e2e_tmp/wave.audit"
# A claim holder without an accepted eviction by drainer: everything the audit log and the
# pod watch hold of it, so that CI's log says what happened to it (the cluster's folder is
# reused by the next step); when the checks above failed, into the failed checks too,
# which the summary at the end of a CI log repeats.
missed=$(jq -r --slurpfile before "$e2e_tmp/pods.before" --slurpfile pw "$e2e_tmp/pods.watch" '
	def who: .impersonatedUser.username // .user.username;
	. as $a
	| [$a[] | select((.userAgent // "" | startswith("drainer/")) and .stage == "ResponseComplete"
		and .objectRef.subresource == "eviction" and .verb == "create" and .responseStatus.code < 300)
		| "\(.objectRef.namespace)/\(.objectRef.name)"] as $ok
	| [$before[0][] | select(.kind == "gpu" and (.key as $k | $ok | index($k) | not))][0:3][]
	| .key as $k | (.key | split("/")) as [$ns, $name]
	| "    missed \($k) on \(.node):",
	  ([$a[] | select(.objectRef.namespace == $ns and .objectRef.name == $name and .objectRef.resource == "pods")
		| "      audit \(.requestReceivedTimestamp) \(.stage) \(who) \(.userAgent // "" | split(" ")[0]) \(.verb) \(.objectRef.subresource // "") -> \(.responseStatus.code // "-")"][0:12][]),
	  ([$pw[] | select(.key == $k) | "      watch t=\(.t) \(.type) rv=\(.rv) deleting=\(.deleting)"][0:6][])' \
	"$e2e_tmp/wave.audit" 2>/dev/null) || true
if [ -n "$missed" ]; then
	missed="    (the leader SIGKILLed at ${kill_at:-never})"$'\n'"$missed"
	echo "$missed"
	[ -z "${DRAINER_E2E_FAIL_LOG:-}" ] || [ "$e2e_failed" = "$failed_before" ] ||
		sed "s|^|${DRAINER_E2E_STEP:-$(basename "$0")}: |" <<<"$missed" >>"$DRAINER_E2E_FAIL_LOG"
fi

# Claims released before the driver began to terminate, by resourceVersion (one etcd).
jq_checks -n --slurpfile claims "$e2e_tmp/claims.watch" --slurpfile pods "$e2e_tmp/pods.watch" --slurpfile drivers "$e2e_tmp/drivers.before" '
	($drivers[0] | map({key, value: .node}) | from_entries) as $drv_node
	| ([$pods[] | select($drv_node[.key] != null and (.deleting or .type == "DELETED"))] | group_by($drv_node[.key])
	   | map({key: $drv_node[.[0].key], value: (map(.rv) | min)}) | from_entries) as $stop
	| [$claims[] | select(.allocated and .node != null)] as $alloc
	| [$alloc | group_by(.key)[] | {key: .[0].key, node: .[0].node, first: (map(.rv) | min)}] as $held
	| [$held[] | . as $c | ($stop[$c.node]) as $s | select($s != null and $c.first < $s)
	   | ([$claims[] | select(.key == $c.key and .rv > $c.first and (.type == "DELETED" or (.allocated | not)))] | map(.rv) | min) as $rel
	   | select($rel == null or $rel > $s) | "\($c.key) on \($c.node): released at rv \($rel // "never"), driver stopping at rv \($s)"] as $bad
	| ([$held[] | select($stop[.node] != null and .first < $stop[.node])] | length) as $n
	| (if ($stop | length) == 0 then "FAIL no driver pod of an asked node was seen terminating"
	   else "ok the driver pods of \($stop | length) nodes were seen terminating" end),
	  (if $n == 0 then "FAIL no claim allocated on a node before its driver stopped: nothing to check"
	   elif ($bad | length) == 0 then "ok each of the \($n) claims allocated on a node was released before its driver pod began to terminate"
	   else "FAIL claims not released before the driver stopped: \($bad | .[0:5] | join("; "))" end)'

# ---- 3. the leader's kill: nothing written by the old leader after the new one's first ----
if [ "$ha" = 1 ]; then
	jq_checks '
		def who: .impersonatedUser.username // .user.username;
		def w: (.verb | IN("create", "update", "patch", "delete")) and .stage == "ResponseComplete";
		([.[] | select(who == "e2e-kwok2" and w) | .requestReceivedTimestamp] | min) as $first
		| [.[] | select(who == "e2e-kwok" and w and $first != null and .requestReceivedTimestamp > $first)] as $late
		| (if $first == null then "FAIL the standby (e2e-kwok2) never wrote: it did not take over"
		   elif ($late | length) == 0 then "ok no write of the killed leader after the new leader'"'"'s first (\($first))"
		   else "FAIL \($late | length) writes of the killed leader after the new leader'"'"'s first: \($late[0] | "\(.verb) \(.objectRef.resource) \(.objectRef.name)")" end)' "$e2e_tmp/wave.audit"
fi

# ---- figures ----
wave=$(awk -v a="$t_ask" -v b="$t_last_drained" 'BEGIN { printf "%.1f", b - a }')
back=$(awk -v a="$t_ask" -v b="$t_restored" 'BEGIN { printf "%.1f", b - a }')
first_last=$(jq -rs --argjson names "$names_json" --arg t0 "$t_ask" '[.[] | select(.state == "drained" and (.name as $n | $names | index($n)))]
	| group_by(.name) | map(map(.t) | min) | sort | "first drained at \((.[0] - ($t0 | tonumber)) * 10 | round / 10) s, last at \((.[-1] - ($t0 | tonumber)) * 10 | round / 10) s"' "$e2e_tmp/nodes.watch")
echo "  wave: $ask nodes, --max-parallel $slots: $first_last after the PATCHes; all back in service ${back} s after them (loop ended at ${wave} s)"
echo "  drainer RSS at the end: ${rss:-unknown}"
echo "  drainer's requests during the wave, by verb and resource (audit log):"
jq -r '[.[] | select((.userAgent // "" | startswith("drainer/")))] | group_by(.auditID) | map(.[0])
	| map("\(.verb) \(.objectRef.resource // .requestURI)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end)")
	| group_by(.) | map({k: .[0], n: length}) | sort_by(-.n) | .[] | "    \(.n) \(.k)"' "$e2e_tmp/wave.audit"
jq -r --argjson ask "$ask" '[.[] | select((.userAgent // "" | startswith("drainer/")))] | group_by(.auditID) | length
	| "    \(.) requests in all, \(. / $ask * 10 | round / 10) per drained and restored node"' "$e2e_tmp/wave.audit"
finish
