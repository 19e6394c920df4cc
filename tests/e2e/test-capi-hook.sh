#!/usr/bin/env bash
# drainer as Cluster API's pre-drain hook owner (serve --all-nodes --cluster-api), on the
# real control plane and kubelets, with Cluster API's Machine CRD (v1.14.2, from the Go
# module cache) but without Cluster API's controllers: the test plays the Machine
# controller's part that matters here (a Machine of node-1 carrying drainer's hook is
# deleted and stays, deleting, while a finalizer holds it).
#  - the hook stays while node-1 drains, and is removed (by drainer, a JSON patch) only
#    after every claim holder was evicted, every claim on the node released and the DRA
#    driver's pod evicted: judged from the audit log;
#  - Events on the Machine say what happened (DrainerHookDrain, DrainerHookRemoved);
#  - deploy/cluster-api's admission policy: a token bound to a Node may not patch a
#    Machine whatever RBAC grants; drainer-cluster may remove its hook and nothing else.
# Times: Machine deleted -> hook removed.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_drainer
demo || { fail "demo workload"; finish; exit 1; }
node=node-1
ns=capi-e2e
machine=m-$node
hook=pre-drain.delete.hook.machine.cluster.x-k8s.io/drainer

# The CRDs build-capi copied (without waiting for a build in progress), else the module's.
crd_dir=$(go env GOMODCACHE)/sigs.k8s.io/cluster-api@v1.14.2/core/config/crd/bases
for d in "${DRAINER_CAPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/drainer-capi}"/v1.14.2-*/; do
	[ -f "$d.complete" ] && crd_dir=${d}crd
done
# (a machine whose module cache lacks it: the module alone, from the module proxy, a few
# seconds; no build)
[ -f "$crd_dir/cluster.x-k8s.io_machines.yaml" ] ||
	(cd "$e2e_root/tests/cluster/capi" && go mod download sigs.k8s.io/cluster-api) >"$e2e_tmp/mod.log" 2>&1 ||
	sed 's/^/    /' "$e2e_tmp/mod.log"
[ -f "$crd_dir/cluster.x-k8s.io_machines.yaml" ] || { fail "no Machine CRD in $crd_dir"; finish; exit 1; }
crd_made=false
kubectl get crd machines.cluster.x-k8s.io >/dev/null 2>&1 || crd_made=true

cleanup() {
	[ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	kubectl -n "$ns" patch machine "$machine" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
	kubectl delete -k "$e2e_root/deploy/cluster-api" --ignore-not-found >/dev/null 2>&1
	kubectl delete clusterrolebinding drainer-e2e-capi-node --ignore-not-found >/dev/null 2>&1
	timeout 60 "$DRAINER" uncordon "$node" >/dev/null 2>&1
	# (the CRD only if this script made it: what it found stays)
	! $crd_made || kubectl delete crd machines.cluster.x-k8s.io --wait=false >/dev/null 2>&1
}
e2e_cleanup_hooks+=(cleanup)

kubectl apply --server-side -f "$crd_dir/cluster.x-k8s.io_machines.yaml" >/dev/null &&
	kubectl wait --for condition=established --timeout=60s crd/machines.cluster.x-k8s.io >/dev/null ||
	{ fail "Machine CRD"; finish; exit 1; }
kubectl create namespace "$ns" >/dev/null 2>&1
ns_settled drainer-system || fail "namespace drainer-system still terminating after 120 s"
kubectl -n drainer-system get sa drainer >/dev/null 2>&1 || {
	kubectl create namespace drainer-system >/dev/null 2>&1
	kubectl -n drainer-system create sa drainer >/dev/null
}
kubectl -n drainer-system get sa drainer-cluster >/dev/null 2>&1 || kubectl -n drainer-system create sa drainer-cluster >/dev/null

kubectl apply -f - >/dev/null <<YAML || { fail "Machine"; finish; exit 1; }
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: $machine
  namespace: $ns
  finalizers: ["e2e.drainer.io/hold"]
  annotations:
    $hook: ""
spec:
  clusterName: e2e
  bootstrap: {dataSecretName: none}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: E2EMachine, name: $machine}
YAML
kubectl -n "$ns" patch machine "$machine" --subresource=status --type=merge \
	-p "{\"status\":{\"nodeRef\":{\"name\":\"$node\"}}}" >/dev/null || fail "Machine status.nodeRef"

echo "-- admission: deploy/cluster-api"
kubectl apply -k "$e2e_root/deploy/cluster-api" >/dev/null || fail "apply deploy/cluster-api"
# RBAC would stop the per-node ServiceAccount first: grant it the same rights, so that what
# refuses is the policy.
kubectl create clusterrolebinding drainer-e2e-capi-node --clusterrole=drainer-cluster-api \
	--serviceaccount=drainer-system:drainer >/dev/null 2>&1
sleep 2 # the policy reaches the API server's admission informer
mkkc "$(kubectl -n drainer-system create token drainer --bound-object-kind Node --bound-object-name node-2 \
	--duration 10m)" "$e2e_tmp/node.kubeconfig"
mkkc "$(kubectl -n drainer-system create token drainer-cluster --duration 10m)" "$e2e_tmp/cluster.kubeconfig"
node_token=$e2e_tmp/node.kubeconfig
cluster_token=$e2e_tmp/cluster.kubeconfig
as() { "$KUBECTL" --kubeconfig "$1" "${@:2}"; }
admission_refused node-bound-patch "a token bound to node-2 patches a Machine" "may not change Cluster API Machines" \
	as "$node_token" -n "$ns" annotate machine "$machine" "$hook-"
admission_refused cluster-label "drainer-cluster labels a Machine" "may only remove" \
	as "$cluster_token" -n "$ns" label machine "$machine" e2e=1
admission_refused cluster-other-hook "drainer-cluster adds another owner's hook" "may only remove" \
	as "$cluster_token" -n "$ns" annotate machine "$machine" pre-drain.delete.hook.machine.cluster.x-k8s.io/other=
admission_refused cluster-delete "drainer-cluster deletes a Machine" "forbidden\\|may only remove" \
	as "$cluster_token" -n "$ns" delete machine "$machine" --wait=false
check "the hook is still on the Machine" \
	test "$(kubectl -n "$ns" get machine "$machine" -o json | jq -r --arg k "$hook" '.metadata.annotations | has($k)')" = true

echo "-- serve --cluster-api: delete the Machine of $node"
run_start=$(audit_lines)
"$DRAINER" serve --all-nodes --cluster-api --max-parallel 1 --metrics-addr "" --identity e2e-capi \
	>"$e2e_tmp/serve.out" 2>"$e2e_tmp/serve.err" &
serve_pid=$!
wait_until 30 grep -q 'owning the pre-drain hook' "$e2e_tmp/serve.err" || fail "serve did not start: $(tail -n 3 "$e2e_tmp/serve.err")"
sleep 1
t0=$(date +%s.%N)
kubectl -n "$ns" delete machine "$machine" --wait=false >/dev/null
hook_gone() { [ "$(kubectl -n "$ns" get machine "$machine" -o json | jq -r --arg k "$hook" '.metadata.annotations // {} | has($k)')" = false ]; }
if wait_until 180 hook_gone; then
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	pass "the hook was removed $secs s after the Machine's deletion"
else
	fail "the hook is still there after 180 s: $(kubectl get node "$node" -o json | jq -c '.metadata.annotations')"
	tail -n 20 "$e2e_tmp/serve.err" | sed 's/^/    serve: /'
fi
check_eq "node $node is drained" drained "$(node_ann "$node" drainer.io/state)"
check "no claim left on $node" no_claims_on_node "$node"
check_eq "the request names the Machine" "$ns/$machine" "$(node_ann "$node" drainer.io/cluster-api-machine)"
sleep 2
audit_window "$run_start" "$e2e_tmp/window.json"
# In the audit log: the evictions (claim holders first), then the driver pod's, then the hook's patch.
jq -r '.[] | select(.userAgent | startswith("drainer/"))
	| select((.objectRef.subresource == "eviction") or (.objectRef.resource == "machines" and .verb == "patch"))
	| "\(.requestReceivedTimestamp) \(.verb) \(.objectRef.resource)/\(.objectRef.subresource // "") \(.objectRef.namespace)/\(.objectRef.name) \(.responseStatus.code)"' \
	"$e2e_tmp/window.json" >"$e2e_tmp/order.txt"
sed 's/^/    audit: /' "$e2e_tmp/order.txt"
last=$(tail -n 1 "$e2e_tmp/order.txt")
check "the hook's removal is drainer's last write of the two kinds (after every eviction)" \
	grep -q "patch machines/ $ns/$machine 200" <<<"$last"
check "the DRA driver's pod was evicted before the hook went" \
	grep -q 'eviction dra-system/' "$e2e_tmp/order.txt"
check_eq "one hook removal" 1 "$(grep -c 'patch machines/' "$e2e_tmp/order.txt")"
evs=$(kubectl -n "$ns" get events --field-selector "involvedObject.name=$machine" -o json | jq -r '.items[].reason' | sort -u | tr '\n' ' ')
check "Events on the Machine: DrainerHookDrain and DrainerHookRemoved ($evs)" \
	grep -q 'DrainerHookDrain .*DrainerHookRemoved\|DrainerHookRemoved.*DrainerHookDrain' <<<"$evs"
finish
