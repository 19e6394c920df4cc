#!/usr/bin/env bash
# Karpenter's own termination (v1.15.0: its NodeClaim lifecycle and node termination
# controllers) against the real kubelets, with drainer's guard on the DRA driver: needs a
# cluster started with DRAINER_CLUSTER_PEERS=karpenter (tests/cluster/karpenter.sh:
# NodeClaims node-N bound to the real kubelets' Nodes, Initialized). Judged from the API
# server's audit log (Karpenter's requests are the user karpenter's) and its objects.
#  1. the guard installed (deploy/driver-guard, the sidecar from
#     DRAINER_E2E_POD_IMAGE, default drainer.test/drainer:dev: the build's drainer);
#     2 claim holders (a ResourceClaimTemplate) and a plain pod on node-2; NodeClaim node-2
#     deleted: Karpenter taints the Node karpenter.sh/disrupted, evicts the holders and the
#     plain pod (its first tier), then the driver (system-node-critical DaemonSet: its last
#     tier); every claim is released (deleted by the resourceclaim controller) before the
#     driver pod ends (the kubelet's final DELETE, after the guard's preStop); the Node is
#     deleted last (Karpenter removes its finalizer after the claims' release, once the
#     driver pod is terminal). Timed: NodeClaim deleted -> Node gone.
#  2. NodeClaim node-2 made again with spec.terminationGracePeriod 15s, claim holders that
#     need 40 s to stop (preStop sleep 40, terminationGracePeriodSeconds 60): Karpenter
#     deletes them (not evicts) with a grace period cut to what is left of the 15 s; the
#     time until the Node is gone is measured; what happened to the claims and the driver
#     is printed from the audit log; first `drainer plan node-2` names the 15 s as shorter
#     than the drain needs, and `drainer doctor` fails it (karpenter-grace) (part 1's plan,
#     of a NodeClaim without one, warns of nothing after reading the NodeClaims).
#  3. the guard removed: part 1 again (timed, the order printed).
#  4. the driver DaemonSet tolerating karpenter.sh/disrupted:NoSchedule: drainer doctor says
#     what that means there (karpenter-disruption), and that no NodeClaim's grace period is
#     short of its node's drain (karpenter-grace); Karpenter never evicts the driver pod
#     (no eviction of it in the audit log) and the Node goes with it.
# After each part node-2 comes back (its kubelet restarted: a 1.37 kubelet whose Node was
# deleted does not register it again) and its NodeClaim is made again as up made it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$e2e_root/tests/cluster/karpenter.sh"

node=node-2
ns=karp-peer
manifest=$e2e_tmp/dra-driver.yaml
"$e2e_root/tests/cluster/dra-manifest" "$e2e_dra_api" <"$e2e_root/tests/cluster/manifests/dra-driver.yaml" >"$manifest"

if ! kubectl get nodeclaim "$node" >/dev/null 2>&1; then
	echo "  skipped: no NodeClaim $node (start the cluster with DRAINER_CLUSTER_PEERS=karpenter)"
	finish
	exit 0
fi
need_drainer

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
node_there() { kubectl get node "$node" >/dev/null 2>&1; }
node_gone() { ! node_there; }
nodeclaim_gone() { ! kubectl get nodeclaim "$node" >/dev/null 2>&1; }
ds_has_guard() { kubectl -n dra-system get ds dra-driver -o json | jq -e '(.spec.template.spec.initContainers // []) | length > 0' >/dev/null; }
ds_tolerates_disrupted() { kubectl -n dra-system get ds dra-driver -o json | jq -e '[.spec.template.spec.tolerations // [] | .[] | select(.key == "karpenter.sh/disrupted")] | length > 0' >/dev/null; }
node_disrupted() { kubectl get node "$node" -o json | jq -e '[.spec.taints // [] | .[] | select(.key == "karpenter.sh/disrupted" and .effect == "NoSchedule")] | length > 0' >/dev/null; }
rollout() { kubectl -n dra-system rollout status ds/dra-driver --timeout=180s >/dev/null; }

# restore_node [TGP]: node-2 back as up made it (its kubelet restarted if its Node does
# not come back within 10 s; the InternalIP and the uninitialized taint as up's
# init_real_nodes does for a new Node), and its NodeClaim made again (with
# spec.terminationGracePeriod TGP if given), Launched, Registered and Initialized.
restore_node() {
	wait_until 120 nodeclaim_gone || { fail "NodeClaim $node still there"; return 1; }
	node_back "$node" || return 1
	karpenter_nodeclaim_yaml "${node#node-}" "${1:-}" | kubectl apply -f - >/dev/null || { fail "NodeClaim $node made again"; return 1; }
	wait_until 120 karpenter_nodeclaims_ready "$node" || { fail "NodeClaim $node Initialized again"; return 1; }
}

guard_on() {
	local kdir=$e2e_tmp/kustomize pod_image=${DRAINER_E2E_POD_IMAGE:-drainer.test/drainer:dev}
	guard_kustomize "$kdir" "$manifest" "$pod_image"
	# drainer.test/drainer:dev runs the build's drainer with the runtime's environment,
	# whose HOME (the host user's, unreadable to the sidecar's user 65532) would make it
	# read ~/.kube/config instead of its in-cluster config: HOME elsewhere.
	[ "$pod_image" != drainer.test/drainer:dev ] || printf '%s\n' 'patches:' \
		'- target: {group: apps, version: v1, kind: DaemonSet, name: dra-driver}' \
		'  patch: |-' '    - op: add' '      path: /spec/template/spec/initContainers/0/env/-' \
		'      value: {name: HOME, value: /nonexistent}' >>"$kdir/overlay/kustomization.yaml"
	kubectl apply -k "$kdir/overlay" >/dev/null && rollout
}
# guard_off [tolerate]: the driver as up applied it (with "tolerate": tolerating
# karpenter.sh/disrupted:NoSchedule), without the guard's RBAC.
guard_off() {
	if [ "${1:-}" = tolerate ]; then
		"$KUBECTL" create --dry-run=client -o json -f "$manifest" | jq -c 'if .kind == "List" then .items[] else . end | if .kind == "DaemonSet" then
			.spec.template.spec.tolerations = ((.spec.template.spec.tolerations // []) + [{key: "karpenter.sh/disrupted", operator: "Exists", effect: "NoSchedule"}]) else . end' |
			"$KUBECTL" apply -f - >/dev/null
	else
		kubectl apply -f "$manifest" >/dev/null
	fi
	rollout
	kubectl delete clusterrolebinding,clusterrole drainer-guard --ignore-not-found >/dev/null
}

cleanup() {
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
	# node-2 and its NodeClaim as up made them; a NodeClaim left deleting goes first.
	if ! kubectl get nodeclaim "$node" >/dev/null 2>&1 || [ -n "$(kubectl get nodeclaim "$node" -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
		[ -n "$(kubectl get nodeclaim "$node" -o jsonpath='{.spec.terminationGracePeriod}')" ]; then
		kubectl delete nodeclaim "$node" --timeout=180s >/dev/null 2>&1
		restore_node >/dev/null
	fi
	if ds_has_guard || ds_tolerates_disrupted || kubectl get clusterrole drainer-guard >/dev/null 2>&1; then
		guard_off
	fi
}
e2e_cleanup_hooks+=(cleanup)

# workload HOLDER_TGP HOLDER_PRESTOP: 2 claim holders (generated claims) and 1 plain pod
# on node-2.
workload() {
	{
		echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
		echo ---
		claim_template "$ns" gpu
		cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: holder, namespace: $ns}
spec:
  replicas: 2
  selector: {matchLabels: {app: holder}}
  template:
    metadata: {labels: {app: holder}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      terminationGracePeriodSeconds: $1
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
      containers:
      - name: main
        image: registry.example.com/inference:v1
        resources: {claims: [{name: gpu}]}
        lifecycle: {preStop: {sleep: {seconds: $2}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: plain, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
      terminationGracePeriodSeconds: 2
      containers:
      - {name: main, image: registry.example.com/web:v1}
EOF
	} | kubectl apply -f - >/dev/null
}
workload_running() {
	[ "$(kubectl -n "$ns" get pods --field-selector "spec.nodeName=$node,status.phase=Running" -o json |
		jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length')" = 3 ] &&
		[ "$(claims_on_node "$node" | jq --arg ns "$ns" '[.[] | select(.ns == $ns)] | length')" = 2 ]
}

# terminate LABEL: deletes NodeClaim node-2, waits until its Node is gone; the audit
# window of it in $e2e_tmp/LABEL.json, its order lines in $e2e_tmp/LABEL.txt (time, who,
# verb, resource, ns/name), the time to the Node's end in t_gone.
terminate() {
	local from t0
	from=$(audit_lines)
	t0=$(date +%s.%N)
	kubectl delete nodeclaim "$node" --wait=false >/dev/null
	t_gone=
	disrupted=no
	wait_until 30 node_disrupted && disrupted=yes
	if wait_until 300 node_gone; then
		t_gone=$(since "$t0")
	else
		fail "$1: Node $node still there 300 s after its NodeClaim's deletion: $(kubectl get nodeclaim "$node" -o json 2>/dev/null | jq -c '[.status.conditions[]? | select(.status != "True") | {type, reason}]')"
	fi
	wait_until 60 nodeclaim_gone
	sleep 2
	audit_window "$from" "$e2e_tmp/$1.json"
	jq -r --arg ns "$ns" --arg node "$node" '.[]
		| (if .user.username == "karpenter" then "karpenter" elif .user.username == "system:node:" + $node then "kubelet"
		   elif .user.username == "system:kube-controller-manager" then "kcm" else "other" end) as $who
		| select(.responseStatus.code < 300)
		| select(
		    (.objectRef.subresource == "eviction")
		    or (.verb == "delete" and .objectRef.resource == "pods" and (.objectRef.namespace == $ns or .objectRef.namespace == "dra-system"))
		    or (.verb == "delete" and .objectRef.resource == "resourceclaims" and .objectRef.namespace == $ns)
		    or (.verb == "patch" and .objectRef.resource == "nodes" and .objectRef.name == $node and $who == "karpenter")
		    or (.verb == "delete" and .objectRef.resource == "nodes" and .objectRef.name == $node))
		| "\(.requestReceivedTimestamp) \($who) \(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.namespace // "")/\(.objectRef.name)\(if .verb == "delete" and .objectRef.resource == "pods" then " grace=\(.requestObject.gracePeriodSeconds // "-")" else "" end)"' \
		"$e2e_tmp/$1.json" >"$e2e_tmp/$1.txt"
	sed 's/^/    audit: /' "$e2e_tmp/$1.txt"
}
first() { grep -n -m1 -- "$2" "$e2e_tmp/$1.txt" | cut -d: -f1; }
last() { grep -n -- "$2" "$e2e_tmp/$1.txt" | tail -n 1 | cut -d: -f1; }
lt() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" -lt "$2" ]; }
# ts_of RUN LINE: the audit time of an order line, in seconds.
ts_of() { sed -n "${2}p" "$e2e_tmp/$1.txt" | cut -d' ' -f1 | sed 's/Z$//' | { read -r t; date -u -d "$t" +%s.%N; }; }
gap() { awk -v a="$(ts_of "$1" "$2")" -v b="$(ts_of "$1" "$3")" 'BEGIN { printf "%.1f", b - a }'; }

# order_checks RUN: Karpenter's tiers, the claims' release and the Node's end.
order_checks() {
	local r=$1 l_holder l_plain l_driver_ev l_claims l_driver_end l_fin l_nodedel
	l_holder=$(last "$r" "karpenter create pods/eviction $ns/holder-")
	l_plain=$(last "$r" "karpenter create pods/eviction $ns/plain-")
	l_driver_ev=$(first "$r" "karpenter create pods/eviction dra-system/")
	l_claims=$(last "$r" "delete resourceclaims $ns/")
	l_driver_end=$(last "$r" "kubelet delete pods dra-system/")
	l_nodedel=$(first "$r" "karpenter delete nodes /$node")
	l_fin=$(last "$r" "karpenter patch nodes /$node")
	echo "    lines: holders..$l_holder plain..$l_plain claims..$l_claims driver evicted ${l_driver_ev:-never} driver ended ${l_driver_end:-never} node deleted $l_nodedel finalizer ${l_fin:-none}"
	check "$r: Karpenter deleted the Node (its NodeClaim's finalizer) first" lt "$l_nodedel" "${l_holder:-0}"
	check "$r: Karpenter evicted both claim holders" test "$(grep -c "karpenter create pods/eviction $ns/holder-" "$e2e_tmp/$r.txt")" -ge 2
	check "$r: ... and the plain pod" test -n "$l_plain"
	check "$r: Karpenter evicted the driver (its last tier: a system-node-critical DaemonSet pod) after the holders and the plain pod" \
		sh -c "[ -n '$l_driver_ev' ] && [ '$l_driver_ev' -gt '$l_holder' ] && [ '$l_driver_ev' -gt '$l_plain' ]"
	check "$r: every claim released (deleted) before the driver pod ended (the kubelet's final DELETE)" lt "$l_claims" "$l_driver_end"
	# (Karpenter's drain waits for pods that are not terminal: it goes on once the kubelet
	# reported the driver pod's terminal phase, which comes before the kubelet's DELETE.)
	check "$r: Karpenter removed the Node's finalizer after every claim was released" lt "$l_claims" "$l_fin"
	[ -z "$l_fin" ] || [ -z "$l_driver_end" ] ||
		echo "    the Node's finalizer removed $(gap "$r" "$l_driver_end" "$l_fin") s after the kubelet's DELETE of the driver pod (negative: before it, once the pod was terminal)"
	[ -z "$l_driver_ev" ] || [ -z "$l_claims" ] ||
		echo "    driver evicted $(gap "$r" "$l_driver_ev" "$l_claims") s before the last claim's deletion (negative: after)"
	[ -z "$l_driver_ev" ] || [ -z "$l_driver_end" ] ||
		echo "    driver pod held $(gap "$r" "$l_driver_ev" "$l_driver_end") s from its eviction to its end"
}

# KARPENTER_PEER_PARTS: which of the parts above run (default all; tests/run-all runs
# 1 and 4, the proofs, and leaves 2 and 3, measurements of about 2 minutes more, to a
# full run: it says so).
parts=${KARPENTER_PEER_PARTS:-1 2 3 4}
want_part() { [[ " $parts " == *" $1 "* ]]; }

# =====================================================================
echo "-- 1. with drainer's guard: NodeClaim $node deleted"
check "NodeClaim $node Initialized on $node" karpenter_nodeclaims_ready "$node"
check "the guard installed on dra-system/dra-driver (deploy/driver-guard)" guard_on
check "the driver runs on $node" wait_until 60 driver_running "$node"
ns_settled "$ns" || fail "namespace $ns still terminating after 120 s"
workload 10 2 || fail "workload"
check "2 claim holders and a plain pod Running on $node, 2 claims on it" wait_until 120 workload_running
l0=$(audit_lines)
"$DRAINER" plan "$node" -o json >"$e2e_tmp/plan1.json" 2>"$e2e_tmp/plan1.err"
check_eq "drainer plan $node: no warning (its NodeClaim has no terminationGracePeriod)" 0 \
	"$(jq -r '.warnings | length' "$e2e_tmp/plan1.json" 2>/dev/null || head -c 300 "$e2e_tmp/plan1.err")"
check "... having read Karpenter's NodeClaims (the audit log)" \
	bash -c "tail -n +$((l0 + 1)) '$AUDIT' | grep '\"userAgent\":\"drainer/' | grep -q '\"resource\":\"nodeclaims\"'"
terminate guarded
[ -n "$t_gone" ] && pass "with the guard: NodeClaim deleted -> Node gone $t_gone s"
t_guarded=$t_gone
order_checks guarded
check_eq "Karpenter tainted $node karpenter.sh/disrupted:NoSchedule while it drained" yes "$disrupted"

# =====================================================================
if want_part 2; then
	echo "-- 2. spec.terminationGracePeriod 15s, claim holders that need 40 s"
	restore_node 15s && pass "$node back, its NodeClaim with terminationGracePeriod 15s Initialized"
	kubectl -n "$ns" delete deploy holder plain --wait=true >/dev/null 2>&1
	wait_until 60 bash -c "[ -z \"\$($KUBECTL -n $ns get pods -o name)\" ]"
	workload 60 40 || fail "workload"
	check "2 slow claim holders and a plain pod Running on $node" wait_until 120 workload_running
	"$DRAINER" plan "$node" >"$e2e_tmp/plan.out" 2>&1
	sed -n '/^Warnings/,$p' "$e2e_tmp/plan.out" | sed 's/^/      /'
	check "drainer plan $node names the NodeClaim's terminationGracePeriod 15s as below the drain's need (holders' 60 s, then the driver's)" \
		grep -q "terminationGracePeriod 15s is shorter than this node's drain needs" "$e2e_tmp/plan.out"
	"$DRAINER" doctor -o json >"$e2e_tmp/doctor2.json" 2>"$e2e_tmp/doctor2.err"
	check "drainer doctor fails NodeClaim $node's terminationGracePeriod 15s as below the drain's need (karpenter-grace)" \
		jq -e --arg n "$node" '[.. | objects | select(.check? == "karpenter-grace" and .status == "FAIL" and .subject == $n
			and (.message | test("terminationGracePeriod 15s is shorter than a drain of the node needs")))] | length == 1' "$e2e_tmp/doctor2.json"
	terminate tgp
	[ -n "$t_gone" ] && pass "terminationGracePeriod 15s: NodeClaim deleted -> Node gone $t_gone s"
	t_tgp=$t_gone
	deletes=$(jq -r --arg ns "$ns" '[.[] | select(.user.username == "karpenter" and .verb == "delete" and .objectRef.resource == "pods" and .objectRef.namespace == $ns and (.objectRef.name | startswith("holder-")))
		| .requestObject.gracePeriodSeconds] | map(tostring) | join(",")' "$e2e_tmp/tgp.json")
	holders_deleted_cut() {
		jq -e --arg ns "$ns" '[.[] | select(.user.username == "karpenter" and .verb == "delete" and .objectRef.resource == "pods" and .objectRef.namespace == $ns and (.objectRef.name | startswith("holder-")))
		| select(.requestObject.gracePeriodSeconds < 60)] | length >= 2' "$e2e_tmp/tgp.json" >/dev/null
	}
	check "Karpenter deleted (not evicted) the claim holders, grace cut below their 60 s: [$deletes]" holders_deleted_cut
	check_eq "Karpenter evicted no claim holder (the eviction API and its PDBs bypassed)" 0 \
		"$(grep -c "karpenter create pods/eviction $ns/holder-" "$e2e_tmp/tgp.txt")"
	l_claims=$(last tgp "delete resourceclaims $ns/")
	l_driver_end=$(last tgp "kubelet delete pods dra-system/")
	l_holders_end=$(last tgp "kubelet delete pods $ns/holder-")
	echo "    lines: holders ended ${l_holders_end:-never} claims deleted ${l_claims:-never} driver ended ${l_driver_end:-never} (Node gone ${t_gone:-?} s)"
	if lt "${l_claims:-}" "${l_driver_end:-}"; then
		echo "    the claims were released before the driver pod ended"
	else
		echo "    the driver pod ended before the claims were released (or they never were while the Node was there)"
	fi
else
	echo "-- 2. a terminationGracePeriod shorter than the claim holders need: not run (KARPENTER_PEER_PARTS='$parts')"
fi

# =====================================================================
if want_part 3; then
	echo "-- 3. without the guard"
	restore_node && pass "$node back, its NodeClaim Initialized"
	check "the guard removed" guard_off
	kubectl -n "$ns" delete deploy holder plain --wait=true >/dev/null 2>&1
	wait_until 90 bash -c "[ -z \"\$($KUBECTL -n $ns get pods -o name)\" ]"
	workload 10 2 || fail "workload"
	check "2 claim holders and a plain pod Running on $node" wait_until 120 workload_running
	terminate unguarded
	[ -n "$t_gone" ] && pass "without the guard: NodeClaim deleted -> Node gone $t_gone s"
	t_unguarded=$t_gone
	l_driver_ev=$(first unguarded "karpenter create pods/eviction dra-system/")
	l_claims=$(last unguarded "delete resourceclaims $ns/")
	l_driver_end=$(last unguarded "kubelet delete pods dra-system/")
	echo "    lines: claims deleted ${l_claims:-never} driver evicted ${l_driver_ev:-never} driver ended ${l_driver_end:-never}"
	[ -z "$l_driver_ev" ] || [ -z "$l_driver_end" ] || echo "    driver pod ended $(gap unguarded "$l_driver_ev" "$l_driver_end") s after its eviction"
else
	echo "-- 3. without the guard: not run (KARPENTER_PEER_PARTS='$parts')"
fi

# =====================================================================
echo "-- 4. a driver DaemonSet that tolerates karpenter.sh/disrupted:NoSchedule"
restore_node && pass "$node back, its NodeClaim Initialized"
check "the driver DaemonSet tolerates karpenter.sh/disrupted:NoSchedule" guard_off tolerate
check "the driver runs on $node" wait_until 60 driver_running "$node"
"$DRAINER" doctor -o json >"$e2e_tmp/doctor4.json" 2>"$e2e_tmp/doctor4.err"
check "drainer doctor says what the toleration means on Karpenter's nodes (karpenter-disruption)" \
	jq -e '[.. | objects | select(.check? == "karpenter-disruption" and (.message | test("Karpenter never evicts them")))] | length > 0' "$e2e_tmp/doctor4.json"
check "drainer doctor read Karpenter's NodeClaims: none sets a terminationGracePeriod short of its node's drain (karpenter-grace)" \
	jq -e '[.. | objects | select(.check? == "karpenter-grace" and .status == "PASS")] | length == 1' "$e2e_tmp/doctor4.json"
terminate tolerated
[ -n "$t_gone" ] && pass "tolerating driver: NodeClaim deleted -> Node gone $t_gone s"
check_eq "Karpenter evicted no driver pod" 0 "$(grep -c "karpenter create pods/eviction dra-system/" "$e2e_tmp/tolerated.txt")"
check_eq "Karpenter deleted no driver pod" 0 "$(grep -c "karpenter delete pods dra-system/" "$e2e_tmp/tolerated.txt")"
restore_node && pass "$node back, its NodeClaim Initialized"
guard_off

echo "    timings (NodeClaim deleted -> Node gone): with the guard ${t_guarded:-?} s, without ${t_unguarded:-?} s; terminationGracePeriod 15s (holders needing 40 s) ${t_tgp:-?} s"
finish
