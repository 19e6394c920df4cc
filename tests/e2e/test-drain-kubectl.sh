#!/usr/bin/env bash
# Issue 16: kubectl drain's behaviour and habits, against the real control plane.
#
# 1. A namespace being deleted (node-3): its pod is still on the node while the
#    namespace is Terminating (a ValidatingAdmissionPolicy of this test keeps the
#    namespace controller from deleting it for a while). Every eviction is answered
#    403 NamespaceTerminating; drainer retries it (as kubectl's pkg/drain does) and
#    says so on the Node, until the namespace controller deletes the pod, then waits
#    for it and the drain completes (exit 0). From the audit log: only evictions,
#    every one answered 403, retried, no DELETE by drainer; the pod was deleted by the
#    namespace controller (kube-controller-manager).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
jqq() { jq -e "$@" >/dev/null; }

# ---- 1. a namespace being deleted ------------------------------------------------
node=node-3
ns=e2e-nsterm
policy=e2e-hold-pod-deletion
kcm_user=system:kube-controller-manager

cleanup_nsterm() {
	kubectl delete validatingadmissionpolicybinding "$policy" --ignore-not-found >/dev/null 2>&1
	kubectl delete validatingadmissionpolicy "$policy" --ignore-not-found >/dev/null 2>&1
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
	reset_node "$node"
}
e2e_cleanup_hooks+=(cleanup_nsterm)

echo "- 1. a pod whose namespace is being deleted"
check "$node starts clean" reset_node "$node"
audit_ns0=$(audit_lines)
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $ns, labels: {e2e.drainer.io/hold-pod-deletion: "true"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $policy}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {e2e.drainer.io/hold-pod-deletion: "true"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [pods]}
  validations:
  - expression: "request.userInfo.username != '$kcm_user'"
    message: "e2e: the namespace controller may not delete this pod yet"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $policy}
spec: {policyName: $policy, validationActions: [Deny]}
YAML
wait_until 30 kubectl -n "$ns" get serviceaccount default
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: held, namespace: $ns}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 5
  containers: [{name: c, image: registry.example.com/held:v1}]
YAML
held_phase() { kubectl -n "$ns" get pod held -o jsonpath='{.status.phase}' 2>/dev/null; }
held_running() { [ "$(held_phase)" = Running ]; }
check "the pod runs on $node" wait_until 60 held_running
# The policy is in force once a (server dry run) delete as the controller is denied.
policy_denies() { ! kubectl -n "$ns" delete pod held --as="$kcm_user" --dry-run=server >/dev/null 2>&1; }
check "the policy holds the namespace controller's deletes" wait_until 30 policy_denies
kubectl delete namespace "$ns" --wait=false >/dev/null
ns_terminating() { [ "$(kubectl get namespace "$ns" -o jsonpath='{.status.phase}')" = Terminating ]; }
check "namespace $ns is Terminating" wait_until 30 ns_terminating
held_not_deleting() { [ -z "$(kubectl -n "$ns" get pod held -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
check "... with its pod still there, not marked deleted" held_not_deleting

audit0=$(audit_lines)
(
	DRAINER_RUN_TIMEOUT=85 drainer_run nsterm drain "$node" --force --timeout 80s -o json
	echo "$run_rc" >"$e2e_tmp/nsterm.rc"
) &
drain_job=$!
# Two evictions answered 403 NamespaceTerminating (one retry), seen by the API server.
ns_refusals() {
	tail -n +"$audit0" "$AUDIT" | grep '"userAgent":"drainer/' |
		jq -c --arg ns "$ns" 'select(.stage == "ResponseComplete" and .objectRef.namespace == $ns and .objectRef.subresource == "eviction")' |
		jq -s '[.[] | select(.responseStatus.code == 403 and ((.responseStatus.details.causes // []) | any(.reason == "NamespaceTerminating")))] | length'
}
two_refusals() { [ "$(ns_refusals)" -ge 2 ]; }
check "the eviction was answered 403 NamespaceTerminating and retried" wait_until 40 two_refusals
node_names_held() { node_ann "$node" drainer.io/message | grep -q "namespaces being deleted: $ns/held"; }
check "the Node's drainer.io/message names $ns/held as waited for" wait_until 20 node_names_held
check "the drain is still running (not failed)" kill -0 "$drain_job"
# Let the namespace controller go on; a label change requeues the namespace at once.
kubectl delete validatingadmissionpolicybinding "$policy" >/dev/null
kubectl label namespace "$ns" e2e.drainer.io/poke="$(date +%s)" --overwrite >/dev/null 2>&1
wait "$drain_job"
check_eq "the drain ended with exit 0 (result done)" "0 done" \
	"$(cat "$e2e_tmp/nsterm.rc") $(jq -r .result "$e2e_tmp/nsterm.out" 2>/dev/null)"
check_eq "-o json names the pod it waited for" "[\"$ns/held\"]" \
	"$(jq -c '.waitedForNamespaceDeletion' "$e2e_tmp/nsterm.out" 2>/dev/null)"
audit_window "$audit0" "$e2e_tmp/nsterm.audit"
check_eq "drainer sent only evictions for $ns/held (no DELETE)" "" \
	"$(drainer_writes "$e2e_tmp/nsterm.audit" | grep " $ns/" | grep -v '^create pods/eviction ' || true)"
check "every eviction of $ns/held was answered 403" jqq --arg ns "$ns" \
	'[.[] | select((.userAgent | startswith("drainer/")) and .objectRef.namespace == $ns and .objectRef.subresource == "eviction") | .responseStatus.code] | length >= 2 and all(. == 403)' \
	"$e2e_tmp/nsterm.audit"
audit_window "$audit_ns0" "$e2e_tmp/nsterm-all.audit"
check "the namespace controller deleted the pod (deletecollection, denied while held, then 200)" jqq --arg ns "$ns" --arg u "$kcm_user" \
	'[.[] | select(.user.username == $u and .verb == "deletecollection" and .objectRef.resource == "pods" and .objectRef.namespace == $ns) | .responseStatus.code] | any(. == 422) and any(. == 200)' \
	"$e2e_tmp/nsterm-all.audit"
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
no_held_pod() { ! kubectl -n "$ns" get pod held >/dev/null 2>&1; }
check "the pod is gone" no_held_pod
drainer_run nsterm-uncordon uncordon "$node"
check_rc "uncordon $node" 0 nsterm-uncordon
kubectl delete validatingadmissionpolicy "$policy" >/dev/null

finish
