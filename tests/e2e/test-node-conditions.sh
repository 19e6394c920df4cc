#!/usr/bin/env bash
# --node-conditions mirrors a drain in the Node lifecycle conditions of
# KEP-5683 (Kubernetes 1.37, gate NodeLifecycleConditions; the conditions are plain
# NodeConditions that "the admin is responsible for setting and clearing", so any
# release stores them), as upstream tools will read them. From what the API server
# saw: DrainInProgress=True went on (a strategic merge patch of nodes/node-1/status)
# before the first eviction and stayed on every version of the Node until the drain
# was done, through the kubelet's own status updates; once drained, Drained=True and
# DrainInProgress=False; after the uncordon both False (reason DrainerRestored), the
# kubelet's conditions untouched; two status patches per drain, two per uncordon. On
# 1.37 and newer with the gate NodeLifecycleConditions on (checked on the API server and
# the kubelet).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1

cleanup_conditions() {
	reset_node "$node"
	# the conditions go (strategic merge patch: delete by type)
	kubectl patch node "$node" --subresource=status --type strategic \
		-p '{"status":{"conditions":[{"type":"DrainInProgress","$patch":"delete"},{"type":"Drained","$patch":"delete"}]}}' >/dev/null 2>&1
	demo
}
e2e_cleanup_hooks+=(cleanup_conditions)
demo || { fail "demo workload"; finish; exit 1; }

# The Node watch records its two lifecycle conditions too.
node_watch_jq='{rv: .metadata.resourceVersion, state: (.metadata.annotations["drainer.io/state"] // ""),
	unsched: (.spec.unschedulable // false),
	dip: ([.status.conditions // [] | .[] | select(.type == "DrainInProgress") | .status][0] // ""),
	drained: ([.status.conditions // [] | .[] | select(.type == "Drained") | .status][0] // ""),
	ready: ([.status.conditions // [] | .[] | select(.type == "Ready") | .status][0] // "")}'
conditions() { # NODE: "DrainInProgress/reason Drained/reason Ready"
	kubectl get node "$1" -o json | jq -r '[.status.conditions // [] | .[] | {(.type): "\(.status)/\(.reason)"}] | add
		| "\(.DrainInProgress // "-") \(.Drained // "-") \(.Ready // "-" | split("/")[0])"'
}
# status_patches FILE: drainer's accepted patches of nodes/$node/status in an audit window.
status_patches() {
	jq --arg n "$node" '[.[] | select(.verb == "patch" and .objectRef.resource == "nodes" and .objectRef.name == $n
		and .objectRef.subresource == "status" and (.userAgent | startswith("drainer/")) and .responseStatus.code == 200)] | length' "$1"
}

# On 1.37 and newer the cluster runs with the gate on (tests/cluster/up), the API server
# and every kubelet; it only names the conditions there (nothing in 1.37.2 sets or reads
# them), which is why any release stores them and the test runs on every release.
kube_minor=$(echo "${e2e_kube_version:-1.37}" | cut -d. -f2)
if [ "$kube_minor" -ge 37 ]; then
	gate_on_apiserver() {
		local metrics
		metrics=$("$KUBECTL" get --raw /metrics) || return 1
		grep -q '^kubernetes_feature_enabled{name="NodeLifecycleConditions",stage="ALPHA"} 1$' <<<"$metrics"
	}
	check "Kubernetes $e2e_kube_version: the API server runs with NodeLifecycleConditions on" gate_on_apiserver
	if [ "$e2e_nodes" = real ]; then
		# The kubelet's own configuration (/configz), asked as the API server asks kubelets
		# (its client certificate; the node proxy refuses loopback addresses).
		gate_on_kubelet() {
			local at pki=$DRAINER_CLUSTER_DIR/pki
			at=$("$KUBECTL" get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}:{.status.daemonEndpoints.kubeletEndpoint.Port}') || return 1
			curl -sf --cacert "$pki/ca.crt" --cert "$pki/kubelet-client.crt" --key "$pki/kubelet-client.key" \
				"https://$at/configz" | jq -e '.kubeletconfig.featureGates.NodeLifecycleConditions == true' >/dev/null
		}
		check "... and $node's kubelet" gate_on_kubelet
	fi
fi
echo "  before: $(conditions "$node")"
node_watch_start "$node" "$e2e_tmp/watch.jsonl"
drainer_run drain drain "$node" --node-conditions --timeout 90s
check_rc "drain --node-conditions" 0 drain
drain_from=$run_start
sleep 1
node_watch_stop
audit_window "$drain_from" "$e2e_tmp/drain.audit"
got=$(conditions "$node")
echo "  drained: $got"
check_eq "drained: DrainInProgress False, Drained True (reason DrainerDrained), Ready True" \
	"False/DrainerDrained True/DrainerDrained True" "$got"
check_eq "drain: two status patches (draining, drained)" 2 "$(status_patches "$e2e_tmp/drain.audit")"
jq_checks --arg n "$node" '
	[.[] | select(.objectRef.subresource == "status" and .verb == "patch" and (.userAgent | startswith("drainer/")))][0] as $s
	| [.[] | select(.objectRef.subresource == "eviction" and .verb == "create" and (.userAgent | startswith("drainer/")))][0] as $ev
	| if $s == null or $ev == null then "FAIL audit log: a status patch (\($s != null)) and an eviction (\($ev != null)) of drainer expected"
	  elif $s.requestReceivedTimestamp < $ev.requestReceivedTimestamp
	  then "ok audit log: DrainInProgress went on (\($s.requestReceivedTimestamp)) before the first eviction (\($ev.requestReceivedTimestamp))"
	  else "FAIL audit log: the first eviction (\($ev.requestReceivedTimestamp)) came before the status patch (\($s.requestReceivedTimestamp))" end' "$e2e_tmp/drain.audit"
echo "  the kubelet of $node patched its status $(jq --arg n "$node" '[.[] | select(.objectRef.subresource == "status" and .verb == "patch"
	and .objectRef.name == $n and (.user.username | startswith("system:node:")))] | length' "$e2e_tmp/drain.audit") times during the drain"
jq -s '.' "$e2e_tmp/watch.jsonl" >"$e2e_tmp/watch.json"
jq_checks '
	(map(.dip == "True") | index(true)) as $on
	| (map(.state == "drained") | index(true)) as $done
	| if $on == null then "FAIL Node watch: no version with DrainInProgress=True (\(length) versions)"
	  elif $done == null then "FAIL Node watch: the drain never reached drained"
	  elif ([.[$on:$done][] | select(.dip != "True")] | length) > 0
	  then "FAIL Node watch: DrainInProgress left True between its start and drained: \([.[$on:$done][] | select(.dip != "True") | .rv])"
	  elif .[$on].state == "" then "FAIL Node watch: DrainInProgress=True on a Node without a drain recorded"
	  else "ok Node watch: DrainInProgress=True from phase \(.[$on].state) on, in each of the \($done - $on) versions until drained (Ready \([.[$on:$done][].ready] | unique | join(",")))" end,
	(map(.drained == "True") | index(true)) as $d
	| if $d != null and .[$d].state == "drained" then "ok Node watch: Drained=True only once drainer.io/state=drained"
	  else "FAIL Node watch: Drained=True at state \(if $d == null then "never" else .[$d].state end)" end' "$e2e_tmp/watch.json"

drainer_run uncordon uncordon "$node" --node-conditions --timeout 90s
check_rc "uncordon --node-conditions" 0 uncordon
audit_window "$run_start" "$e2e_tmp/uncordon.audit"
got=$(conditions "$node")
echo "  restored: $got"
check_eq "restored: both False (reason DrainerRestored), Ready True" \
	"False/DrainerRestored False/DrainerRestored True" "$got"
check_eq "uncordon: two status patches (restoring, restored)" 2 "$(status_patches "$e2e_tmp/uncordon.audit")"
check_eq "the node is schedulable again, drainer's annotations gone" "false 0" \
	"$(kubectl get node "$node" -o json | jq -r '"\(.spec.unschedulable // false) \([.metadata.annotations // {} | keys[] | select(startswith("drainer.io/"))] | length)"')"

# Without the flag nothing writes them: a drain leaves them as they are.
drainer_run plain drain "$node" --timeout 90s
check_rc "drain without --node-conditions" 0 plain
audit_window "$run_start" "$e2e_tmp/plain.audit"
check_eq "drain without --node-conditions: no status patch" 0 "$(status_patches "$e2e_tmp/plain.audit")"
check_eq "... and the conditions as the uncordon left them" "False/DrainerRestored False/DrainerRestored True" "$(conditions "$node")"
finish
