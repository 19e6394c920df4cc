#!/usr/bin/env bash
# Parallel serve daemons and their safe default: one `drainer serve
# --node NODE` per node, as the DaemonSet runs them, with no --max-parallel (its
# default is 1), and `kubectl annotate nodes --all drainer.io/request=drain` (claim
# workloads on each: the demo on node-1, two one-GPU pods pinned to node-2 and to
# node-3). DRAINER_E2E_PARALLEL_MODE=all-nodes runs the cluster mode instead: one
# `drainer serve --all-nodes --max-parallel 1`. Each node is asked to uncordon as
# soon as it is drained. Shown from what the API server holds:
#  - never more than one node past cordon at a time: replayed over one watch of
#    every Node (a single stream in the API server's order), a node counting as out
#    while it is unschedulable or its drainer.io/state is a drain/undo phase;
#  - from the audit log: the eviction window of each node (first eviction to the
#    driver's) never overlaps another's, and each starts only after the previous
#    node's uncordon was requested; only Lease drainer-slot-0 was ever written;
#    if the cluster's audit policy records node patches with their bodies, the
#    cordon-to-uncordon windows of drainer's own patches never overlap either;
#  - the other requested nodes show drainer.io/state=waiting with the waiting
#    message, one per node and wait (a handover rewrites no waiting Node); the Lease drainer-slot-0 has one holder at a time, and each node
#    is out only while it holds the Lease;
#  - a phase written by hand (drainer.io/state=cordon with the request) waits for the
#    slot like any drain: not cordoned, nothing evicted, the phase kept, until the
#    slot is free.
# Per-node mode: each daemon runs as its own user (--as, with the admin's group), so
# the audit log tells whose Lease requests are whose: a node whose daemon asked for
# the slot a second or more before the node ahead of it let go must have waited.
# Its requests go through the fault proxy, which holds each daemon's first Node
# patch 4 s while the test labels the nodes, so the API server refuses that patch
# 409: a waiting node's Node must still say it waits (written again on the
# newer version), and the holder's cordon is retried.
# Cleanup: the workloads and the Lease namespace are deleted, the nodes reset, the
# demo workload restored.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
nodes=(node-1 node-2 node-3)
ns=e2e-serve-parallel
lease_ns=e2e-serve-parallel-leases

cleanup_parallel() {
	local t n
	for t in "${!serve_pids[@]}"; do serve_stop "$t" KILL; done
	kubectl delete namespace "$ns" "$lease_ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
	for n in "${nodes[@]}"; do reset_node "$n"; done
	kubectl label nodes --all e2e-touched- >/dev/null 2>&1
	demo
}
e2e_cleanup_hooks+=(cleanup_parallel)

demo || { fail "demo workload"; finish; exit 1; }
for n in "${nodes[@]}"; do
	[ "$(node_drainer_anns "$n")" = "{}" ] || reset_node "$n"
done
kubectl delete namespace "$ns" "$lease_ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
kubectl create namespace "$lease_ns" >/dev/null
kubectl create namespace "$ns" >/dev/null
wait_until 30 kubectl -n "$ns" get serviceaccount default
{
	claim_template "$ns" one-gpu
	doc_sep=
	for n in node-2 node-3; do
		printf '%s' "$doc_sep"
		doc_sep=$'---\n'
		cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-$n, namespace: $ns}
spec:
  replicas: 2
  selector: {matchLabels: {app: gpu-$n}}
  template:
    metadata: {labels: {app: gpu-$n}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $n}
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: registry.example.com/gpu-job:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
YAML
	done
} | kubectl apply -f - >/dev/null
running_on() { # NODE: both pods of gpu-NODE Running
	[ "$(kubectl -n "$ns" get pods -l "app=gpu-$1" -o json | jq '[.items[] | select(.status.phase == "Running" and .spec.nodeName != null)] | length')" = 2 ]
}
workloads_running() { running_on node-2 && running_on node-3; }
check "claim workloads run on node-2 and node-3" wait_until 60 workloads_running
for n in "${nodes[@]}"; do
	check "$n has claims ($(claims_on_node "$n" | jq length))" [ "$(claims_on_node "$n" | jq length)" -ge 1 ]
done

# Where each pod is (to give each eviction in the audit log its node).
: >"$e2e_tmp/pods.watch"
"$KUBECTL" get pods -A -w -o json --output-watch-events=false --request-timeout=600s \
	> >(jq --unbuffered -c 'select(.spec.nodeName != null) | {key: "\(.metadata.namespace)/\(.metadata.name)", node: .spec.nodeName}' >>"$e2e_tmp/pods.watch" 2>/dev/null) 2>/dev/null &
pw_pid=$!
e2e_cleanup_hooks+=("kill $pw_pid 2>/dev/null")
nodes_watch_start "$e2e_tmp/nodes.watch"
leases_watch_start "$lease_ns" "$e2e_tmp/leases.watch"
driver_pods=$(kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin -o json | jq -c '[.items[] | {key: "\(.metadata.namespace)/\(.metadata.name)", node: .spec.nodeName}]')

start=$(audit_lines)
daemons=()
if [ "${DRAINER_E2E_PARALLEL_MODE:-per-node}" = all-nodes ]; then
	serve_start c serve --all-nodes --max-parallel 1 --lease-namespace "$lease_ns" --identity e2e-parallel
	daemons=(c)
	check "serve --all-nodes watches every Node" wait_until 20 watch_opened "$start" "/api/v1/nodes?"
else
	# Through the fault proxy, which holds each node's first Node patch 4 s while
	# the test labels the nodes: the API server then refuses it 409 (its
	# resourceVersion is stale). For a waiting node that patch is its
	# drainer.io/state=waiting, which must be written again on the newer Node
	# (checked below: the Node names the first holder), not taken as written.
	fp_start "$e2e_tmp/kubeconfig.proxy"
	fp_rules "$(for n in "${nodes[@]}"; do
		printf '{"name":"first-patch-%s","method":"PATCH","path":"^/api/v1/nodes/%s$","first":1,"action":"stall","delay":"4s"}\n' "$n" "$n"
	done | jq -sc .)" || fail "setting the proxy's rules"
	for n in "${nodes[@]}"; do
		# (each as its own user, with the admin's rights: the audit log then tells
		# whose request is whose, the user agent being the same)
		serve_start "$n" serve --node "$n" --lease-namespace "$lease_ns" --identity "e2e-$n" \
			--as "e2e-serve-$n" --as-group system:masters --kubeconfig "$e2e_tmp/kubeconfig.proxy"
		daemons+=("$n")
	done
	for n in "${nodes[@]}"; do
		check "serve --node $n (no --max-parallel) watches its Node" wait_until 20 watch_opened "$start" "metadata.name%3D$n"
	done
fi
sleep 0.5
# (only node-1 .. node-3 in this cluster: check it, --all must mean them)
check_eq "the cluster's nodes are node-1 node-2 node-3" "node-1 node-2 node-3" "$(kubectl get nodes -o name | sed 's|node/||' | sort | tr '\n' ' ' | sed 's/ $//')"
echo "- kubectl annotate nodes --all drainer.io/request=drain"
kubectl annotate nodes --all drainer.io/request=drain >/dev/null
if [ "${DRAINER_E2E_PARALLEL_MODE:-per-node}" = per-node ]; then
	fp_held() { [ "$(curl -fsS "http://127.0.0.1:$fp_admin/stats" | jq '[.[] | select(.fired > 0)] | length')" = 3 ]; }
	if wait_until 20 fp_held; then
		echo "- each daemon's first Node patch held by the proxy: kubectl label nodes --all e2e-touched=1"
		kubectl label nodes --all --overwrite e2e-touched=1 >/dev/null
	else
		fail "the proxy did not hold a first Node patch of each daemon within 20 s: $(curl -fsS "http://127.0.0.1:$fp_admin/stats")"
	fi
fi

# Uncordon each node as soon as it is drained, until all three went through.
declare -A uncordon_at=()
order=()
end=$((SECONDS + 150))
while [ "${#order[@]}" -lt 3 ] && [ "$SECONDS" -lt "$end" ]; do
	for n in "${nodes[@]}"; do
		[ -z "${uncordon_at[$n]:-}" ] || continue
		if state_is "$n" drained; then
			order+=("$n")
			uncordon_at[$n]=$(now_rfc3339)
			echo "  $n drained; kubectl annotate --overwrite node $n drainer.io/request=uncordon"
			kubectl annotate --overwrite node "$n" drainer.io/request=uncordon >/dev/null
			wait_until 60 node_restored "$n" || echo "  $n not back in service after 60 s: $(node_drainer_anns "$n")"
		fi
	done
	sleep 0.2
done
check_eq "all three nodes were drained, one after another" 3 "${#order[@]}"
echo "  order: ${order[*]}"
if [ "${#order[@]}" -lt 3 ]; then
	for n in "${nodes[@]}"; do echo "    $n: $(node_drainer_anns "$n")"; done
	for d in "${daemons[@]}"; do serve_log "$d" 40; done
fi
for n in "${nodes[@]}"; do
	check "$n back in service (driver Running+Ready, slice, schedulable, no drainer.io annotation)" wait_until 30 node_restored "$n"
done
sleep 1
nodes_watch_stop
leases_watch_stop
kill "$pw_pid" 2>/dev/null
audit_window "$start" "$e2e_tmp/par.audit"

# 1. The Nodes, in the API server's order: at most one out at any version.
jq_checks -s --argjson names "$(printf '%s\n' "${nodes[@]}" | jq -R . | jq -sc .)" '
	def out: .unsched or (.state | IN("cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained", "restore-drivers", "uncordon"));
	[.[] | select(.name as $n | $names | index($n))] as $v
	| [foreach $v[] as $x ({}; .[$x.name] = ($x | out); {rv: $x.rv, out: [to_entries[] | select(.value) | .key]})] as $timeline
	| ([$timeline[].out | length] | max) as $max
	| ([$timeline[] | .out[]] | unique) as $went
	| (if ($v | length) == 0 then "FAIL no version of \($names | join(", ")) in the Node watch"
	   elif $max <= 1 then "ok never more than one node past cordon at a time, over \($v | length) observed Node versions (max \($max))"
	   else "FAIL \($max) nodes past cordon at once: \([$timeline[] | select((.out | length) > 1)] | first | tostring)" end),
	  (if ($went | length) == 3 then "ok each of the three nodes went out once it had the slot (\($went | join(", ")))"
	   else "FAIL only \($went | join(", ")) went out" end),
	  ([$timeline[] | .out[0] // empty] | reduce .[] as $s ([]; if (.[-1] // "") == $s then . else . + [$s] end)) as $seq
	  | (if ($seq | length) == 3 then "ok out of service in turn: \($seq | join(" -> "))"
	     else "FAIL out of service in turn: \($seq | join(" -> ")) (a node out twice?)" end)' "$e2e_tmp/nodes.watch"

# 2. Waiting nodes said so, naming the holder of the slot at that moment.
jq -rs '[.[] | select(.state == "waiting") | "\(.name): \(.message)"] | unique | .[] | "  waiting: " + .' "$e2e_tmp/nodes.watch"
waiting_failed=$e2e_failed
jq_checks -s --arg mode "${DRAINER_E2E_PARALLEL_MODE:-per-node}" '
	def out: .unsched or (.state | IN("cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained", "restore-drivers", "uncordon"));
	[foreach .[] as $x ({}; .[$x.name] = ($x | out); {x: $x, out: [to_entries[] | select(.value) | .key]})] as $t
	| [$t[] | select(.x.state == "waiting")] as $w
	| ([$w[].x.name] | unique) as $waiters
	| (if ($waiters | length) >= 2 then "ok \($waiters | join(" and ")) showed drainer.io/state=waiting (\($w | length) versions)"
	   elif $mode == "per-node" then "ok \($waiters | join(", ")) showed drainer.io/state=waiting (\($w | length) versions; which nodes had to: from the audit log, below)"
	   else "FAIL only \($waiters | join(", ")) showed drainer.io/state=waiting" end),
	  ([$w[] | select(.x.message | test("^waiting for a drain slot \\(--max-parallel [0-9]+\\)") | not)] | length) as $nomsg
	  | (if ($w | length) > 0 and $nomsg == 0 then "ok every waiting version carries the waiting message (e.g. \"\($w[0].x.message)\")"
	     else "FAIL \($nomsg) waiting versions without the message \"waiting for a drain slot (--max-parallel N) ...\"" end),
	  # The message names neither the holders nor a place in the queue: a handover
	  # rewrites no waiting Node (one waiting message per node and wait).
	  ([$w | group_by(.x.name)[] | select(([.[].x.message] | unique | length) > 1) | "\(.[0].x.name): \([.[].x.message] | unique | join(" / "))"]) as $churn
	  | (if ($churn | length) == 0 then "ok each waiting node showed one waiting message, whoever held the slots"
	     else "FAIL a waiting node was rewritten with another message: \($churn | .[0:3] | join("; "))" end),
	  ([$t[] | select((.x | out) and (.x.message | test("waiting for a drain slot"))) | "\(.x.name) \(.x.state): \(.x.message)"] | unique) as $stale
	  | (if ($stale | length) == 0 then "ok once out of service, no node still says it waits for a slot (drainer.io/message)"
	     else "FAIL a node out of service still says it waits for a slot: \($stale | .[0:3] | join("; "))" end),
	  ([$t[] | select(.x.state == "waiting" and .x.unsched)] | length) as $cw
	  | (if $cw == 0 then "ok no waiting node was cordoned" else "FAIL \($cw) versions of a waiting node that is cordoned" end)' "$e2e_tmp/nodes.watch"
# One daemon per node: a node must wait when its daemon asked for the slot (its
# first Lease request: the lease watch starts with the first attempt) a second or
# more before the node drained before it let go (its last Lease write, the release).
# One that saw its request only as the slot came free goes straight through.
if [ "${DRAINER_E2E_PARALLEL_MODE:-per-node}" = per-node ]; then
	jq_checks --slurpfile nodes "$e2e_tmp/nodes.watch" --argjson order "$(printf '%s\n' "${order[@]}" | jq -R . | jq -sc .)" '
		def ts: capture("^(?<s>[^.Z]+)(?<f>\\.[0-9]+)?Z$") | (.s + "Z" | fromdateiso8601) + ((.f // ".0") | tonumber);
		def hms: .[11:23];
		. as $audit
		| ([$nodes[] | select(.state == "waiting") | .name] | unique) as $waiters
		| def leases($n): [$audit[] | select(.impersonatedUser.username == "e2e-serve-" + $n and .objectRef.resource == "leases")];
		[range(1; $order | length) as $i | $order[$i] as $n | $order[$i - 1] as $p
		 | (leases($n) | map(.requestReceivedTimestamp) | min) as $asked
		 | (leases($p) | map(select(.verb | IN("create", "update", "delete")) | .requestReceivedTimestamp) | max) as $freed
		 | {n: $n, p: $p, asked: $asked, freed: $freed,
		    must: ($asked != null and $freed != null and ($asked | ts) + 1 < ($freed | ts))}] as $x
		| ($x[] | if .asked == null or .freed == null then "FAIL no Lease request of \(.n)'"'"'s daemon (e2e-serve-\(.n)) or of \(.p)'"'"'s in the audit log"
		   elif .must and (.n as $me | $waiters | index($me)) then "ok \(.n) asked for the slot at \(.asked | hms), \(.p) let go at \(.freed | hms): \(.n) showed drainer.io/state=waiting"
		   elif .must then "FAIL \(.n) asked for the slot at \(.asked | hms), \(.p) let go at \(.freed | hms), and \(.n) never showed drainer.io/state=waiting"
		   else "ok \(.n) asked for the slot only at \(.asked | hms), as \(.p) let go (\(.freed | hms)): nothing to wait for" end),
		  (if any($x[]; .must) then "ok at least one node asked while another held the slot"
		   else "FAIL no daemon asked for the slot while another node held it: the waiting state was not exercised" end),
		  # Those that asked 3 s or more before the first holder let go: their first waiting
		  # patch was refused 409, and the Node must say it waits all the same, written again.
		  ($order[0] as $h | (leases($h) | map(select(.verb | IN("create", "update", "delete")) | .requestReceivedTimestamp) | max) as $hfreed
		   | $x[] | select(.asked != null and $hfreed != null and (.asked | ts) + 3 < ($hfreed | ts)) | .n as $n
		   | if any($nodes[]; .name == $n and .state == "waiting" and (.message | test("^waiting for a drain slot")))
		     then "ok \($n) asked while \($h) held the slot (until \($hfreed | hms)), and the Node said it waits though its first patch was refused"
		     else "FAIL \($n) asked at \(.asked | hms) while \($h) held the slot (until \($hfreed | hms)): no waiting version says so (its first patch, refused 409, not written again?)" end)' "$e2e_tmp/par.audit"
	jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch" and .objectRef.resource == "nodes" and .objectRef.subresource == null)]
		| group_by(.objectRef.name)[] | (sort_by(.requestReceivedTimestamp) | first) as $p
		| if $p.responseStatus.code == 409 then "ok \($p.objectRef.name): the first Node patch (held by the proxy, the Node labelled meanwhile) was refused 409"
		  else "FAIL \($p.objectRef.name): the first Node patch was answered \($p.responseStatus.code), not 409: the conflict was not exercised" end' "$e2e_tmp/par.audit"
fi
[ "$e2e_failed" = "$waiting_failed" ] || for d in "${daemons[@]}"; do serve_log "$d" 20 'waiting|slots:|requested|: cordon|failed'; done
if jq -se 'any(.[]; (.state | IN("cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained")) and (.message | test("waiting for a drain slot")))' \
	"$e2e_tmp/nodes.watch" >/dev/null; then
	for d in "${daemons[@]}"; do serve_log "$d" 12 'waiting|slots:|requested|: cordon'; done
fi

# 3. The Lease: one slot, one holder at a time; a node is out only while holding it.
jq_checks -s '
	([.[].name] | unique) as $names
	| (if $names == ["drainer-slot-0"] then "ok one Lease only: drainer-slot-0"
	   else "FAIL Leases seen: \($names | join(", ")) (want drainer-slot-0 only)" end),
	  ([.[] | select(.name == "drainer-slot-0") | .holder] | reduce .[] as $h ([]; if (.[-1] // null) == $h then . else . + [$h] end)
	   | map(if . == "" then "(free)" else . end)) as $seq
	  | "ok holders of drainer-slot-0 in turn: \($seq | join(" -> "))"' "$e2e_tmp/leases.watch"
# Merged by resourceVersion (one etcd: Node and Lease versions share one revision order).
jq_checks -n --slurpfile nodes "$e2e_tmp/nodes.watch" --slurpfile leases "$e2e_tmp/leases.watch" '
	def out: .unsched or (.state | IN("cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained", "restore-drivers", "uncordon"));
	([$leases[] | select(.name == "drainer-slot-0") | {rv, holder: (if .type == "DELETED" then "" else .holder end)}] | sort_by(.rv)) as $l
	| [$nodes[] | select(out) | . as $n | ([$l[] | select(.rv <= $n.rv)] | last // {holder: ""}).holder as $h
	   | select($h != $n.name) | "\($n.name) rv \($n.rv) state \($n.state) while the Lease holder was \"\($h)\""] as $bad
	| ([$nodes[] | select(out)] | length) as $all
	| if $all == 0 then "FAIL no node was ever out"
	  elif ($bad | length) == 0 then "ok on every one of the \($all) versions of a node out of service, that node held drainer-slot-0"
	  else "FAIL a node out of service without holding the slot: \($bad | .[0:3] | join("; "))" end'

# 4. The audit log.
jq_checks --argjson drivers "$driver_pods" --slurpfile where "$e2e_tmp/pods.watch" --argjson order "$(printf '%s\n' "${order[@]}" | jq -R . | jq -sc .)" '
	(($where | map({key, value: .node}) | from_entries) + ($drivers | map({key, value: .node}) | from_entries)) as $node_of
	| [.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "pods" and .objectRef.subresource == "eviction" and .verb == "create")
	   | . + {node: $node_of["\(.objectRef.namespace)/\(.objectRef.name)"]}] as $ev
	| ([$ev[] | select(.node == null) | "\(.objectRef.namespace)/\(.objectRef.name)"]) as $unknown
	| (if ($ev | length) == 0 then "FAIL no eviction by drainer in the audit log"
	   elif ($unknown | length) == 0 then "ok every drainer eviction (\($ev | length)) has a known node"
	   else "FAIL evictions of pods on unknown nodes: \($unknown | join(", "))" end),
	  ([$ev | group_by(.node)[] | {node: .[0].node, from: (map(.requestReceivedTimestamp) | min), to: (map(.stageTimestamp) | max), n: length,
	     driver: any(.objectRef.namespace == "dra-system")}] | sort_by(.from)) as $w
	  | ("ok eviction windows: \($w | map("\(.node) \(.from[11:23])..\(.to[11:23]) (\(.n))") | join(", "))"),
	    (if ($w | map(.node)) == $order then "ok the eviction windows come in the order the nodes were drained (\($order | join(" -> ")))"
	     else "FAIL eviction windows in order \($w | map(.node) | join(" -> ")), drained in order \($order | join(" -> "))" end),
	    (if ([$w[] | select(.driver | not)] | length) == 0 then "ok each window ends with its driver eviction (taint strategy)"
	     else "FAIL no driver eviction for \([$w[] | select(.driver | not) | .node] | join(", "))" end),
	    ([range(1; $w | length) as $i | select($w[$i].from <= $w[$i - 1].to) | "\($w[$i - 1].node) and \($w[$i].node)"]) as $ov
	    | (if ($ov | length) == 0 then "ok no two eviction windows overlap"
	       else "FAIL overlapping eviction windows: \($ov | join("; "))" end)' "$e2e_tmp/par.audit"
# Each node evicted only after the previous one's uncordon was requested (our
# kubectl annotate, in the audit log as the admin's patch of that Node).
prev=
for n in "${order[@]}"; do
	if [ -n "$prev" ]; then
		jq_checks --arg prev "$prev" --arg n "$n" --arg after "${uncordon_at[$prev]}" --slurpfile where "$e2e_tmp/pods.watch" --argjson drivers "$driver_pods" '
			(($where | map({key, value: .node}) | from_entries) + ($drivers | map({key, value: .node}) | from_entries)) as $node_of
			| ([.[] | select((.userAgent | startswith("kubectl")) and .verb == "patch" and .objectRef.resource == "nodes"
				and .objectRef.name == $prev and .requestReceivedTimestamp >= $after)] | first | .stageTimestamp) as $u
			| ([.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction"
				and $node_of["\(.objectRef.namespace)/\(.objectRef.name)"] == $n)] | map(.requestReceivedTimestamp) | min) as $e
			| if $u == null then "FAIL no uncordon request for \($prev) in the audit log"
			  elif $e == null then "FAIL no eviction on \($n)"
			  elif $e > $u then "ok \($n)'"'"'s first eviction (\($e[11:23])) came after \($prev)'"'"'s uncordon request (\($u[11:23]))"
			  else "FAIL \($n) was evicted at \($e) before \($prev)'"'"'s uncordon request \($u)" end' "$e2e_tmp/par.audit"
	fi
	prev=$n
done
jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "leases")] as $l
	| ([$l[] | select(.verb | IN("create", "update", "patch", "delete")) | .objectRef.name] | unique) as $written
	| (if $written == ["drainer-slot-0"] then "ok drainer wrote only Lease drainer-slot-0 (\([$l[] | select(.verb | IN("create", "update", "patch", "delete")) | .verb] | group_by(.) | map("\(.[0]) \(length)") | join(", ")))"
	   else "FAIL Leases written by drainer: \($written | join(", "))" end),
	  ([$l[] | select(.objectRef.namespace != "'"$lease_ns"'")] | length) as $elsewhere
	  | (if $elsewhere == 0 then "ok every Lease request was in --lease-namespace" else "FAIL \($elsewhere) Lease requests outside --lease-namespace" end)' "$e2e_tmp/par.audit"
# Cluster mode: the claims and budgets are shared and outlive an engine by the linger
# (30 s): the three drains and three restores, seconds apart, borrow one list of each (a
# list is its first page: a request without continue=) and never two watches at once.
# (One serve --node per node lists its own, once per engine: nothing shared to check.)
if [ "${DRAINER_E2E_PARALLEL_MODE:-per-node}" = all-nodes ]; then
	jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and (.objectRef.resource | IN("resourceclaims", "poddisruptionbudgets"))
			and .objectRef.namespace == null)] as $r
		| ("resourceclaims", "poddisruptionbudgets") as $res
		| [$r[] | select(.objectRef.resource == $res and .verb == "list" and (.requestURI | test("[?&]continue=") | not))] as $lists
		| [$r[] | select(.objectRef.resource == $res and .verb == "watch") | [.stageTimestamp, -1], [.requestReceivedTimestamp, 1]]
		  | sort_by(.[0], .[1]) | [foreach .[] as $x (0; . + $x[1])] | (max // 0) as $open
		| (if ($lists | length) == 1 then "ok \($res): listed once cluster-wide for the 3 drains and 3 restores (shared, lingering)"
		   else "FAIL \($res): listed \($lists | length) times cluster-wide for the 3 drains and 3 restores (one expected: shared, lingering)" end),
		  (if $open <= 1 then "ok \($res): at most one watch open at a time" else "FAIL \($res): \($open) watches open at once" end)' "$e2e_tmp/par.audit"
fi
# With node patch bodies in the audit log (a policy at level Request for nodes),
# drainer's own cordon .. uncordon windows, from its patches.
if jq -e 'any(.[]; (.userAgent | startswith("drainer/")) and .verb == "patch" and .objectRef.resource == "nodes" and .requestObject != null)' "$e2e_tmp/par.audit" >/dev/null; then
	jq_checks '
		[.[] | select((.userAgent | startswith("drainer/")) and .verb == "patch" and .objectRef.resource == "nodes" and .objectRef.subresource == null)
		 | {node: .objectRef.name, at: .requestReceivedTimestamp, done: .stageTimestamp, code: .responseStatus.code,
		    cordon: (.requestObject.spec.unschedulable == true),
		    uncordon: ((.requestObject.spec // {}) | has("unschedulable") and .unschedulable != true),
		    state: (.requestObject.metadata.annotations["drainer.io/state"] // null),
		    cleared: ((.requestObject.metadata.annotations // {}) | has("drainer.io/state") and .["drainer.io/state"] == null)}
		 | select(.code < 300)] as $p
		| [$p | group_by(.node)[] | {node: .[0].node,
			from: ([.[] | select(.cordon or (.state != null and .state != "waiting")) | .at] | min),
			to: ([.[] | select(.uncordon or .cleared) | .done] | max)}] | sort_by(.from) as $w
		| ("ok from drainer patches: \($w | map("\(.node) \(.from[11:23] // "?")..\(.to[11:23] // "?")") | join(", "))"),
		  ([$w[] | select(.from == null or .to == null) | .node]) as $open
		  | (if ($open | length) == 0 then "ok each node has a cordon and an uncordon patch" else "FAIL no cordon or uncordon patch for \($open | join(", "))" end),
		  ([range(1; $w | length) as $i | select($w[$i].from <= $w[$i - 1].to) | "\($w[$i - 1].node) and \($w[$i].node)"]) as $ov
		  | (if ($ov | length) == 0 then "ok audit log: drainer never cordoned a node before the one out before was uncordoned"
		     else "FAIL audit log: cordon-to-uncordon windows overlap: \($ov | join("; "))" end)' "$e2e_tmp/par.audit"
else
	echo "  (the audit policy logs node patches without bodies: the cordon timeline comes from the Node watch above)"
fi

# 5. A phase written by hand takes no shortcut past --max-parallel (hardening item 5):
# while node-2 holds the only slot (a Lease the test writes and renews, as a live holder
# does), node-3 asked to drain with drainer.io/state=cordon already on it must wait:
# not cordoned, nothing evicted, its phase left as written (only drainer.io/message
# says why); once the slot is free it drains.
lease_obj() { # HOLDER: drainer-slot-0 held by HOLDER ("" free), renewed now
	kubectl -n "$lease_ns" get lease drainer-slot-0 -o json 2>/dev/null | jq -c --arg h "$1" --arg t "$(now_rfc3339)" \
		'del(.metadata.managedFields) | .spec.renewTime = $t | .spec.leaseDurationSeconds = 120
		 | if $h == "" then del(.spec.holderIdentity) else .spec.holderIdentity = $h | .spec.acquireTime = $t end'
}
lease_obj node-2 | kubectl replace -f - >/dev/null || fail "drainer-slot-0 held by node-2"
check_eq "drainer-slot-0 is held by node-2 (written by the test)" node-2 "$(kubectl -n "$lease_ns" get lease drainer-slot-0 -o jsonpath='{.spec.holderIdentity}')"
hw_start=$(audit_lines)
kubectl annotate --overwrite node node-3 drainer.io/request=drain drainer.io/state=cordon >/dev/null
echo "- node-2 holds the slot; kubectl annotate node node-3 drainer.io/request=drain drainer.io/state=cordon"
said_waiting() { node_drainer_anns node-3 | jq -e '.["drainer.io/message"] // "" | test("waiting for a drain slot \\(--max-parallel 1\\)")' >/dev/null; }
check "node-3 says it waits for a drain slot while node-2 holds the only one (drainer.io/message)" wait_until 20 said_waiting
for i in 1 2 3 4 5 6; do
	sleep 2
	lease_obj node-2 | kubectl replace -f - >/dev/null 2>&1 # renewed, as a live holder would
done
check_eq "12 s later node-3 is still schedulable, untainted, and its phase is the one written (cordon)" "false false cordon" \
	"$(node_unschedulable node-3) $(node_tainted node-3) $(node_state node-3)"
sleep 1
audit_window "$hw_start" "$e2e_tmp/hw.audit"
jq_checks '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction")] | length as $n
	| if $n == 0 then "ok no eviction while node-3 waited for the slot" else "FAIL \($n) evictions while node-3 waited for the slot" end' "$e2e_tmp/hw.audit"
lease_obj "" | kubectl replace -f - >/dev/null || fail "releasing drainer-slot-0"
echo "- the test releases drainer-slot-0"
check "node-3 then drains (drainer.io/state=drained)" wait_until 90 state_is node-3 drained
check_eq "... holding drainer-slot-0" node-3 "$(kubectl -n "$lease_ns" get lease drainer-slot-0 -o jsonpath='{.spec.holderIdentity}')"
kubectl annotate --overwrite node node-3 drainer.io/request=uncordon >/dev/null
check "node-3 back in service" wait_until 90 node_restored node-3
if ! node_restored node-3; then for d in "${daemons[@]}"; do serve_log "$d" 20 'node-3|slots:'; done; fi

for d in "${daemons[@]}"; do
	serve_stop "$d"
	check_eq "serve ($d) exits 0 on SIGTERM" 0 "$serve_rc"
done
finish
