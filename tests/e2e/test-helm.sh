#!/usr/bin/env bash
# What admins install, in a namespace not named drainer-system. The Helm chart
# (deploy/helm/drainer) with helm built from its Go module (tests/cluster/build-helm,
# cached): `helm lint --strict`, `helm template` (per-node mode: the node policies match
# exactly the release's ServiceAccount in the release's namespace, Events granted only in
# default, /metrics on [::]:9464; cluster mode: a Deployment and no node policy; the
# optional ResourceQuota for the priority class), `helm install` into namespace
# ops-drain (the DaemonSet's pods Ready on every node), a token of the release's
# ServiceAccount bound to node-2 may annotate node-2 but is refused patching node-1
# (and one naming no node may write nothing), `helm upgrade` (a value change rolls the
# pods), `helm uninstall` (nothing it created is left). Then deploy/ under a kustomize
# overlay with `namespace: ops-k` (and the Component deploy/priority-quota): the policies and
# their parameter follow it, and the same node-2 token of ops-k/drainer is refused on node-1;
# Events are still granted (a ClusterRole, no Role left behind in default): a drain and
# uncordon of node-2 with that token post their Events about node-2 in default (kubectl get
# events --field-selector involvedObject.name=node-2), and the token may post none about
# node-1, nor in namespace ops-k or kube-public (a namespace every cluster has).
# The pods run localhost/drainer:VERSION (DRAINER_E2E_IMAGE, else deploy/image/build) or
# DRAINER_E2E_POD_IMAGE (e.g. drainer.test/drainer:dev: the build's drainer). The real
# nodes have no network namespaces (every pod binds on the host's loopback): /metrics
# binds $(POD_IP):9464 there (metricsAddress), as test-deploy's overlay does.
# Everything created here is deleted again.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$e2e_root" || exit 1

DRAINER=${DRAINER:-build/drainer}
need_drainer

chart=deploy/helm/drainer
ns=ops-drain
rel=drainer-helm
kns=ops-k
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
real_nodes=false
[ "${DRAINER_CLUSTER_NODES:-${e2e_nodes:-sim}}" = real ] && real_nodes=true

t0=$SECONDS
if ! helm_bin=$(tests/cluster/build-helm 2>"$e2e_tmp/build-helm.log"); then
	fail "tests/cluster/build-helm"
	tail -n 20 "$e2e_tmp/build-helm.log" | sed 's/^/    /'
	finish
	exit 1
fi
pass "helm $("$helm_bin" version --short 2>/dev/null) from its Go module ($((SECONDS - t0)) s)"
helm() { HELM_CACHE_HOME=$e2e_tmp/helm-cache HELM_CONFIG_HOME=$e2e_tmp/helm-config HELM_DATA_HOME=$e2e_tmp/helm-data \
	"$helm_bin" --kubeconfig "$KUBECONFIG" "$@"; }
objects() { # FILE: "Kind/namespace/name ..." of the rendered objects, sorted
	"$KUBECTL" create --dry-run=client -f "$1" -o json 2>/dev/null |
		jq -rs '.[] | "\(.kind)/\(.metadata.namespace // "-")/\(.metadata.name)"' | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//'
}
k_overlay=$e2e_tmp/overlay-ops
remove_all() {
	helm uninstall "$rel" -n "$ns" --wait --timeout 60s >/dev/null 2>&1
	[ -f "$k_overlay/kustomization.yaml" ] && kubectl delete -k "$k_overlay" --ignore-not-found >/dev/null 2>&1
	kubectl delete namespace "$ns" "$kns" --ignore-not-found --wait=false >/dev/null 2>&1
	wait_until 60 bash -c "! '$KUBECTL' get namespace '$ns' && ! '$KUBECTL' get namespace '$kns'"
}
e2e_cleanup_hooks+=("remove_all")
remove_all

# --- lint and template ------------------------------------------------------------------
helm lint --strict "$chart" >"$e2e_tmp/lint.out" 2>&1
check_eq "helm lint --strict $chart" 0 $?
grep -q '0 chart(s) failed' "$e2e_tmp/lint.out" || sed 's/^/    /' "$e2e_tmp/lint.out"
helm template "$rel" "$chart" -n "$ns" >"$e2e_tmp/node.yaml" 2>"$e2e_tmp/template.err"
check_eq "helm template (per-node mode, namespace $ns)" 0 $?
check_eq "per-node mode: the ServiceAccount, the roles and bindings (Events in default), the five node policies and their bindings, the DaemonSet" \
	"ClusterRole/-/$rel ClusterRoleBinding/-/$rel DaemonSet/$ns/$rel Role/default/$rel-events Role/$ns/$rel-leases RoleBinding/default/$rel-events RoleBinding/$ns/$rel-leases ServiceAccount/$ns/drainer $(for p in '' -events -leases -pods -taintrules; do printf 'ValidatingAdmissionPolicy/-/%s ' "$rel-own-node$p"; done)$(for p in '' -events -leases -pods -taintrules; do printf 'ValidatingAdmissionPolicyBinding/-/%s ' "$rel-own-node$p"; done | sed 's/ $//')" \
	"$(objects "$e2e_tmp/node.yaml")"
"$KUBECTL" create --dry-run=client -f "$e2e_tmp/node.yaml" -o json | jq -s . >"$e2e_tmp/node.json"
check_eq "every node policy matches exactly system:serviceaccount:$ns:drainer, none names drainer-system or takes a parameter" \
	"5 5 0 0" \
	"$(jq -r --arg u "request.userInfo.username == 'system:serviceaccount:$ns:drainer'" '[.[] | select(.kind == "ValidatingAdmissionPolicy")] as $p
		| "\($p | length) \([$p[] | select([.spec.matchConditions[].expression] == [$u])] | length) \([$p[] | tostring | select(test("drainer-system"))] | length) \([.[] | select(.spec.paramKind? or .spec.paramRef?)] | length)"' "$e2e_tmp/node.json")"
check_eq "the DaemonSet: serve --node \$(NODE_NAME) --metrics-addr [::]:9464 (dual-stack), system-node-critical, ServiceAccount drainer" \
	'serve --node $(NODE_NAME) --metrics-addr [::]:9464|system-node-critical|drainer' \
	"$(jq -r '.[] | select(.kind == "DaemonSet") | .spec.template.spec | "\(.containers[0].args | join(" "))|\(.priorityClassName)|\(.serviceAccountName)"' "$e2e_tmp/node.json")"
helm template "$rel" "$chart" -n "$ns" --set mode=cluster --set priorityClassQuota.enabled=true >"$e2e_tmp/cluster.yaml" 2>"$e2e_tmp/cluster.err"
check_eq "helm template --set mode=cluster --set priorityClassQuota.enabled=true" 0 $?
check_eq "cluster mode: ServiceAccount drainer-cluster, a Deployment, a ResourceQuota for system-cluster-critical, no node policy" \
	"ClusterRole/-/$rel ClusterRoleBinding/-/$rel Deployment/$ns/$rel PodDisruptionBudget/$ns/$rel ResourceQuota/$ns/$rel-critical-pods Role/default/$rel-events Role/$ns/$rel-leases RoleBinding/default/$rel-events RoleBinding/$ns/$rel-leases ServiceAccount/$ns/drainer-cluster|[\"system-cluster-critical\"]|system-cluster-critical" \
	"$(objects "$e2e_tmp/cluster.yaml")|$("$KUBECTL" create --dry-run=client -f "$e2e_tmp/cluster.yaml" -o json | jq -rsc '(.[] | select(.kind == "ResourceQuota") | .spec.scopeSelector.matchExpressions[0].values), "|", (.[] | select(.kind == "Deployment") | .spec.template.spec.priorityClassName)' | tr -d '\n')"
# Highly available as deploy/cluster-mode: 2 replicas with --leader-elect, replaced one
# at a time, preferably on different nodes, a budget that keeps one (none for a single
# replica: it would block every drain of its node).
check_eq "cluster mode: 2 replicas, RollingUpdate maxSurge 0, serve --all-nodes ... --leader-elect, anti-affinity on the release's pods, a PDB minAvailable 1 selecting them" \
	'2|RollingUpdate 0 1|serve --all-nodes --max-parallel 2 --metrics-addr [::]:9464 --leader-elect|true|1 true' \
	"$("$KUBECTL" create --dry-run=client -f "$e2e_tmp/cluster.yaml" -o json | jq -rs '(.[] | select(.kind == "Deployment")) as $d | (.[] | select(.kind == "PodDisruptionBudget")) as $b
		| "\($d.spec.replicas)|\($d.spec.strategy.type) \($d.spec.strategy.rollingUpdate.maxSurge) \($d.spec.strategy.rollingUpdate.maxUnavailable)|\($d.spec.template.spec.containers[0].args | join(" "))|\($d.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels == $d.spec.selector.matchLabels)|\($b.spec.minAvailable) \($b.spec.selector.matchLabels == $d.spec.selector.matchLabels)"')"
check_eq "cluster mode, --set replicas=1: one replica, still --leader-elect, no PodDisruptionBudget" \
	'1|--leader-elect|0' \
	"$(helm template "$rel" "$chart" -n "$ns" --set mode=cluster --set replicas=1 2>"$e2e_tmp/replicas1.err" | "$KUBECTL" create --dry-run=client -f - -o json | jq -rs '"\(.[] | select(.kind == "Deployment") | .spec.replicas)|\(.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args[-1])|\([.[] | select(.kind == "PodDisruptionBudget")] | length)"')"
helm template "$rel" "$chart" -n "$ns" --set mode=cluster --set replicas=0 >/dev/null 2>"$e2e_tmp/replicas.err"
check "helm template --set mode=cluster --set replicas=0 is refused with a clear error" grep -q 'replicas must be 1 or more, not 0' "$e2e_tmp/replicas.err"
helm template "$rel" "$chart" -n "$ns" --set mode=bogus >/dev/null 2>"$e2e_tmp/bogus.err"
check "helm template --set mode=bogus is refused with a clear error" grep -q 'mode must be node or cluster' "$e2e_tmp/bogus.err"
check_eq "--set onUnhealthyDevice=drain-device: serve --on-unhealthy-device drain-device" \
	'serve --node $(NODE_NAME) --metrics-addr [::]:9464 --on-unhealthy-device drain-device' \
	"$(helm template "$rel" "$chart" -n "$ns" --set onUnhealthyDevice=drain-device 2>"$e2e_tmp/unhealthy.err" | "$KUBECTL" create --dry-run=client -f - -o json | jq -rs '.[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].args | join(" ")')"
helm template "$rel" "$chart" -n "$ns" --set onUnhealthyDevice=evict >/dev/null 2>"$e2e_tmp/unhealthy-bad.err"
check "helm template --set onUnhealthyDevice=evict is refused with a clear error" grep -q 'onUnhealthyDevice must be off, report or drain-device, not "evict"' "$e2e_tmp/unhealthy-bad.err"

# --- install ----------------------------------------------------------------------------
pod_image=${DRAINER_E2E_POD_IMAGE:-localhost/drainer:$version}
if $real_nodes && [ "$pod_image" = "localhost/drainer:$version" ]; then
	serve_drainer_image "$version"
fi
set_args=(--set "image.repository=${pod_image%:*}" --set "image.tag=${pod_image##*:}")
# (no network namespaces on the test's nodes: each pod binds its own IP, not [::])
$real_nodes && set_args+=(--set 'metricsAddress=$(POD_IP):9464')
nodes=$(kubectl get nodes -o json | jq -r '[.items[].metadata.name] | sort | join(" ")')
n=$(wc -w <<<"$nodes")
t0=$SECONDS
# (--wait: on real nodes, until the DaemonSet's pods are Ready; simulated nodes run none)
wait_args=()
$real_nodes && wait_args=(--wait --timeout 180s)
helm install "$rel" "$chart" -n "$ns" --create-namespace "${set_args[@]}" "${wait_args[@]}" >"$e2e_tmp/install.out" 2>&1
rc=$?
check_eq "helm install $rel into namespace $ns ${wait_args[*]} ($((SECONDS - t0)) s)" 0 $rc
[ "$rc" = 0 ] || sed 's/^/    /' "$e2e_tmp/install.out" | head -n 20
ds_status() { kubectl -n "$ns" get ds "$rel" -o json | jq -r '"\(.status.desiredNumberScheduled) \(.status.numberReady) \(.status.updatedNumberScheduled)"'; }
ds_ready() { [ "$(ds_status)" = "$n $n $n" ]; }
if $real_nodes; then
	wait_until 120 ds_ready
	check_eq "the DaemonSet's pods are Ready on every node ($nodes)" "$n $n $n" "$(ds_status)"
else
	echo "  (simulated nodes run no pods: the DaemonSet's readiness is not checked here; DRAINER_CLUSTER_NODES=real does)"
fi

# --- the node policy, with tokens of the release's ServiceAccount ------------------------
policy_proof() { # NAMESPACE WHERE: node-2's token of NAMESPACE/drainer on node-2 (admitted) and node-1 (refused)
	local pns=$1 where=$2 kc=$e2e_tmp/$1-node2.kubeconfig nonode=$e2e_tmp/$1-nonode.kubeconfig
	mkkc "$(kubectl -n "$pns" create token drainer --bound-object-kind Node --bound-object-name node-2 --duration=10m)" "$kc"
	mkkc "$(kubectl -n "$pns" create token drainer --duration=10m)" "$nonode"
	# (the API server sees a new policy a moment after it is created)
	wait_until 30 bash -c "! '$KUBECTL' --kubeconfig '$kc' annotate --dry-run=server node node-1 drainer.io/helm-test=1"
	admission_admitted "$pns-own" "$where: node-2's token of $pns/drainer annotates node-2 (drainer.io/, server dry run)" \
		"$KUBECTL" --kubeconfig "$kc" annotate --dry-run=server node node-2 drainer.io/helm-test=1
	admission_refused "$pns-other" "$where: node-2's token of $pns/drainer patching node-1" "may change only Node node-2, not node-1" \
		"$KUBECTL" --kubeconfig "$kc" annotate --dry-run=server node node-1 drainer.io/helm-test=1
	admission_refused "$pns-nonode" "$where: a token of $pns/drainer naming no node annotating node-2" "names no node" \
		"$KUBECTL" --kubeconfig "$nonode" annotate --dry-run=server node node-2 drainer.io/helm-test=1
}
policy_proof "$ns" "chart"

# --- upgrade: a value change rolls the pods ----------------------------------------------
gen0=$(kubectl -n "$ns" get ds "$rel" -o jsonpath='{.metadata.generation}')
t0=$SECONDS
helm upgrade "$rel" "$chart" -n "$ns" --reuse-values --set-string 'podAnnotations.drainer\.io/helm-test=2' "${wait_args[@]}" \
	>"$e2e_tmp/upgrade.out" 2>&1
check_eq "helm upgrade --set podAnnotations... ($((SECONDS - t0)) s)" 0 $?
check_eq "the release is at revision 2, deployed" "2 deployed" \
	"$(helm status "$rel" -n "$ns" -o json | jq -r '"\(.version) \(.info.status)"')"
rolled() {
	[ "$(kubectl -n "$ns" get pods -l "app.kubernetes.io/instance=$rel" -o json |
		jq '[.items[] | select(.metadata.deletionTimestamp == null and .metadata.annotations["drainer.io/helm-test"] == "2"
			and any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length')" = "$n" ]
}
check_eq "the DaemonSet's template changed (generation $gen0 -> $((gen0 + 1)))" "$((gen0 + 1))" \
	"$(kubectl -n "$ns" get ds "$rel" -o jsonpath='{.metadata.generation}')"
if $real_nodes; then
	wait_until 120 rolled
	check "the pods rolled: $n Ready pods carry the new annotation" rolled
else
	echo "  (simulated nodes run no pods: the roll itself is not checked here; DRAINER_CLUSTER_NODES=real does)"
fi

# --- uninstall: nothing the chart created is left -----------------------------------------
t0=$SECONDS
helm uninstall "$rel" -n "$ns" --wait --timeout 120s >"$e2e_tmp/uninstall.out" 2>&1
check_eq "helm uninstall ($((SECONDS - t0)) s)" 0 $?
left() {
	{
		kubectl get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings \
			-l "app.kubernetes.io/instance=$rel" -o name
		kubectl get -n "$ns" all,serviceaccounts,roles,rolebindings,resourcequotas -l "app.kubernetes.io/instance=$rel" -o name
		kubectl get -n default roles,rolebindings -l "app.kubernetes.io/instance=$rel" -o name
	} 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//'
}
for _ in $(seq 300); do [ -z "$(left)" ] && break; sleep 0.2; done
check_eq "nothing labelled app.kubernetes.io/instance=$rel is left (cluster-wide, in $ns, in default)" "" "$(left)"
kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1

# --- kustomize: deploy/ under an overlay with namespace: ops-k --------------------------------
# (without the DaemonSet: what is proven is the policies, with the overlay's ServiceAccount)
mkdir -p "$k_overlay"
cat >"$k_overlay/kustomization.yaml" <<-YAML
	namespace: $kns
	resources: [$(realpath --relative-to="$k_overlay" deploy)]
	components: [$(realpath --relative-to="$k_overlay" deploy/priority-quota)]
	patches:
	  - target: {kind: DaemonSet, name: drainer}
	    patch: |-
	      \$patch: delete
	      apiVersion: apps/v1
	      kind: DaemonSet
	      metadata: {name: drainer}
YAML
kubectl kustomize "$k_overlay" >"$e2e_tmp/ops.yaml" 2>&1
check_eq "kubectl kustomize of an overlay of deploy/ with namespace: $kns" 0 $?
"$KUBECTL" create --dry-run=client -f "$e2e_tmp/ops.yaml" -o json 2>/dev/null | jq -s . >"$e2e_tmp/ops.json"
check_eq "overlay: no node policy matches only drainer-system's ServiceAccount; the parameter is Namespace $kns" \
	"0 $kns" \
	"$(jq -r '"\([.[] | select(.kind == "ValidatingAdmissionPolicy") | tostring | select(test("serviceaccount:drainer-system"))] | length) \(.[] | select(.kind == "ValidatingAdmissionPolicyBinding" and .spec.paramRef) | .spec.paramRef.name)"' "$e2e_tmp/ops.json")"
check_eq "overlay: the ClusterRole drainer reads Namespace $kns alone (serve's pause), not drainer-system" \
	"[[\"$kns\"]]" "$(jq -c '[.[] | select(.kind == "ClusterRole" and .metadata.name == "drainer") | .rules[] | select(.resources | index("namespaces")) | .resourceNames]' "$e2e_tmp/ops.json")"
check_eq "overlay with components: [deploy/priority-quota]: ResourceQuota $kns/drainer-critical-pods for the system-*-critical classes" \
	'["system-node-critical","system-cluster-critical"]' \
	"$(jq -c '.[] | select(.kind == "ResourceQuota" and .metadata.namespace == "'"$kns"'") | .spec.scopeSelector.matchExpressions[0].values' "$e2e_tmp/ops.json")"
kubectl apply -k "$k_overlay" >"$e2e_tmp/ops-apply.out" 2>&1
check_eq "kubectl apply -k the overlay (namespace: $kns)" 0 $?
[ -s "$e2e_tmp/ops-apply.out" ] && grep -qiE 'error|invalid' "$e2e_tmp/ops-apply.out" && sed 's/^/    /' "$e2e_tmp/ops-apply.out"
policy_proof "$kns" "kustomize namespace: $kns"
# The binding's parameter is the overlay's Namespace: were it still drainer-system (not
# there), the policy would refuse every write of every Node, the admin's and the kubelets'.
admission_admitted "$kns-admin" "kustomize namespace: $kns: the admin annotates node-1 (the policy's parameter, Namespace $kns, is found)" \
	kubectl annotate --dry-run=server node node-1 drainer.io/helm-test=1
# The slot Leases policy follows the namespace too (RBAC lets ops/drainer write any Lease in $kns).
# It is a policy of its own, which the API server may see a moment after the Node policy
# that policy_proof waited for (admitted once in CI, right after the apply): waited for
# the same way, at most 30 s, then asserted.
lease_kc=$e2e_tmp/$kns-node2.kubeconfig
wait_until 30 bash -c "! printf '%s\n' 'apiVersion: coordination.k8s.io/v1' 'kind: Lease' \
	'metadata: {name: helm-test, namespace: $kns}' | '$KUBECTL' --kubeconfig '$lease_kc' -n '$kns' create --dry-run=server -f -"
admission_refused "$kns-lease" "kustomize namespace: $kns: node-2's token of $kns/drainer creating a Lease in $kns that is not a slot" \
	"may write only the slot Leases drainer-slot-N in $kns, not $kns/helm-test" \
	"$KUBECTL" --kubeconfig "$e2e_tmp/$kns-node2.kubeconfig" -n "$kns" create --dry-run=server -f - <<-YAML
	apiVersion: coordination.k8s.io/v1
	kind: Lease
	metadata: {name: helm-test, namespace: $kns}
	spec: {holderIdentity: node-2, leaseDurationSeconds: 60}
YAML
# Events: the overlay moved every namespaced object to $kns; the grant (ClusterRole and
# ClusterRoleBinding drainer-events) is cluster-scoped and names $kns/drainer, and the
# policies keep it to Events about the token's own Node in namespace default.
check_eq "overlay: Events granted by ClusterRoleBinding drainer-events to $kns/drainer; no Role or RoleBinding of drainer's in default" \
	"ClusterRole/drainer-events:$kns/drainer|" \
	"$(kubectl get clusterrolebinding drainer-events -o json | jq -r '"\(.roleRef.kind)/\(.roleRef.name):\([.subjects[] | "\(.namespace)/\(.name)"] | join(","))"')|$(kubectl -n default get roles,rolebindings -l app.kubernetes.io/name=drainer -o name)"
# (outside default the API server's validation wants involvedObject.namespace to be the
# Event's own: set so, the request reaches admission)
k_event() { # NODE NAMESPACE: an Event about NODE, as drainer posts it, from node-2's token of $kns/drainer (server dry run)
	printf '{"apiVersion":"v1","kind":"Event","metadata":{"generateName":"helm-test-","namespace":"%s"},"involvedObject":{"apiVersion":"v1","kind":"Node","name":"%s"%s},"reason":"DrainerPhase","message":"helm-test","type":"Normal","source":{"component":"drainer"}}' \
		"$2" "$1" "$([ "$2" = default ] || printf ',"namespace":"%s"' "$2")" |
		"$KUBECTL" --kubeconfig "$e2e_tmp/$kns-node2.kubeconfig" create --dry-run=server -f -
}
admission_admitted "$kns-ev" "kustomize namespace: $kns: node-2's token posts an Event about node-2 in default (server dry run)" k_event node-2 default
admission_refused "$kns-ev-other" "kustomize namespace: $kns: node-2's token posting an Event about node-1" \
	"may only post Events about Node node-2" k_event node-1 default
for ens in "$kns" kube-public; do
	admission_refused "$kns-ev-$ens" "kustomize namespace: $kns: node-2's token posting an Event about node-2 in namespace $ens" \
		"Events in namespace default only" k_event node-2 "$ens"
done
# A drain and its undo with that token: their Events reach the API server.
e2e_cleanup_hooks+=("reset_node node-2")
node2_events() { kubectl -n default get events --field-selector involvedObject.kind=Node,involvedObject.name=node-2 -o json |
	jq -r '.items[] | select(.reason | startswith("Drainer")) | "\(.metadata.name) \(.reason)"' | sort; }
ev_before=$(node2_events)
ev_start=$(audit_lines)
DRAINER_RUN_TIMEOUT=150 drainer_run "$kns-drain" drain node-2 --kubeconfig "$e2e_tmp/$kns-node2.kubeconfig" --driver-stop none --force --timeout 120s
check_rc "kustomize namespace: $kns: drain node-2 with node-2's token of $kns/drainer" 0 "$kns-drain"
drainer_run "$kns-uncordon" uncordon node-2 --kubeconfig "$e2e_tmp/$kns-node2.kubeconfig" --driver-stop none
check_rc "... and uncordon node-2" 0 "$kns-uncordon"
new_events=$(comm -13 <(echo "$ev_before") <(node2_events) | awk '{print $2}' | sort -u | paste -sd ' ')
check_eq "kubectl get events -n default --field-selector involvedObject.name=node-2: the drain's and the uncordon's Events" \
	"DrainerDone DrainerPhase" "$new_events"
sleep 1
audit_window "$ev_start" "$e2e_tmp/$kns-audit.json"
check_eq "the audit log: each Event drainer posted as $kns/drainer (2 or more) admitted in default, none refused" ok \
	"$(jq -r --arg u "system:serviceaccount:$kns:drainer" '[.[] | select(.user.username == $u and .objectRef.resource == "events")]
		| if length >= 2 and all(.responseStatus.code == 201 and .objectRef.namespace == "default") then "ok"
		  else "\(length) Events: \([.[] | "\(.objectRef.namespace) \(.responseStatus.code)"] | unique | join(", "))" end' "$e2e_tmp/$kns-audit.json")"
kubectl delete -k "$k_overlay" --ignore-not-found >/dev/null 2>&1
check_eq "kubectl delete -k the overlay" 0 $?

remove_all
finish
