#!/usr/bin/env bash
# The DeviceTaintRules drainer deletes and the names it gives them (hardening items 2
# and 6), with real tokens on the real control plane (DeviceTaintRules served; skipped
# otherwise). deploy/'s per-node ServiceAccount with its admission policies and
# cluster mode's drainer-cluster are applied, no drainer pod:
# - the attack: node-1's own (Node-bound) token writes drainer.io/ annotations on node-1
#   that name an admin's DeviceTaintRule quarantining a GPU of node-2
#   (drainer.io/taint-rules.gpu.example.com) as if a driver drain were done; then
#   `drainer uncordon node-1 --driver gpu.example.com --driver-stop none` as
#   drainer-cluster: the API server saw drainer read the rule and never delete it; the
#   rule is there with the same uid; a Warning Event DrainerForeignObject on node-1 names
#   it; the uncordon completes and no drainer.io/ key is left;
# - a squatted name: a rule named as drainer names node-1's (drainer-6-node-1-...) with
#   another node's content: `drain node-1 --driver` as drainer-cluster fails naming it,
#   evicts nothing and records no drained state; its uncordon leaves the rule alone;
# - drainer's own: the same drain without the squat creates drainer-6-node-1-... and its
#   uncordon deletes it (read first, then one DELETE, by drainer-cluster).
source "$(dirname "$0")/lib.sh"
need_drainer
node=node-1
drv=gpu.example.com
own=$(rule_prefix "$node")$drv-0
admin_rule=e2e-admin-quarantine-bad-gpu

if ! kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null | grep -qx devicetaintrules.resource.k8s.io; then
	echo "  skipped: the API server serves no DeviceTaintRule"
	finish
	exit 0
fi
dtr_api=$(kubectl api-resources --api-group resource.k8s.io --no-headers 2>/dev/null |
	awk '$1 == "devicetaintrules" { for (i = 2; i <= NF; i++) if ($i ~ /^resource\.k8s\.io\//) print $i }')

# deploy/'s ServiceAccounts, RBAC and policies (no DaemonSet, no Deployment: nothing runs
# drainer but this script); removed at the end unless they were there before.
ns_settled drainer-system || fail "namespace drainer-system still terminating after 120 s"
had_ns=$(kubectl get namespace drainer-system -o name 2>/dev/null)
manifests=(-f "$e2e_root/deploy/serviceaccount.yaml" -f "$e2e_root/deploy/node-policy.yaml" -f "$e2e_root/deploy/cluster-mode/serviceaccount.yaml")
cleanup_trust() {
	kubectl delete devicetaintrule "$admin_rule" "$own" --ignore-not-found >/dev/null 2>&1
	reset_node "$node"
	demo
	if [ -z "$had_ns" ]; then
		kubectl delete "${manifests[@]}" --ignore-not-found >/dev/null 2>&1
		kubectl delete -k "$e2e_root/deploy/base" --ignore-not-found >/dev/null 2>&1
	fi
}
e2e_cleanup_hooks+=(cleanup_trust)
{ kubectl apply -k "$e2e_root/deploy/base" && kubectl apply "${manifests[@]}"; } >"$e2e_tmp/apply.out" 2>&1
check_eq "deploy/base, the per-node ServiceAccount and its policies, drainer-cluster applied" 0 $?
n1kc=$e2e_tmp/node-1.kubeconfig ckc=$e2e_tmp/cluster.kubeconfig
mkkc "$(kubectl -n drainer-system create token drainer --bound-object-kind Node --bound-object-name "$node" --duration=10m)" "$n1kc"
mkkc "$(kubectl -n drainer-system create token drainer-cluster --duration=10m)" "$ckc"
k1() { "$KUBECTL" --kubeconfig "$n1kc" "$@"; }
# the policies are in force once a write they refuse is refused
policy_on() { ! k1 annotate --dry-run=server node node-2 drainer.io/e2e=1 >/dev/null 2>&1; }
check "the admission policies are in force (node-1's token may not annotate node-2)" wait_until 30 policy_on
reset_node "$node"
demo

rule_json() { # NAME NODE-ANNOTATION POOL [DEVICE]: a NoSchedule DeviceTaintRule of gpu.example.com
	printf '{"apiVersion":"%s","kind":"DeviceTaintRule","metadata":{"name":"%s","labels":{"app.kubernetes.io/managed-by":"drainer"},"annotations":{"drainer.io/node":"%s"}},"spec":{"deviceSelector":{"driver":"%s","pool":"%s"%s},"taint":{"key":"drainer.io/draining","effect":"NoSchedule"}}}' \
		"$dtr_api" "$1" "$2" "$drv" "$3" "${4:+,\"device\":\"$4\"}"
}
rule_uid() { kubectl get devicetaintrule "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
# requests of drainer on DeviceTaintRule NAME in an audit window: "verb code" lines
rule_requests() { # FILE NAME
	jq -r --arg n "$2" '.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules" and .objectRef.name == $n)
		| "\(.verb) \(.responseStatus.code) \(.user.username)"' "$1"
}

# --- the attack: node-1's token names an admin's rule of node-2 ------------------------
# The admin's quarantine of a faulty GPU of node-2 (no drainer label or annotation; a
# device that does not exist, so that it keeps nothing off while the test runs).
printf '{"apiVersion":"%s","kind":"DeviceTaintRule","metadata":{"name":"%s"},"spec":{"deviceSelector":{"driver":"%s","pool":"node-2","device":"gpu-e2e-bad"},"taint":{"key":"example.com/faulty","effect":"NoSchedule"}}}' \
	"$dtr_api" "$admin_rule" "$drv" | kubectl create -f - >/dev/null
admin_uid=$(rule_uid "$admin_rule")
check "the admin's rule $admin_rule exists" test -n "$admin_uid"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
k1 annotate node "$node" --overwrite "drainer.io/state.$drv=drained" "drainer.io/state-since.$drv=$now" \
	"drainer.io/started-at.$drv=$now" "drainer.io/taint-rules.$drv=$admin_rule" >"$e2e_tmp/forge.out" 2>&1
check_eq "node-1's own token writes drainer.io/taint-rules.$drv=$admin_rule on node-1 (the policy lets it: its own Node's drainer.io/ keys)" 0 $?
delete_node_events "$node"
drainer_run attack uncordon "$node" --driver "$drv" --driver-stop none --kubeconfig "$ckc" --timeout 60s
check_rc "uncordon $node --driver $drv --driver-stop none as drainer-cluster completes" 0 attack
sleep 1
audit_window "$run_start" "$e2e_tmp/audit-attack.json"
check_eq "drainer read the rule back (get 200 by drainer-cluster) and sent nothing else for it" \
	"get 200 system:serviceaccount:drainer-system:drainer-cluster" "$(rule_requests "$e2e_tmp/audit-attack.json" "$admin_rule" | sort -u)"
check_eq "no DeviceTaintRule was deleted by drainer" "" \
	"$(jq -r '.[] | select((.userAgent | startswith("drainer/")) and .objectRef.resource == "devicetaintrules" and .verb == "delete") | .objectRef.name' "$e2e_tmp/audit-attack.json")"
check_eq "the admin's rule is still there, the same object (uid)" "$admin_uid" "$(rule_uid "$admin_rule")"
node_events "$node" "$e2e_tmp/events-attack.json"
jq_checks --arg r "$admin_rule" '[.[] | select(.reason == "DrainerForeignObject")] as $e
	| if ($e | length) == 1 and $e[0].type == "Warning" and ($e[0].message | contains($r)) and ($e[0].message | contains("left alone"))
	  then "ok a Warning Event DrainerForeignObject on node-1 names \($r): \($e[0].message[0:140])..."
	  else "FAIL Events DrainerForeignObject: \($e)" end' "$e2e_tmp/events-attack.json"
check "drainer's output names the rule left alone" grep -q "$admin_rule" "$e2e_tmp/attack.out" "$e2e_tmp/attack.err"
check_eq "no drainer.io/ annotation left on node-1 (the record dropped)" "{}" "$(node_drainer_anns "$node")"
kubectl delete devicetaintrule "$admin_rule" >/dev/null

# --- a squatted name: drainer's name for node-1, another node's rule ------------------
rule_json "$own" node-2 node-2 | kubectl create -f - >/dev/null
squat_uid=$(rule_uid "$own")
check "a rule named $own (drainer's name for node-1) selecting node-2's pool, annotation node-2" test -n "$squat_uid"
drainer_run squat drain "$node" --driver "$drv" --driver-stop none --kubeconfig "$ckc" --timeout 60s
check "drain $node --driver $drv as drainer-cluster fails" test "$run_rc" != 0
check "... naming the squatted rule" grep -q "DeviceTaintRule $own already exists and is not drainer's rule" "$e2e_tmp/squat.out" "$e2e_tmp/squat.err"
audit_window "$run_start" "$e2e_tmp/audit-squat.json"
check_eq "... after a create answered 409 it read the rule (create 409, get 200)" "create 409 get 200" \
	"$(rule_requests "$e2e_tmp/audit-squat.json" "$own" | awk '{print $1, $2}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "... and evicted nothing" 0 \
	"$(jq '[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.subresource == "eviction")] | length' "$e2e_tmp/audit-squat.json")"
check "... the driver is not recorded out of service (state.$drv is not drained)" \
	test "$(node_ann "$node" "drainer.io/state.$drv")" != drained
drainer_run squat-undo uncordon "$node" --driver "$drv" --driver-stop none --kubeconfig "$ckc" --timeout 60s
check_rc "its uncordon completes" 0 squat-undo
check_eq "... and leaves the squatted rule alone (same uid)" "$squat_uid" "$(rule_uid "$own")"
check_eq "no drainer.io/ annotation left on node-1" "{}" "$(node_drainer_anns "$node")"
kubectl delete devicetaintrule "$own" >/dev/null

# --- drainer's own rule: created, and deleted by its uncordon -------------------------
drainer_run own drain "$node" --driver "$drv" --driver-stop none --kubeconfig "$ckc" --timeout 60s
check_rc "drain $node --driver $drv --driver-stop none as drainer-cluster" 0 own
check_eq "drainer's rule $own selects $drv pool $node, annotation drainer.io/node=$node" "$drv $node $node NoSchedule" \
	"$(kubectl get devicetaintrule "$own" -o json | jq -r '"\(.spec.deviceSelector.driver) \(.spec.deviceSelector.pool) \(.metadata.annotations["drainer.io/node"]) \(.spec.taint.effect)"')"
check_eq "drainer.io/taint-rules.$drv names it" "$own" "$(node_ann "$node" "drainer.io/taint-rules.$drv")"
drainer_run own-undo uncordon "$node" --driver "$drv" --driver-stop none --kubeconfig "$ckc" --timeout 60s
check_rc "uncordon $node --driver $drv as drainer-cluster" 0 own-undo
audit_window "$run_start" "$e2e_tmp/audit-own.json"
check_eq "... read it, then deleted it once (get 200, delete 200)" "get 200 delete 200" \
	"$(rule_requests "$e2e_tmp/audit-own.json" "$own" | awk '{print $1, $2}' | tr '\n' ' ' | sed 's/ $//')"
check_eq "... the rule is gone" "" "$(rule_uid "$own")"
check_eq "no drainer.io/ annotation left on node-1" "{}" "$(node_drainer_anns "$node")"
finish
