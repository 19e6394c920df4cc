#!/usr/bin/env bash
# deploy/ against the real control plane: `kubectl apply -k deploy/` works (and its
# server-side dry run, and those of deploy/cluster-mode and the DRA permission
# example), the DaemonSet gets a pod on every node (also on a cordoned node with the
# drain taint), the roles hold exactly DESIGN.md's verbs (Events only in namespace
# default), and the drainer ServiceAccount can do each of them but cannot write
# ResourceSlices, DeviceClasses or Secrets, delete pods, or touch Leases outside
# drainer-system (kubectl auth can-i --as, SubjectAccessReview, and real requests with
# its token). drainer status and plan then run with a kubeconfig holding only such a
# token, and the audit log shows they only read and were never refused.
# The admission policies of deploy/node-policy.yaml, with real tokens bound to the
# DaemonSet's pods on node-1 and node-2 (the API server puts the pod's node in
# user.extra: SelfSubjectReview and the audit log show it): a pod's token may change
# the drainer-owned fields of its own Node (drainer.io/ annotations, cordon, the
# drainer.io/draining taint, the label named by the policy's parameter), and nothing
# else (another Node, another taint, label or annotation, ownerReferences, Events about
# another Node, an eviction with grace period 0, a pod DELETE on another node); a token
# naming no node may write nothing; a Node-bound token works like a pod-bound one; an
# eviction of a pod on another node is admitted (what the policy cannot confine). Then
# `drainer serve --node node-2` with node-2's pod token drains and restores node-2
# (label strategy) with no request refused. Cluster mode runs its single pod as
# drainer-cluster, which the policy does not confine; the example's
# ValidatingAdmissionPolicy keeps a driver to its own node's ResourceSlices.
#
# On real nodes the DaemonSet's pods run the image deploy/image/build
# makes (build/drainer-image.oci.tar, localhost/drainer:VERSION, unpacked and run by
# drainer-cri; the pods report its manifest digest as their imageID), and `drainer serve`
# in node-2's pod, with its in-cluster identity from the projected token (the audit log
# names the pod the token is bound to) and NODE_NAME from the downward API (it watches
# its own Node), drains and restores node-2 through `kubectl annotate`; its metrics are
# scraped from each pod's IP. The nodes have no network namespaces (every pod binds on
# the host's loopback), so an overlay binds /metrics to $(POD_IP) instead of [::].
# DRAINER_E2E_IMAGE names an archive built earlier (tests/run-all's image step);
# otherwise deploy/image/build runs. DRAINER_E2E_POD_IMAGE=drainer.test/drainer:dev
# runs the build's drainer (the cluster's guard-drainer, e.g. the ASan build) instead.
# On simulated nodes `drainer serve` runs here with the ServiceAccount's token.
# deploy/rollout: drainer-cluster may do what `drainer rollout` calls (can-i
# for each verb) and no more (no write of the DaemonSet, its revisions or its pods, no
# ControllerRevisions outside the driver's namespace); without it the rollout fails on the
# ControllerRevisions list (403), with it a no-op rollout with drainer-cluster's token
# skips every node and none of its requests is forbidden.
# Everything created here is deleted again (kubectl delete -k).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$e2e_root" || exit 1

DRAINER=${DRAINER:-build/drainer}
if ! [ -x "$DRAINER" ] && [ "$DRAINER" = build/drainer ]; then
	bash .ci/setup >"$e2e_tmp/setup.log" 2>&1 || tail -n 20 "$e2e_tmp/setup.log"
fi
need_drainer

SA=system:serviceaccount:drainer-system:drainer
jqe() { jq -e "$@" >/dev/null 2>&1; }
real_nodes=false
[ "${DRAINER_CLUSTER_NODES:-sim}" = real ] && real_nodes=true
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
SA_GROUPS='["system:serviceaccounts","system:serviceaccounts:drainer-system","system:authenticated"]'

# remove_all: what this test may have created, gone (waits for the namespace).
remove_all() {
	# The example's ServiceAccount is the test driver's own (tests/cluster/manifests): it
	# stays. Its DaemonSet cannot create pods without it, and a ServiceAccount made anew
	# has another UID: the tokens of the real plugin's running pods would be refused
	# (the API server checks the UID a token names; the kubelet renews it only later).
	kubectl kustomize deploy/examples/dra-permissions | "$KUBECTL" create --dry-run=client -o json -f - 2>/dev/null |
		jq -s '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind != "ServiceAccount")]}' |
		"$KUBECTL" delete -f - --ignore-not-found >/dev/null 2>&1
	kubectl -n dra-system create serviceaccount dra-driver >/dev/null 2>&1
	kubectl delete resourceslice deploy-test-node-1 deploy-test-node-2 --ignore-not-found >/dev/null 2>&1
	kubectl -n dra-system delete pod deploy-test-driver --ignore-not-found --grace-period=1 >/dev/null 2>&1
	kubectl delete -k deploy/rollout --ignore-not-found >/dev/null 2>&1
	kubectl delete -k deploy/cluster-mode --ignore-not-found >/dev/null 2>&1
	kubectl delete -k deploy/ --ignore-not-found >/dev/null 2>&1
	wait_until 60 bash -c "! '$KUBECTL' get namespace drainer-system"
}
e2e_cleanup_hooks+=("kubectl taint node node-3 drainer.io/draining:NoSchedule- >/dev/null 2>&1; kubectl uncordon node-3 >/dev/null 2>&1")
e2e_cleanup_hooks+=("remove_all")
remove_all # leftovers of an interrupted run

# --- the image the real nodes run --------------------------------------------------------
pod_image=${DRAINER_E2E_POD_IMAGE:-localhost/drainer:$version}
manifest=
if $real_nodes && [ "$pod_image" = "localhost/drainer:$version" ]; then
	serve_drainer_image "$version"
	manifest=$image_manifest
fi

demo || { fail "demo workload"; finish; exit 1; }
nodes=$(kubectl get nodes -o json | jq -r '[.items[].metadata.name] | sort | join(" ")')

# --- rendering and applying -----------------------------------------------------------
kubectl kustomize deploy/ >"$e2e_tmp/base.yaml"
check_eq "kubectl kustomize deploy/" 0 $?
objects() { # kustomize dir: "Kind/name ..." of what it renders, sorted
	kubectl kustomize "$1" | "$KUBECTL" create --dry-run=client -f - -o json | jq -rs '.[] | "\(.kind)/\(.metadata.name)"' | sort | tr '\n' ' ' | sed 's/ $//'
}
check_eq "deploy/ holds the namespace, the roles, ServiceAccount drainer and its bindings, the node policies, and the DaemonSet" \
	"ClusterRole/drainer ClusterRole/drainer-events ClusterRoleBinding/drainer ClusterRoleBinding/drainer-events DaemonSet/drainer Namespace/drainer-system Role/drainer-leases RoleBinding/drainer-leases ServiceAccount/drainer ValidatingAdmissionPolicy/drainer-events ValidatingAdmissionPolicy/drainer-own-node ValidatingAdmissionPolicy/drainer-own-node-events ValidatingAdmissionPolicy/drainer-own-node-leases ValidatingAdmissionPolicy/drainer-own-node-pods ValidatingAdmissionPolicy/drainer-own-node-taintrules ValidatingAdmissionPolicyBinding/drainer-events ValidatingAdmissionPolicyBinding/drainer-own-node ValidatingAdmissionPolicyBinding/drainer-own-node-events ValidatingAdmissionPolicyBinding/drainer-own-node-leases ValidatingAdmissionPolicyBinding/drainer-own-node-pods ValidatingAdmissionPolicyBinding/drainer-own-node-taintrules" \
	"$(objects deploy/)"
check_eq "deploy/cluster-mode holds the namespace, the roles, the Events policy, ServiceAccount drainer-cluster and its bindings, a Deployment and its PodDisruptionBudget (no DaemonSet, no node policy)" \
	"ClusterRole/drainer ClusterRole/drainer-events ClusterRoleBinding/drainer-cluster ClusterRoleBinding/drainer-cluster-events Deployment/drainer Namespace/drainer-system PodDisruptionBudget/drainer Role/drainer-leases RoleBinding/drainer-cluster-leases ServiceAccount/drainer-cluster ValidatingAdmissionPolicy/drainer-events ValidatingAdmissionPolicyBinding/drainer-events" \
	"$(objects deploy/cluster-mode)"

# What is applied: deploy/ itself, or on real nodes an overlay of it (no network
# namespaces: /metrics on the pod IP; the image named by DRAINER_E2E_POD_IMAGE).
overlay=$e2e_tmp/overlay
mkdir -p "$overlay/ds" "$overlay/cm"
if $real_nodes; then
	bind_patch() { # KIND NAME ARG-INDEX: --metrics-addr $(POD_IP):9464, POD_IP from the downward API
		cat <<-YAML
			- target: {kind: $1, name: $2}
			  patch: |-
			    - {op: replace, path: /spec/template/spec/containers/0/args/$3, value: "\$(POD_IP):9464"}
			    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}}
		YAML
	}
	images="[{name: localhost/drainer, newName: ${pod_image%:*}, newTag: \"${pod_image##*:}\"}]"
	printf 'resources: [%s]\nimages: %s\npatches:\n%s\n' "$(realpath --relative-to="$overlay/ds" deploy)" "$images" \
		"$(bind_patch DaemonSet drainer 4)" >"$overlay/ds/kustomization.yaml"
	printf 'resources: [%s]\nimages: %s\npatches:\n%s\n' "$(realpath --relative-to="$overlay/cm" deploy/cluster-mode)" "$images" \
		"$(bind_patch Deployment drainer 5)" >"$overlay/cm/kustomization.yaml"
else
	printf 'resources: [%s]\n' "$(realpath --relative-to="$overlay/ds" deploy)" >"$overlay/ds/kustomization.yaml"
	printf 'resources: [%s]\n' "$(realpath --relative-to="$overlay/cm" deploy/cluster-mode)" >"$overlay/cm/kustomization.yaml"
fi
overlay_note=
$real_nodes && overlay_note=" (overlay: image $pod_image, /metrics on \$(POD_IP))"
kubectl apply -k "$overlay/ds" >"$e2e_tmp/apply.out" 2>&1
check_eq "kubectl apply -k deploy/$overlay_note" 0 $?
kubectl apply -k deploy/ --dry-run=server >"$e2e_tmp/dry.out" 2>&1
check_eq "kubectl apply -k deploy/ --dry-run=server" 0 $?
# (--force-conflicts: the objects were just applied client-side, by another field manager)
kubectl apply -k deploy/ --server-side --force-conflicts --dry-run=server >"$e2e_tmp/dry-ss.out" 2>&1
check_eq "kubectl apply -k deploy/ --server-side --dry-run=server" 0 $?
kubectl apply -k deploy/cluster-mode --dry-run=server >"$e2e_tmp/dry-cm.out" 2>&1
check_eq "kubectl apply -k deploy/cluster-mode --dry-run=server" 0 $?
kubectl apply -k deploy/examples/dra-permissions --dry-run=server >"$e2e_tmp/dry-ex.out" 2>&1
check_eq "kubectl apply -k deploy/examples/dra-permissions --dry-run=server" 0 $?
for f in apply dry dry-ss dry-cm dry-ex; do
	# (server-side apply over client-side apply warns that it cannot migrate last-applied: harmless)
	grep -v 'failed to migrate kubectl.kubernetes.io/last-applied' "$e2e_tmp/$f.out" >"$e2e_tmp/$f.msgs"
	grep -qiE 'error|forbidden|invalid' "$e2e_tmp/$f.msgs" && sed 's/^/    /' "$e2e_tmp/$f.msgs"
done

# --- the DaemonSet ----------------------------------------------------------------------
ds_pods() { # "node phase" of the DaemonSet's live pods, sorted
	kubectl -n drainer-system get pods -l app.kubernetes.io/name=drainer,app.kubernetes.io/component=node-agent -o json |
		jq -r '.items[] | select(.metadata.deletionTimestamp == null) | "\(.spec.nodeName) \(.status.phase)"' | sort
}
one_running_per_node() {
	[ "$(ds_pods | awk '$2 == "Running" { print $1 }' | tr '\n' ' ' | sed 's/ $//')" = "$nodes" ]
}
wait_until 60 one_running_per_node
check_eq "the DaemonSet runs one pod on every node ($nodes)" "$nodes" "$(ds_pods | awk '$2 == "Running" { print $1 }' | tr '\n' ' ' | sed 's/ $//')"
n=$(wc -w <<<"$nodes")
ds_status() { kubectl -n drainer-system get ds drainer -o json | jq -r '"\(.status.desiredNumberScheduled) \(.status.numberReady)"'; }
ds_ready() { [ "$(ds_status)" = "$n $n" ]; }
wait_until 60 ds_ready
check_eq "DaemonSet status: desired = ready = $n nodes" "$n $n" "$(ds_status)"
jq_checks '.spec.template.spec as $s | $s.containers[0] as $c
	| (if $s.securityContext.runAsNonRoot == true and $c.securityContext.readOnlyRootFilesystem == true
		and $c.securityContext.allowPrivilegeEscalation == false and $c.securityContext.capabilities.drop == ["ALL"]
		and $s.securityContext.seccompProfile.type == "RuntimeDefault"
	   then "ok pod: non-root, read-only root fs, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault"
	   else "FAIL pod security context: \($s.securityContext) \($c.securityContext)" end),
	  (if ($c.env | map(select(.name == "NODE_NAME" and .valueFrom.fieldRef.fieldPath == "spec.nodeName")) | length) == 1
	   then "ok NODE_NAME from spec.nodeName" else "FAIL no NODE_NAME from spec.nodeName" end),
	  (if $c.args == ["serve", "--node", "$(NODE_NAME)", "--metrics-addr", "[::]:9464"] then "ok runs serve --node $(NODE_NAME) --metrics-addr [::]:9464 (IPv6 and IPv4)" else "FAIL args \($c.args)" end),
	  (if $s.serviceAccountName == "drainer" then "ok ServiceAccount drainer" else "FAIL serviceAccountName \($s.serviceAccountName)" end)' \
	<(kubectl kustomize deploy/ | "$KUBECTL" create --dry-run=client -f - -o json | jq -s '.[] | select(.kind == "DaemonSet")')
if $real_nodes; then
	check_eq "the live DaemonSet: image $pod_image, serve --node \$(NODE_NAME) --metrics-addr \$(POD_IP):9464, POD_IP from status.podIP" \
		"$pod_image serve --node \$(NODE_NAME) --metrics-addr \$(POD_IP):9464 status.podIP" \
		"$(kubectl -n drainer-system get ds drainer -o json | jq -r '.spec.template.spec.containers[0]
			| "\(.image) \(.args | join(" ")) \(.env[] | select(.name == "POD_IP") | .valueFrom.fieldRef.fieldPath)"')"
fi

check_eq "namespace enforces Pod Security restricted (and admitted the pods)" restricted \
	"$(kubectl get ns drainer-system -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')"
if $real_nodes; then
	# The kubelet reports the image each container runs: for an OCI image, its repo digest.
	want=$pod_image
	[ -n "$manifest" ] && want=localhost/drainer@$manifest
	check_eq "every drainer pod's container runs $want (status.containerStatuses[].imageID)" "$n" \
		"$(kubectl -n drainer-system get pods -l app.kubernetes.io/component=node-agent -o json |
			jq --arg w "$want" '[.items[] | select(.metadata.deletionTimestamp == null) | .status.containerStatuses[0]
				| select(.ready and (.imageID == $w or ($w | startswith("localhost/") | not)) and .image == "'"$pod_image"'")] | length')"
fi

# A cordoned node with the drain taint still gets its drainer pod back.
kubectl cordon node-3 >/dev/null && kubectl taint node node-3 drainer.io/draining:NoSchedule --overwrite >/dev/null
old=$(kubectl -n drainer-system get pods -l app.kubernetes.io/component=node-agent --field-selector spec.nodeName=node-3 -o name)
kubectl -n drainer-system delete "$old" --wait=false >/dev/null
node3_back() {
	kubectl -n drainer-system get pods -l app.kubernetes.io/component=node-agent --field-selector spec.nodeName=node-3 -o json |
		jqe --arg old "${old#pod/}" '[.items[] | select(.metadata.name != $old and .status.phase == "Running")] | length == 1'
}
wait_until 60 node3_back
check "a new drainer pod runs on node-3 while it is cordoned and tainted drainer.io/draining:NoSchedule" node3_back
kubectl taint node node-3 drainer.io/draining:NoSchedule- >/dev/null
kubectl uncordon node-3 >/dev/null

# --- RBAC: exactly DESIGN.md's verbs (+ PDB reads; Events only in default) -----------
check_eq "ClusterRole drainer: exactly these rules" \
	'["/namespaces:get,list,watch","/nodes/status:patch","/nodes:get,list,patch,watch","/pods/eviction:create","/pods:get,list,watch","apps/daemonsets:get","policy/poddisruptionbudgets:get,list,watch","resource.k8s.io/devicetaintrules:create,delete,get","resource.k8s.io/resourceclaims:get,list,watch","resource.k8s.io/resourceslices:get,list,watch"]' \
	"$(kubectl get clusterrole drainer -o json | jq -c '[.rules[] | .apiGroups[] as $g | .resources[] as $r
		| "\($g)/\($r):\(.verbs | sort | join(","))"] | sort')"
check_eq "ClusterRole drainer: namespaces only by name, drainer-system alone (serve's pause)" \
	'[["drainer-system"]]' "$(kubectl get clusterrole drainer -o json | jq -c '[.rules[] | select(.resources | index("namespaces")) | .resourceNames]')"
check_eq "Role drainer-leases (drainer-system): exactly leases get/list/watch/create/update/delete" \
	'["coordination.k8s.io/leases:create,delete,get,list,update,watch"]' \
	"$(kubectl -n drainer-system get role drainer-leases -o json | jq -c '[.rules[] | .apiGroups[] as $g | .resources[] as $r
		| "\($g)/\($r):\(.verbs | sort | join(","))"] | sort')"
check_eq "ClusterRole drainer-events: exactly events create (kept to namespace default by the policy drainer-events)" \
	'["/events:create"]' \
	"$(kubectl get clusterrole drainer-events -o json | jq -c '[.rules[] | .apiGroups[] as $g | .resources[] as $r
		| "\($g)/\($r):\(.verbs | sort | join(","))"] | sort')"
check_eq "bindings: drainer -> ClusterRoles drainer and drainer-events, Role drainer-leases (drainer-system); no Role in default" \
	"ClusterRoleBinding/drainer-events:ClusterRole/drainer-events:drainer-system/drainer ClusterRoleBinding/drainer:ClusterRole/drainer:drainer-system/drainer RoleBinding/drainer-system/drainer-leases:Role/drainer-leases:drainer-system/drainer" \
	"$({ kubectl get clusterrolebinding drainer drainer-events -o json | jq -r '.items[] | "\(.kind)/\(.metadata.name):\(.roleRef.kind)/\(.roleRef.name):\([.subjects[] | "\(.namespace)/\(.name)"] | join(","))"'
	   kubectl get rolebinding -A -l app.kubernetes.io/name=drainer -o json | jq -r '.items[] | "RoleBinding/\(.metadata.namespace)/\(.metadata.name):\(.roleRef.kind)/\(.roleRef.name):\([.subjects[] | "\(.namespace)/\(.name)"] | join(","))"'; } | sort | tr '\n' ' ' | sed 's/ $//')"

can() { # expected(yes|no) verb resource [namespace] [subresource]
	local want=$1 verb=$2 res=$3 ns=${4:-} sub=${5:-} args got
	args=("$verb" "$res" "--as=$SA")
	[ -n "$ns" ] && args+=(-n "$ns")
	[ -n "$sub" ] && args+=("--subresource=$sub")
	got=$(kubectl auth can-i "${args[@]}" 2>/dev/null)
	check_eq "can-i $verb $res${sub:+/$sub}${ns:+ -n $ns}: $want" "$want" "$got"
}
for v in get list watch patch; do can yes "$v" nodes; done
for v in get list watch; do can yes "$v" pods "" ; can yes "$v" pods demo; done
can yes create pods demo eviction
for r in resourceclaims.resource.k8s.io resourceslices.resource.k8s.io; do
	for v in get list watch; do can yes "$v" "$r"; done
done
can yes get daemonsets.apps dra-system
can yes create events default
can no patch events default
# (RBAC grants events create in every namespace, so that an overlay's namespace: cannot
# take it away; the policies drainer-events and drainer-own-node-events keep it to
# default: proven below with node-bound tokens)
can yes create events demo
can no create configmaps drainer-system
can no update configmaps drainer-system
can no patch namespaces drainer-system
can no update namespaces drainer-system
for v in get list watch; do can yes "$v" poddisruptionbudgets.policy; done
for v in get list watch create update delete; do can yes "$v" leases.coordination.k8s.io drainer-system; done
# and nothing more
for v in create update patch delete deletecollection; do can no "$v" resourceslices.resource.k8s.io; done
for v in create update patch delete; do can no "$v" deviceclasses.resource.k8s.io; done
for v in create update patch delete; do can no "$v" resourceclaims.resource.k8s.io demo; done
for v in get list create update delete; do can no "$v" secrets drainer-system; can no "$v" secrets kube-system; done
for v in delete deletecollection create update; do can no "$v" pods demo; done
for ns in default kube-node-lease kube-system; do can no create leases.coordination.k8s.io "$ns"; can no update leases.coordination.k8s.io "$ns"; done
can no update nodes
can no delete nodes
can no update daemonsets.apps dra-system
can no list daemonsets.apps
can no create serviceaccounts drainer-system token
can no escalate clusterroles.rbac.authorization.k8s.io

# SubjectAccessReview: the same answers from the authorizer itself.
sar() { # expected(true|false) description resourceAttributes-json
	local got
	got=$(jq -n --arg user "$SA" --argjson groups "$SA_GROUPS" --argjson ra "$3" \
		'{apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: {user: $user, groups: $groups, resourceAttributes: $ra}}' |
		"$KUBECTL" create -f - -o json 2>/dev/null | jq -r '.status.allowed')
	check_eq "SubjectAccessReview $2: allowed=$1" "$1" "$got"
}
sar true "create pods/eviction in demo" '{"verb":"create","resource":"pods","subresource":"eviction","namespace":"demo"}'
sar true "patch nodes node-1" '{"verb":"patch","resource":"nodes","name":"node-1"}'
sar true "patch nodes/status node-1 (--node-conditions)" '{"verb":"patch","resource":"nodes","subresource":"status","name":"node-1"}'
sar false "update nodes/status node-1" '{"verb":"update","resource":"nodes","subresource":"status","name":"node-1"}'
sar true "list resourceclaims" '{"verb":"list","group":"resource.k8s.io","resource":"resourceclaims"}'
sar true "update leases in drainer-system" '{"verb":"update","group":"coordination.k8s.io","resource":"leases","namespace":"drainer-system"}'
sar false "create resourceslices" '{"verb":"create","group":"resource.k8s.io","resource":"resourceslices"}'
sar false "update resourceslices" '{"verb":"update","group":"resource.k8s.io","resource":"resourceslices","name":"node-1-gpu.example.com"}'
sar false "create deviceclasses" '{"verb":"create","group":"resource.k8s.io","resource":"deviceclasses"}'
sar false "get secrets in drainer-system" '{"verb":"get","resource":"secrets","namespace":"drainer-system"}'
sar false "delete pods in demo" '{"verb":"delete","resource":"pods","namespace":"demo"}'
sar false "create leases in default" '{"verb":"create","group":"coordination.k8s.io","resource":"leases","namespace":"default"}'

# --- drainer with the ServiceAccount's token, not as admin ------------------------------
sakc=$e2e_tmp/sa.kubeconfig
server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
# (mkkc TOKEN FILE: lib.sh)
# A token not bound to any object: it names no node (what `kubectl create token` gives).
token=$(kubectl -n drainer-system create token drainer --duration=10m)
check "a token for the drainer ServiceAccount, the server and its CA" test -n "$token" -a -n "$server" -a -n "$ca"
mkkc "$token" "$sakc"
sak() { "$KUBECTL" --kubeconfig "$sakc" "$@"; }
check_eq "the token is the drainer ServiceAccount" "$SA" "$(sak auth whoami -o jsonpath='{.status.userInfo.username}' 2>/dev/null)"
sak -n drainer-system get secrets >/dev/null 2>"$e2e_tmp/secrets.err"
check "with the token: reading Secrets is forbidden" grep -q Forbidden "$e2e_tmp/secrets.err"
sak -n demo delete pod "$(kubectl -n demo get pods -l app=web -o jsonpath='{.items[0].metadata.name}')" --dry-run=server >/dev/null 2>"$e2e_tmp/del.err"
check "with the token: deleting a pod is forbidden" grep -q Forbidden "$e2e_tmp/del.err"
sak create -f - --dry-run=server >/dev/null 2>"$e2e_tmp/slice.err" <<'EOF'
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: deploy-test-forbidden}
spec: {driver: gpu.example.com, nodeName: node-1, pool: {name: node-1, generation: 1, resourceSliceCount: 1}, devices: []}
EOF
check "with the token: creating a ResourceSlice is forbidden" grep -q Forbidden "$e2e_tmp/slice.err"
# RBAC allows the patch; the admission policy refuses it (the token names no node).
# The policies take effect a moment after they are created: wait for the first refusal.
nonode_refused() { # [--dry-run=server]
	local out
	out=$(sak annotate ${1:+"$1"} node node-3 drainer.io/deploy-test=1 2>&1)
	grep -q 'names no node' <<<"$out"
}
wait_until 30 nonode_refused --dry-run=server
check "with a token naming no node: annotating a Node is refused by ValidatingAdmissionPolicy drainer-own-node" nonode_refused
check_eq "... and the annotation is not there" "" "$(node_ann node-3 drainer.io/deploy-test)"

start=$(audit_lines)
drainer_run status status node-1 --kubeconfig "$sakc" -o json
check_rc "drainer status node-1 with the ServiceAccount's token" 0 status
check "status reports the demo's claims on node-1" [ "$(jq '.claims | length' "$e2e_tmp/status.out" 2>/dev/null)" -ge 3 ]
check "status lists node-1's drainer pod" jqe '[.pods[][] | select(.namespace == "drainer-system")] | length == 1' "$e2e_tmp/status.out"
drainer_run plan plan node-1 --kubeconfig "$sakc" -o json
check_rc "drainer plan node-1 with the ServiceAccount's token" 0 plan
check_eq "plan read the PodDisruptionBudgets" "demo/web" "$(jq -r '[.pdbs[] | "\(.namespace)/\(.name)"] | join(" ")' "$e2e_tmp/plan.out" 2>/dev/null)"
check "plan leaves node-1's drainer pod on the node" jqe '[.stays[] | select(.namespace == "drainer-system")] | length == 1' "$e2e_tmp/plan.out"
check "plan found the claims and the driver" jqe '(.claims | length) >= 3 and (.drivers | length) == 1' "$e2e_tmp/plan.out"
sleep 1
audit_window "$start" "$e2e_tmp/audit.json"
jq_checks --arg sa "$SA" '[.[] | select(.userAgent | startswith("drainer/"))] as $d
	| (if ($d | length) > 0 and ([$d[] | select(.user.username != $sa)] | length) == 0
	   then "ok all \($d | length) requests of drainer were made as \($sa)"
	   else "FAIL drainer requests as \([$d[].user.username] | unique | join(","))" end),
	  ([$d[].verb] | unique) as $v
	  | (if ($v - ["get", "list", "watch"]) == [] then "ok drainer only read (\($v | join(",")))" else "FAIL drainer verbs \($v | join(","))" end),
	  ([$d[] | select(.responseStatus.code >= 400)] as $bad
	   | if ($bad | length) == 0 then "ok no request of drainer was refused"
	     else "FAIL refused: \([$bad[] | "\(.verb) \(.requestURI) \(.responseStatus.code)"] | join("; "))" end)' "$e2e_tmp/audit.json"

# --- the admission policies (deploy/node-policy.yaml), with tokens bound to pods ---------
# ds_pod NODE: the name of the DaemonSet's live pod on NODE.
ds_pod() {
	kubectl -n drainer-system get pods -l app.kubernetes.io/component=node-agent --field-selector "spec.nodeName=$1" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].metadata.name // ""'
}
pod1=$(ds_pod node-1) pod2=$(ds_pod node-2)
n1kc=$e2e_tmp/node1.kubeconfig n2kc=$e2e_tmp/node2.kubeconfig n3kc=$e2e_tmp/node3-nodebound.kubeconfig
mkkc "$(kubectl -n drainer-system create token drainer --bound-object-kind Pod --bound-object-name "$pod1" --duration=10m)" "$n1kc"
mkkc "$(kubectl -n drainer-system create token drainer --bound-object-kind Pod --bound-object-name "$pod2" --duration=10m)" "$n2kc"
k1() { "$KUBECTL" --kubeconfig "$n1kc" "$@"; }
k2() { "$KUBECTL" --kubeconfig "$n2kc" "$@"; }
# The API server puts the bound pod's node into the token's user info
# (pkg/serviceaccount/claims.go, ServiceAccountTokenPodNodeInfo, GA and locked on in 1.32).
k2 auth whoami -o json >"$e2e_tmp/whoami2.json" 2>&1
jq_checks --arg pod "$pod2" '.status.userInfo as $u
	| if $u.extra["authentication.kubernetes.io/node-name"] == ["node-2"] and $u.extra["authentication.kubernetes.io/pod-name"] == [$pod]
	  then "ok SelfSubjectReview of the token bound to \($pod): user.extra node-name [node-2], pod-name [\($pod)]"
	  else "FAIL SelfSubjectReview of the token bound to \($pod): \($u | tostring)" end' "$e2e_tmp/whoami2.json"

# (The refused writes are server dry runs: the admission policies see them as any
# other request, and if one were admitted it would still change nothing.)
e2e_cleanup_hooks+=("kubectl taint node node-2 deploy-test:NoSchedule- >/dev/null 2>&1; kubectl annotate node node-1 node-2 node-3 drainer.io/deploy-test- >/dev/null 2>&1")
policy_start=$(audit_lines)
before1=$(node_fingerprint node-1)
kubectl cordon node-3 >/dev/null
before3=$(node_fingerprint node-3)
# What drainer's cordon patch is: a merge patch of drainer.io/ annotations, unschedulable
# and the taint list (the node's own taints, in order, plus drainer.io/draining:NoSchedule).
kubectl taint node node-2 deploy-test=keep:NoSchedule --overwrite >/dev/null
cordon_patch=$(kubectl get node node-2 -o json | jq -c '{metadata: {annotations: {"drainer.io/deploy-test": "1"}},
	spec: {unschedulable: true, taints: ((.spec.taints // []) + [{key: "drainer.io/draining", effect: "NoSchedule"}])}}')
admission_admitted own-cordon "node-2's token: a merge patch of its own Node's drainer.io/ annotation, unschedulable and drainer.io/draining:NoSchedule is admitted" \
	k2 patch node node-2 --type merge -p "$cordon_patch"
check_eq "... and node-2 is cordoned, tainted, annotated (the other taint kept)" "true true 1 true" \
	"$(kubectl get node node-2 -o json | jq -r '"\(.spec.unschedulable) \([.spec.taints[] | select(.key == "drainer.io/draining" and .effect == "NoSchedule")] | length == 1) \(.metadata.annotations["drainer.io/deploy-test"]) \([.spec.taints[] | select(.key == "deploy-test")] | length == 1)"')"
# node_guarded NODE: what the refused requests below try to change (the node lifecycle
# controller's own node.kubernetes.io/unschedulable taint left out: it comes and goes).
node_guarded() {
	kubectl get node "$1" -o json | jq -cS '{labels: .metadata.labels, annotations: .metadata.annotations,
		owners: (.metadata.ownerReferences // []), provider: (.spec.providerID // ""), unschedulable: (.spec.unschedulable // false),
		taints: [.spec.taints // [] | .[] | select(.key != "node.kubernetes.io/unschedulable") | {key, value, effect}]}'
}
guarded2=$(node_guarded node-2)
admission_refused other-node "node-2's token: the same drainer.io/ annotation on node-1" "may change only Node node-2, not node-1" \
	k2 annotate --dry-run=server node node-1 drainer.io/deploy-test=1
# (not `kubectl cordon`: it exits 0 when its patch is refused)
admission_refused other-cordon "node-2's token: cordoning node-1" "may change only Node node-2, not node-1" \
	k2 patch --dry-run=server node node-1 --type merge -p '{"spec":{"unschedulable":true}}'
admission_refused other-uncordon "node-2's token: uncordoning node-3 (cordoned by an admin)" "may change only Node node-2, not node-3" \
	k2 patch --dry-run=server node node-3 --type merge -p '{"spec":{"unschedulable":false}}'

admission_refused other-taint "node-2's token: another taint on node-2" "may add or remove only the taint drainer.io/draining:NoSchedule" \
	k2 taint --dry-run=server node node-2 deploy-test-2=x:NoExecute
admission_refused remove-taint "node-2's token: removing someone else's taint from node-2" "may add or remove only the taint drainer.io/draining:NoSchedule" \
	k2 taint --dry-run=server node node-2 deploy-test:NoSchedule-
admission_refused noexecute "node-2's token: drainer.io/draining with effect NoExecute" "has no value and the effect NoSchedule" \
	k2 taint --dry-run=server node node-2 drainer.io/draining:NoExecute
# --out-of-service: upstream's non-graceful shutdown taint only as drainer
# applies it (nodeshutdown:NoExecute, with drainer.io/out-of-service) and never on a Ready node.
admission_refused oos-ready "node-2's token: node.kubernetes.io/out-of-service on node-2 while it is Ready" \
	"may add the taint node.kubernetes.io/out-of-service only while the Node is not Ready" \
	k2 patch --dry-run=server node node-2 --type merge -p "$(kubectl get node node-2 -o json | jq -c '{metadata: {annotations: {"drainer.io/out-of-service": "2026-01-01T00:00:00Z"}},
		spec: {taints: ((.spec.taints // []) + [{key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute"}])}}')"
admission_refused oos-value "node-2's token: node.kubernetes.io/out-of-service with another value" "is nodeshutdown:NoExecute" \
	k2 taint --dry-run=server node node-2 node.kubernetes.io/out-of-service=x:NoExecute
admission_refused other-label "node-2's token: a label on node-2" "may change no label" k2 label --dry-run=server node node-2 deploy-test=1
admission_refused driver-label "node-2's token: the driver's label, while the policy's parameter names none" "may change no label" \
	k2 label --dry-run=server node node-2 gpu.example.com/present=drainer-paused --overwrite
admission_refused other-ann "node-2's token: an annotation outside drainer.io/ on node-2" "may change only drainer.io/ annotations, not deploy-test.example.com/x" \
	k2 annotate --dry-run=server node node-2 deploy-test.example.com/x=1
admission_refused owner "node-2's token: an ownerReference on node-2 (the garbage collector would delete the Node)" "finalizers or ownerReferences" \
	k2 patch --dry-run=server node node-2 --type merge -p '{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}'
admission_refused provider "node-2's token: spec.providerID of node-2" "may change only unschedulable and the drainer.io/draining taint" \
	k2 patch --dry-run=server node node-2 --type merge -p '{"spec":{"providerID":"deploy-test://x"}}'
# --node-conditions: through nodes/status, only DrainInProgress and
# Drained, with drainer's reasons, on its own Node; nothing else of the status.
cond() { # TYPE STATUS REASON: a strategic merge patch of one node condition
	printf '{"status":{"conditions":[{"type":"%s","status":"%s","reason":"%s","message":"deploy-test"}]}}' "$1" "$2" "$3"
}
# status_patch KUBECONFIG NODE BODY: a server dry-run strategic merge patch of NODE's
# status with that kubeconfig's token, sent as drainer sends it (kubectl patch GETs
# nodes/status first, which the role does not grant); the API server's message on stderr.
echo "$ca" | base64 -d >"$e2e_tmp/ca.crt"
status_patch() {
	local code
	code=$(curl -sS --cacert "$e2e_tmp/ca.crt" -H "Authorization: Bearer $(awk '$1 == "token:" {print $2}' "$1")" \
		-H 'Content-Type: application/strategic-merge-patch+json' -X PATCH --data "$3" \
		-o "$e2e_tmp/status-patch.body" -w '%{http_code}' "$server/api/v1/nodes/$2/status?dryRun=All") || return 1
	[ "$code" = 200 ] || { jq -r '.message // .' "$e2e_tmp/status-patch.body" >&2; return 1; }
}
admission_admitted own-conditions "node-2's token: DrainInProgress on its own Node through nodes/status (server dry run)" \
	status_patch "$n2kc" node-2 "$(cond DrainInProgress True DrainerDraining)"
admission_refused other-conditions "node-2's token: DrainInProgress on node-1" "may change only Node node-2, not node-1" \
	status_patch "$n2kc" node-1 "$(cond DrainInProgress True DrainerDraining)"
admission_refused ready-condition "node-2's token: the kubelet's Ready condition of node-2" "may change only the conditions DrainInProgress and Drained" \
	status_patch "$n2kc" node-2 "$(cond Ready False DrainerDraining)"
admission_refused condition-reason "node-2's token: Drained with a reason not drainer's" "with a reason" \
	status_patch "$n2kc" node-2 "$(cond Drained True SomeoneElse)"
admission_refused allocatable "node-2's token: the allocatable of node-2" "may change only the conditions DrainInProgress and Drained" \
	status_patch "$n2kc" node-2 '{"status":{"allocatable":{"pods":"1000"}}}'
check_eq "node-1 is as it was" "$before1" "$(node_fingerprint node-1)"
check_eq "node-3 is as it was (still cordoned)" "$before3" "$(node_fingerprint node-3)"
kubectl uncordon node-3 >/dev/null
check_eq "node-2 kept no change of a refused request" "$guarded2" "$(node_guarded node-2)"
# The label strategy: the policy's parameter (annotation drainer.io/driver-stop-label of
# Namespace drainer-system) names the one label the pods may change.
kubectl annotate namespace drainer-system drainer.io/driver-stop-label=gpu.example.com/present --overwrite >/dev/null
label_admitted() { k2 label node node-2 gpu.example.com/present=drainer-paused --overwrite; }
wait_until 20 label_admitted
admission_admitted label-set "with driver-stop-label gpu.example.com/present: node-2's token may set that label on node-2" label_admitted
admission_admitted label-back "... and put it back" k2 label node node-2 gpu.example.com/present=true --overwrite
admission_refused label-other "... but still no other label" "may change only the label gpu.example.com/present" k2 label --dry-run=server node node-2 deploy-test=1
admission_refused label-node1 "... and not on node-1" "may change only Node node-2" k2 label --dry-run=server node node-1 gpu.example.com/present=drainer-paused --overwrite
admission_admitted own-undo "node-2's token: uncordon, drainer.io/draining removed, annotation removed" \
	k2 patch node node-2 --type merge -p "$(kubectl get node node-2 -o json | jq -c '{metadata: {annotations: {"drainer.io/deploy-test": null}},
		spec: {unschedulable: false, taints: [.spec.taints[] | select(.key != "drainer.io/draining")]}}')"
# Events: only about its own Node, only in namespace default (RBAC grants them in every
# namespace: the policies drainer-events and drainer-own-node-events keep them there).
# (outside default the API server's validation wants involvedObject.namespace to be the
# Event's own, and a Pod's in default too: set so, the request reaches admission)
event() { # NODE [NAMESPACE [KIND]]: an Event about NODE, as drainer posts it (in default)
	local ns=${2:-default} kind=${3:-Node} ons=
	{ [ "$ns" != default ] || [ "$kind" != Node ]; } && ons=$(printf ',"namespace":"%s"' "$ns")
	printf '{"apiVersion":"v1","kind":"Event","metadata":{"generateName":"deploy-test-","namespace":"%s"},"involvedObject":{"apiVersion":"v1","kind":"%s","name":"%s"%s},"reason":"DrainerPhase","message":"deploy-test","type":"Normal","source":{"component":"drainer"},"reportingComponent":"drainer"}' "$ns" "$kind" "$1" "$ons"
}
admission_admitted own-event "node-2's token: an Event about node-2 in namespace default (server dry run)" \
	bash -c "$(declare -f event); event node-2 | '$KUBECTL' --kubeconfig '$n2kc' create -f - --dry-run=server"
admission_refused other-event "node-2's token: an Event about node-1" "may only post Events about Node node-2" \
	bash -c "$(declare -f event); event node-1 | '$KUBECTL' --kubeconfig '$n2kc' create -f - --dry-run=server"
for ens in demo kube-system drainer-system; do
	admission_refused "ns-event-$ens" "node-2's token: an Event about node-2 in namespace $ens" "Events in namespace default only" \
		bash -c "$(declare -f event); event node-2 $ens | '$KUBECTL' --kubeconfig '$n2kc' create -f - --dry-run=server"
done
admission_refused ns-event-other "node-2's token: an Event about node-1 in namespace demo" "may only post Events about Node node-2\\|Events in namespace default only" \
	bash -c "$(declare -f event); event node-1 demo | '$KUBECTL' --kubeconfig '$n2kc' create -f - --dry-run=server"
admission_refused pod-event "node-2's token: an Event about a Pod (in default)" "Events about Node node-2\\|only creates Events about a Node" \
	bash -c "$(declare -f event); event node-2 default Pod | '$KUBECTL' --kubeconfig '$n2kc' create -f - --dry-run=server"
# Evictions: the policy cannot see the pod's node; it can refuse grace period 0.
evict() { # KUBECONFIG POD [DELETE-OPTIONS-JSON]: a server dry-run eviction of a drainer-system pod
	printf '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"drainer-system"}%s}' "$2" "${3:+,\"deleteOptions\":$3}" |
		"$KUBECTL" --kubeconfig "$1" create --raw "/api/v1/namespaces/drainer-system/pods/$2/eviction?dryRun=All" -f -
}
admission_refused grace0 "node-2's token: an eviction with grace period 0" "may not evict with grace period 0" evict "$n2kc" "$pod2" '{"gracePeriodSeconds":0}'
admission_admitted evict-own "node-2's token: an eviction of a pod on node-2 (server dry run)" evict "$n2kc" "$pod2"
admission_admitted evict-other "node-2's token: an eviction of a pod on node-1 is admitted too (server dry run): an Eviction names no node, so this is not confined" \
	evict "$n2kc" "$pod1" '{"gracePeriodSeconds":5}'
admission_refused evict-nonode "a token naming no node: an eviction" "names no node" evict "$sakc" "$pod2"
# DeviceTaintRules (--driver): created as drainer sends them (drainer/dra/taintrule.c) for
# its own node's pool with NoSchedule, deleted only if its own; anything else refused.
if kubectl api-resources --api-group resource.k8s.io -o name 2>/dev/null | grep -qx devicetaintrules.resource.k8s.io; then
	dtr_api=$(kubectl api-resources --api-group resource.k8s.io --no-headers 2>/dev/null |
		awk '$1 == "devicetaintrules" { for (i = 2; i <= NF; i++) if ($i ~ /^resource\.k8s\.io\//) print $i }')
	rule() { # NAME NODE-ANNOTATION POOL EFFECT [SELECTOR-JSON]: a DeviceTaintRule as drainer sends it
		printf '{"apiVersion":"%s","kind":"DeviceTaintRule","metadata":{"name":"%s","labels":{"app.kubernetes.io/managed-by":"drainer"},"annotations":{"drainer.io/node":"%s"}},"spec":{"deviceSelector":%s,"taint":{"key":"drainer.io/draining","effect":"%s"}}}' \
			"$dtr_api" "$1" "$2" "${5:-{\"driver\":\"gpu.example.com\",\"pool\":\"$3\"\}}" "$4"
	}
	rule_create() { # KUBECONFIG ARGS-OF-rule...: a server dry-run create
		local kc=$1
		shift
		rule "$@" | "$KUBECTL" --kubeconfig "$kc" create -f - --dry-run=server
	}
	kubectl create clusterrole deploy-test-dtr --verb=get,create,delete,update,patch --resource=devicetaintrules.resource.k8s.io >/dev/null
	kubectl create clusterrolebinding deploy-test-dtr --clusterrole=deploy-test-dtr --serviceaccount=drainer-system:drainer >/dev/null
	# drainer's names: drainer-LEN-NODE-DRIVER-I (LEN = the length of NODE); the old
	# drainer-NODE-DRIVER-I only for deletes
	own2=drainer-6-node-2-gpu.example.com-0 own1=drainer-6-node-1-gpu.example.com-0
	old2=drainer-node-2-gpu.example.com-0 old2b=drainer-node-2-b-gpu.example.com-0
	e2e_cleanup_hooks+=("kubectl delete clusterrolebinding,clusterrole deploy-test-dtr --ignore-not-found >/dev/null 2>&1; kubectl delete devicetaintrules $own2 $own1 $old2 $old2b --ignore-not-found >/dev/null 2>&1")
	admission_admitted dtr-own "node-2's token: a NoSchedule DeviceTaintRule of pool node-2, as drainer sends it (server dry run)" \
		rule_create "$n2kc" "$own2" node-2 node-2 NoSchedule
	admission_refused dtr-noexecute "node-2's token: the same rule with effect NoExecute" "has the taint drainer.io/draining:NoSchedule" \
		rule_create "$n2kc" "$own2" node-2 node-2 NoExecute
	admission_refused dtr-other-pool "node-2's token: a rule of node-1's pool" "may taint only the devices of its own node's pool node-2, not pool node-1" \
		rule_create "$n2kc" "$own2" node-2 node-1 NoSchedule
	admission_refused dtr-other-name "node-2's token: a rule named for node-1" "may create only DeviceTaintRules of its node (named drainer-6-node-2-DRIVER-I" \
		rule_create "$n2kc" "$own1" node-1 node-1 NoSchedule
	# A node whose name is another's prefix (node-2 of node-2-b): node-2 used to be able to
	# take node-2-b's rule name (drainer-node-2-b-...) before node-2-b did; the name is
	# now node-2-b's alone, with its content node-2's own or not.
	admission_refused dtr-squat "node-2's token: node-2-b's rule name (drainer-8-node-2-b-...), content of node-2" "may create only DeviceTaintRules of its node" \
		rule_create "$n2kc" drainer-8-node-2-b-gpu.example.com-0 node-2 node-2 NoSchedule
	admission_refused dtr-squat-old "node-2's token: node-2-b's old-scheme name (drainer-node-2-b-...)" "may create only DeviceTaintRules of its node" \
		rule_create "$n2kc" "$old2b" node-2 node-2 NoSchedule
	admission_refused dtr-old-create "node-2's token: creating under the old name drainer-node-2-DRIVER-I" "may create only DeviceTaintRules of its node" \
		rule_create "$n2kc" "$old2" node-2 node-2 NoSchedule
	admission_refused dtr-other-driver-name "node-2's token: a name of another driver than its selector's" "may create only DeviceTaintRules of its node" \
		rule_create "$n2kc" drainer-6-node-2-nic.example.com-0 node-2 node-2 NoSchedule
	admission_refused dtr-bad-index "node-2's token: a name that does not end in the index" "may create only DeviceTaintRules of its node" \
		rule_create "$n2kc" drainer-6-node-2-gpu.example.com-0-x node-2 node-2 NoSchedule
	admission_refused dtr-no-selector "node-2's token: a rule without a pool (every node's devices of the driver)" "selects a driver and a pool" \
		rule_create "$n2kc" "$own2" node-2 node-2 NoSchedule '{"driver":"gpu.example.com"}'
	admission_refused dtr-no-driver "node-2's token: a rule without a driver" "selects a driver and a pool" \
		rule_create "$n2kc" drainer-6-node-2--0 node-2 node-2 NoSchedule '{"pool":"node-2"}'
	# A device drain's rule (--device): the same name scheme (a 19-digit index), a
	# deviceSelector with the device too: admitted for the node's own pool only.
	dev2=drainer-6-node-2-gpu.example.com-1234567890123456789
	admission_admitted dtr-own-device "node-2's token: a device rule of pool node-2 (driver, pool, device), as drainer sends it" \
		rule_create "$n2kc" "$dev2" node-2 node-2 NoSchedule '{"driver":"gpu.example.com","pool":"node-2","device":"gpu-0"}'
	admission_refused dtr-other-device "node-2's token: a device rule of node-1's pool" "may taint only the devices of its own node's pool node-2, not pool node-1" \
		rule_create "$n2kc" "$dev2" node-2 node-1 NoSchedule '{"driver":"gpu.example.com","pool":"node-1","device":"gpu-0"}'
	admission_refused dtr-device-noexecute "node-2's token: a device rule with effect NoExecute" "has the taint drainer.io/draining:NoSchedule" \
		rule_create "$n2kc" "$dev2" node-2 node-2 NoExecute '{"driver":"gpu.example.com","pool":"node-2","device":"gpu-0"}'
	# plan --device's preview: the device's name with a 20-digit index (a 2 before the
	# device's 19 digits) and the effect None, which taints nothing.
	prev2=drainer-6-node-2-gpu.example.com-21234567890123456789
	admission_admitted dtr-own-preview "node-2's token: a None-effect preview rule of a device of pool node-2, as plan --device sends it" \
		rule_create "$n2kc" "$prev2" node-2 node-2 None '{"driver":"gpu.example.com","pool":"node-2","device":"gpu-0"}'
	admission_refused dtr-other-preview "node-2's token: a None-effect preview rule of node-1's pool" "may taint only the devices of its own node's pool node-2, not pool node-1" \
		rule_create "$n2kc" "$prev2" node-2 node-1 None '{"driver":"gpu.example.com","pool":"node-1","device":"gpu-0"}'
	admission_refused dtr-nonode "a token naming no node: a rule" "names no node" \
		rule_create "$sakc" "$own2" node-2 node-2 NoSchedule
	# Deletes: real rules (an admin's create), node-2's deleted by node-2's token (also under
	# the old name, with its annotation: a drain an older drainer recorded), node-1's and
	# node-2-b's refused.
	for r in "$own2 node-2 node-2" "$own1 node-1 node-1" "$old2 node-2 node-2" "$old2b node-2-b node-2-b"; do
		# shellcheck disable=SC2086
		rule $r NoSchedule | kubectl create -f - >/dev/null
	done
	admission_refused dtr-update "node-2's token: an update of its own rule" "never updates one" \
		k2 annotate --dry-run=server devicetaintrule "$own2" drainer.io/x=1
	admission_refused dtr-delete-other "node-2's token: deleting node-1's rule" "may delete only DeviceTaintRules of its node" \
		k2 delete devicetaintrule "$own1" --dry-run=server
	admission_refused dtr-delete-prefix "node-2's token: deleting node-2-b's rule of the old name (drainer-node-2-...)" "may delete only DeviceTaintRules of its node" \
		k2 delete devicetaintrule "$old2b" --dry-run=server
	admission_admitted dtr-get "node-2's token reads its rule back (get), as drainer does before deleting it" \
		k2 get devicetaintrule "$own2" -o name
	admission_admitted dtr-delete-own "node-2's token: deleting its own rule" k2 delete devicetaintrule "$own2"
	admission_admitted dtr-delete-own-old "node-2's token: deleting its own rule of the old name" k2 delete devicetaintrule "$old2"
	kubectl delete devicetaintrule "$own1" "$old2b" >/dev/null
	kubectl delete clusterrolebinding,clusterrole deploy-test-dtr >/dev/null
else
	echo "  (the API server serves no DeviceTaintRule: the policy drainer-own-node-taintrules is not exercised)"
fi
# A pod DELETE (--disable-eviction, when pods "delete" is granted) names its pod: confined.
kubectl create clusterrole deploy-test-pod-delete --verb=delete --resource=pods >/dev/null
kubectl create clusterrolebinding deploy-test-pod-delete --clusterrole=deploy-test-pod-delete --serviceaccount=drainer-system:drainer >/dev/null
e2e_cleanup_hooks+=("kubectl delete clusterrolebinding,clusterrole deploy-test-pod-delete --ignore-not-found >/dev/null 2>&1")
delete_allowed() { [ "$(kubectl auth can-i delete pods -n drainer-system --as="$SA" 2>/dev/null)" = yes ]; }
wait_until 10 delete_allowed
admission_refused delete-other "with pods delete granted, node-2's token: deleting node-1's pod" "may delete only pods on node node-2, not drainer-system/$pod1 on node-1" \
	k2 -n drainer-system delete pod "$pod1" --dry-run=server
admission_admitted delete-own "... deleting node-2's own pod (server dry run)" k2 -n drainer-system delete pod "$pod2" --dry-run=server
kubectl delete clusterrolebinding,clusterrole deploy-test-pod-delete >/dev/null
# Slot Leases (--max-parallel, drainer-own-node-leases): a node's token takes a slot only
# for its own node, and only a free one or one whose holder's tenure is over; it renews,
# releases and deletes only what its node holds; no renewTime far ahead, no long lease.
# Microseconds, as drainer writes them: a renewal in the same second as the write before
# must still change the Lease, or the server stamps no managedFields time (the policy
# then refuses it for want of the API server's clock).
now_micro() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ "$@"; }
slot_lease() { # NAME HOLDER RENEWTIME [DURATION]: a slot Lease as drainer/kube/slots.c writes it
	jq -nc --arg n "$1" --arg h "$2" --arg t "$3" --argjson d "${4:-120}" '{apiVersion: "coordination.k8s.io/v1", kind: "Lease",
		metadata: {name: $n, namespace: "drainer-system", labels: {"app.kubernetes.io/managed-by": "drainer"}},
		spec: ({leaseDurationSeconds: $d, acquireTime: $t, renewTime: $t, leaseTransitions: 0} + (if $h == "" then {} else {holderIdentity: $h} end))}'
}
slot_as() { # NAME HOLDER: the Lease as it is now, with holderIdentity HOLDER ("" releases it) and renewTime now
	kubectl -n drainer-system get lease "$1" -o json | jq -c --arg h "$2" --arg t "$(now_micro)" 'del(.metadata.managedFields)
		| .spec.renewTime = $t | if $h == "" then del(.spec.holderIdentity) else .spec.holderIdentity = $h end'
}
lease_file() { # JSON CMD...: CMD with JSON in $e2e_tmp/lease.json
	printf '%s\n' "$1" >"$e2e_tmp/lease.json"
	shift
	"$@"
}
slot_holder() { kubectl -n drainer-system get lease "$1" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
e2e_cleanup_hooks+=("kubectl -n drainer-system delete lease drainer-slot-90 drainer-slot-91 drainer-slot-92 --ignore-not-found >/dev/null 2>&1")
admission_refused lease-for-other "node-1's token: creating drainer-slot-90 held by node-2" "may take a slot only for its own node (holderIdentity node-1) or release one, not hold it for node-2" \
	lease_file "$(slot_lease drainer-slot-90 node-2 "$(now_micro)")" k1 create --dry-run=server -f "$e2e_tmp/lease.json"
admission_refused lease-2099 "node-1's token: creating drainer-slot-90 held by node-1 until 2099" "renewTime at most 60 s ahead of the API server" \
	lease_file "$(slot_lease drainer-slot-90 node-1 2099-01-01T00:00:00.000000Z)" k1 create --dry-run=server -f "$e2e_tmp/lease.json"
admission_refused lease-long "node-1's token: creating drainer-slot-90 with leaseDurationSeconds 2000000000" "leaseDurationSeconds 1 to 300" \
	lease_file "$(slot_lease drainer-slot-90 node-1 "$(now_micro)" 2000000000)" k1 create --dry-run=server -f "$e2e_tmp/lease.json"
admission_refused lease-free "node-1's token: creating drainer-slot-90 free (no holder)" "not create a free one" \
	lease_file "$(slot_lease drainer-slot-90 '' "$(now_micro)")" k1 create --dry-run=server -f "$e2e_tmp/lease.json"
admission_refused lease-other-name "node-1's token: a Lease that is not a slot" "may write only the slot Leases drainer-slot-N in drainer-system, not drainer-system/deploy-test" \
	lease_file "$(slot_lease deploy-test node-1 "$(now_micro)")" k1 create --dry-run=server -f "$e2e_tmp/lease.json"
# The cluster mode's leader Lease (serve --all-nodes --leader-elect): a node's token cannot
# take it, and so cannot make the cluster-wide controller stand by.
admission_refused lease-leader "node-1's token: the leader Lease drainer-leader (serve --leader-elect)" "may write only the slot Leases drainer-slot-N in drainer-system, not drainer-system/drainer-leader" \
	lease_file "$(slot_lease drainer-leader node-1_4f2c0001 "$(now_micro)" 15)" k1 create --dry-run=server -f "$e2e_tmp/lease.json"
admission_admitted lease-own2 "node-2's token: creating drainer-slot-90 held by node-2 (as drainer takes a slot)" \
	lease_file "$(slot_lease drainer-slot-90 node-2 "$(now_micro)")" k2 create -f "$e2e_tmp/lease.json"
admission_refused lease-delete-other "node-1's token: deleting drainer-slot-90, which node-2 holds" "may delete only a slot Lease its node holds, not one held by node-2" \
	k1 -n drainer-system delete lease drainer-slot-90 --dry-run=server
admission_refused lease-take-other "node-1's token: taking drainer-slot-90 while node-2 holds it" "may not change slot Lease drainer-slot-90 while node node-2 holds it" \
	lease_file "$(slot_as drainer-slot-90 node-1)" k1 replace --dry-run=server -f "$e2e_tmp/lease.json"
admission_refused lease-free-other "node-1's token: releasing drainer-slot-90 for node-2" "may not change slot Lease drainer-slot-90 while node node-2 holds it" \
	lease_file "$(slot_as drainer-slot-90 '')" k1 replace --dry-run=server -f "$e2e_tmp/lease.json"
# The policy reads the API server's clock from the writer's own managedFields entry
# (kubectl replace: manager kubectl-replace), which the server stamps: a made-up time a
# year on, sent for that entry and for another, cannot make node-2's tenure look over.
admission_refused lease-fake-time "node-1's token: taking it with made-up managedFields times a year ahead" "while node node-2 holds it" \
	lease_file "$(slot_as drainer-slot-90 node-1 | jq -c --arg t "$(date -u -d '+1 year' +%Y-%m-%dT%H:%M:%SZ)" '.metadata.managedFields = [
		{manager: "kubectl-replace", operation: "Update", apiVersion: "coordination.k8s.io/v1", time: $t, fieldsType: "FieldsV1", fieldsV1: {"f:spec": {}}},
		{manager: "x", operation: "Update", apiVersion: "coordination.k8s.io/v1", time: $t, fieldsType: "FieldsV1", fieldsV1: {"f:metadata": {}}}]')" \
		k1 replace --dry-run=server -f "$e2e_tmp/lease.json"
check_eq "... drainer-slot-90 is still held by node-2" node-2 "$(slot_holder drainer-slot-90)"
admission_admitted lease-renew2 "node-2's token: renewing drainer-slot-90" \
	lease_file "$(slot_as drainer-slot-90 node-2)" k2 replace -f "$e2e_tmp/lease.json"
admission_admitted lease-release2 "node-2's token: releasing drainer-slot-90 (holderIdentity cleared)" \
	lease_file "$(slot_as drainer-slot-90 '')" k2 replace -f "$e2e_tmp/lease.json"
admission_admitted lease-take-free "node-1's token: taking the free drainer-slot-90" \
	lease_file "$(slot_as drainer-slot-90 node-1)" k1 replace -f "$e2e_tmp/lease.json"
check_eq "... now held by node-1" node-1 "$(slot_holder drainer-slot-90)"
admission_admitted lease-delete-own "node-1's token: deleting drainer-slot-90, which its node holds" k1 -n drainer-system delete lease drainer-slot-90
# A holder whose tenure is over (renewed 10 min ago, 120 s lease): taken over; a live one
# with renewTime 30 s ahead (a clock a little fast): not.
slot_lease drainer-slot-91 node-2 "$(now_micro -d '-10 min')" | kubectl create -f - >/dev/null
admission_admitted lease-take-over "node-1's token: taking drainer-slot-91, held by node-2 but renewed 10 min ago (120 s lease)" \
	lease_file "$(slot_as drainer-slot-91 node-1)" k1 replace -f "$e2e_tmp/lease.json"
check_eq "... now held by node-1" node-1 "$(slot_holder drainer-slot-91)"
slot_lease drainer-slot-92 node-2 "$(now_micro -d '+30 sec')" | kubectl create -f - >/dev/null
admission_refused lease-take-ahead "node-1's token: taking drainer-slot-92, held by node-2 with renewTime 30 s ahead" "while node node-2 holds it" \
	lease_file "$(slot_as drainer-slot-92 node-1)" k1 replace --dry-run=server -f "$e2e_tmp/lease.json"
kubectl -n drainer-system delete lease drainer-slot-91 drainer-slot-92 >/dev/null
# A token bound to a Node object (the systemd unit's) names its node too.
mkkc "$(kubectl -n drainer-system create token drainer --bound-object-kind Node --bound-object-name node-3 --duration=10m)" "$n3kc"
admission_admitted nodebound-own "a token bound to Node node-3: its drainer.io/ annotation on node-3" \
	"$KUBECTL" --kubeconfig "$n3kc" annotate node node-3 drainer.io/deploy-test=1
admission_refused nodebound-other "... but not on node-1" "may change only Node node-3, not node-1" \
	"$KUBECTL" --kubeconfig "$n3kc" annotate --dry-run=server node node-1 drainer.io/deploy-test=1
kubectl annotate node node-3 drainer.io/deploy-test- >/dev/null
# node-1's own token works on node-1 (the policy is not "node-2 only").
admission_admitted node1-own "node-1's token: its drainer.io/ annotation on node-1" k1 annotate node node-1 drainer.io/deploy-test=1
admission_refused node1-other "node-1's token: the same on node-2" "may change only Node node-1, not node-2" k1 annotate --dry-run=server node node-2 drainer.io/deploy-test=1
kubectl annotate node node-1 drainer.io/deploy-test- >/dev/null
kubectl taint node node-2 deploy-test:NoSchedule- >/dev/null
kubectl annotate namespace drainer-system drainer.io/driver-stop-label= --overwrite >/dev/null
# What the API server recorded: who asked (user.extra names the node), what it refused and why.
sleep 1
audit_window "$policy_start" "$e2e_tmp/audit-policy.json"
jq_checks --arg sa "$SA" '[.[] | select(.user.username == $sa and .objectRef.resource == "nodes" and .verb == "patch")] as $p
	| [$p[] | select(.user.extra["authentication.kubernetes.io/node-name"] == ["node-2"] and .objectRef.name == "node-2" and .responseStatus.code == 200)] as $ok
	| [$p[] | select(.responseStatus.code >= 400)] as $bad
	| [$bad[] | select((.annotations["validation.policy.admission.k8s.io/validation_failure"] // "[]" | fromjson | map(.policy) | unique) == ["drainer-own-node"])] as $noted
	| (if ($ok | length) >= 4 then "ok audit log: \($ok | length) patches of node-2 admitted, each by a token whose user.extra names node-2"
	   else "FAIL audit log: \($ok | length) admitted patches of node-2 by a node-2 token" end),
	  (if ($bad | length) >= 10 and ($noted | length) == ($bad | length) and ([$bad[].responseStatus.code] | unique) == [422]
	   then "ok audit log: \($bad | length) Node patches refused (422), each with the drainer-own-node validation_failure annotation"
	   else "FAIL audit log: \($bad | length) refused patches, \($noted | length) annotated by drainer-own-node, codes \([$bad[].responseStatus.code] | unique)" end)' \
	"$e2e_tmp/audit-policy.json"

if $real_nodes; then
# --- serve in the DaemonSet's pod: a drain and its undo, through the annotation ---------
# The pod on node-2 (real nodes): its identity is the projected token of its pod (the
# audit log's user.extra names the pod it is bound to), its node NODE_NAME (downward API).
pod_of() { # NODE: name and IP of the drainer pod there
	kubectl -n drainer-system get pods -l app.kubernetes.io/component=node-agent --field-selector "spec.nodeName=$1" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running")][0] | "\(.metadata.name) \(.status.podIP)"'
}
declare -A pod_name=() pod_ip=()
for nd in $nodes; do read -r "pod_name[$nd]" "pod_ip[$nd]" <<<"$(pod_of "$nd")"; done
p2=${pod_name[node-2]}
ip2=${pod_ip[node-2]}
echo "  node-2's drainer pod: $p2, IP $ip2"
# Each pod watches its own Node: fieldSelector metadata.name=its node, as its pod's identity.
sleep 1
jq_checks -s --arg sa "$SA" --argjson pods "$(for nd in $nodes; do echo "{\"node\":\"$nd\",\"pod\":\"${pod_name[$nd]}\"}"; done | jq -sc .)" '
	[.[] | select(.stage == "ResponseStarted" and .verb == "watch" and .objectRef.resource == "nodes" and (.userAgent | startswith("drainer/")))] as $w
	| $pods[] as $p
	| [$w[] | select(.user.extra["authentication.kubernetes.io/pod-name"] == [$p.pod])] as $mine
	| if ($mine | length) > 0 and ($mine | all(.user.username == $sa and (.requestURI | contains("fieldSelector=metadata.name%3D" + $p.node))))
	     and ($mine | all(.user.extra["authentication.kubernetes.io/node-name"] == [$p.node]))
	  then "ok \($p.pod) on \($p.node): watches Node \($p.node) only (NODE_NAME), as \($sa) with a token bound to that pod on that node"
	  else "FAIL \($p.pod) on \($p.node): its node watches \([$mine[] | "\(.user.username) \(.user.extra) \(.requestURI)"] | .[0:2])" end' \
	<(grep '"userAgent":"drainer/' "$AUDIT")
start=$(audit_lines)
node_state2() { kubectl get node node-2 -o jsonpath='{.metadata.annotations.drainer\.io/state}'; }
node2_clean() {
	[ "$(kubectl get node node-2 -o json | jq '[.metadata.annotations // {} | keys[] | select(startswith("drainer.io/"))] | length')" = 0 ] &&
		[ "$(kubectl get node node-2 -o jsonpath='{.spec.unschedulable}')" != true ]
}
t0=$SECONDS
kubectl annotate node node-2 drainer.io/request=drain --overwrite >/dev/null
node2_drained() { [ "$(node_state2)" = drained ]; }
wait_until 90 node2_drained
check_eq "serve in node-2's pod: kubectl annotate drainer.io/request=drain drains node-2 ($((SECONDS - t0)) s)" drained "$(node_state2)"
check "node-2's driver pod was stopped" no_driver_pod node-2
check "node-2's drainer pod stays (a DaemonSet pod without claims)" test "$(pod_of node-2)" = "$p2 $ip2"
t0=$SECONDS
kubectl annotate --overwrite node node-2 drainer.io/request=uncordon >/dev/null
wait_until 90 node2_clean
check "serve in node-2's pod: request=uncordon restores node-2 and clears the annotations ($((SECONDS - t0)) s)" node2_clean
check "node-2's driver runs again" wait_until 30 driver_running node-2
sleep 1
audit_window "$start" "$e2e_tmp/audit-serve.json"
jq_checks --arg sa "$SA" --arg pod "$p2" '[.[] | select(.userAgent | startswith("drainer/"))] as $d
	| [$d[] | select(.verb | IN("create", "update", "patch", "delete"))] as $writes
	| (if ($writes | length) > 0 and ($writes | all(.user.username == $sa and .user.extra["authentication.kubernetes.io/pod-name"] == [$pod]))
	   then "ok every write of the drain and undo (\($writes | length): \([$writes[] | "\(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end)"] | unique | join(", "))) came from pod \($pod) as \($sa)"
	   else "FAIL writes as \([$writes[] | "\(.user.username) \(.user.extra["authentication.kubernetes.io/pod-name"])"] | unique | join(", "))" end),
	  ([$writes[] | select(.objectRef.resource == "nodes" and .objectRef.name != "node-2")] | length) as $other
	| (if $other == 0 then "ok it patched no other Node" else "FAIL it patched \($other) other Nodes" end),
	  ([$d[] | select(.objectRef.resource == "leases" and (.verb | IN("create", "update")))] as $lw
	   | if ($lw | length) >= 2 and ($lw | all(.responseStatus.code < 300))
	     then "ok its slot Lease (serve'"'"'s default --max-parallel 1): \($lw | length) writes, each admitted by drainer-own-node-leases"
	     else "FAIL slot Lease writes: \([$lw[] | "\(.verb) \(.objectRef.name) \(.responseStatus.code)"] | join("; "))" end),
	  ([$d[] | select(.responseStatus.code == 401 or .responseStatus.code == 403)] as $bad
	   | if ($bad | length) == 0 then "ok serve: no request was refused by RBAC"
	     else "FAIL refused: \([$bad[] | "\(.verb) \(.requestURI) \(.responseStatus.code)"] | join("; "))" end)' \
	"$e2e_tmp/audit-serve.json"
if ! node2_clean; then kubectl -n drainer-system logs "$p2" --tail=20 2>&1 | sed 's/^/    serve: /'; fi

# Its metrics, from the pod IP (as Prometheus scrapes it), then from every pod of the
# DaemonSet. (deploy/monitoring's Service gets no EndpointSlices here: the API server
# refuses endpoint addresses in 127.0.0.0/8, and the test nodes' pod IPs are loopback
# ones; tests/install/test-image.sh checks that Service's selector and port.)
metric() { # IP NAME{LABELS}: the value
	curl -sf --max-time 5 "http://$1:9464/metrics" | awk -v m="$2" '$1 == m { print $2 }'
}
check_eq "GET http://$ip2:9464/metrics: drainer_drains_total of node-2's drain and undo (done)" "1 1" \
	"$(metric "$ip2" 'drainer_drains_total{goal="drain",result="done"}') $(metric "$ip2" 'drainer_drains_total{goal="uncordon",result="done"}')"
scraped=0
for nd in $nodes; do
	[ "$(metric "${pod_ip[$nd]}" "drainer_build_info{version=\"$version\"}")" = 1 ] && scraped=$((scraped + 1))
done
check_eq "each drainer pod scraped on its pod IP: drainer_build_info{version=\"$version\"} 1" "$n" "$scraped"
else
# --- serve with node-2's pod token: a drain and its undo, through the annotation -------
# With --driver-stop label:gpu.example.com/present (the policy's parameter names it), so
# every kind of Node write drainer makes goes through the policy: drainer.io/
# annotations, cordon + drain taint, the driver label set and restored, uncordon.
kubectl annotate namespace drainer-system drainer.io/driver-stop-label=gpu.example.com/present --overwrite >/dev/null
node_state2() { kubectl get node node-2 -o jsonpath='{.metadata.annotations.drainer\.io/state}'; }
node2_clean() {
	[ "$(kubectl get node node-2 -o json | jq '[.metadata.annotations // {} | keys[] | select(startswith("drainer.io/"))] | length')" = 0 ] &&
		[ "$(kubectl get node node-2 -o jsonpath='{.spec.unschedulable}')" != true ] &&
		[ "$(kubectl get node node-2 -o jsonpath='{.metadata.labels.gpu\.example\.com/present}')" = true ]
}
start=$(audit_lines)
# With --max-parallel 1: its slot Lease goes through drainer-own-node-leases too.
"$DRAINER" serve --node node-2 --kubeconfig "$n2kc" --driver-stop label:gpu.example.com/present --max-parallel 1 \
	--lease-namespace drainer-system --metrics-addr "" >"$e2e_tmp/serve-sa.log" 2>&1 &
spid=$!
track_pid "$spid"
e2e_cleanup_hooks+=("reap_pid $spid KILL")
sleep 1
kubectl annotate node node-2 drainer.io/request=drain --overwrite >/dev/null
node2_drained() { [ "$(node_state2)" = drained ]; }
wait_until 90 node2_drained
check_eq "serve with node-2's pod token: kubectl annotate drainer.io/request=drain drains node-2" drained "$(node_state2)"
check_eq "... the driver label is paused and the driver pod gone" "drainer-paused 0" \
	"$(kubectl get node node-2 -o jsonpath='{.metadata.labels.gpu\.example\.com/present}') $(driver_count node-2)"
kubectl annotate --overwrite node node-2 drainer.io/request=uncordon >/dev/null
wait_until 90 node2_clean
check "serve with node-2's pod token: request=uncordon restores node-2 (label back, uncordoned) and clears the annotations" node2_clean
kill -TERM "$spid" 2>/dev/null
wait "$spid"
check_eq "serve exits 0 on SIGTERM" 0 $?
untrack_pid "$spid"
sleep 1
audit_window "$start" "$e2e_tmp/audit-serve.json"
jq_checks --arg sa "$SA" '[.[] | select(.userAgent | startswith("drainer/"))] as $d
	| (if ($d | length) > 0 and ([$d[] | select(.user.username != $sa or .user.extra["authentication.kubernetes.io/node-name"] != ["node-2"])] | length) == 0
	   then "ok serve: all \($d | length) requests were made as \($sa) with node-2'"'"'s pod token"
	   else "FAIL serve requests as \([$d[] | "\(.user.username) \(.user.extra["authentication.kubernetes.io/node-name"])"] | unique | join(","))" end),
	  ([$d[] | select(.objectRef.resource == "nodes" and .verb == "patch" and .responseStatus.code == 200)] | length) as $np
	  | (if $np >= 4 then "ok serve: \($np) patches of node-2 admitted by the policy" else "FAIL serve: only \($np) admitted patches of node-2" end),
	  ([$d[] | select(.objectRef.resource == "events" and .verb == "create" and .objectRef.namespace == "default" and .responseStatus.code == 201)] | length) as $ne
	  | (if $ne >= 2 then "ok serve: \($ne) Events about node-2 admitted in namespace default" else "FAIL serve: \($ne) Events created" end),
	  ([$d[] | select(.objectRef.resource == "leases" and (.verb | IN("create", "update")) and (.responseStatus.code | IN(200, 201)))] | length) as $nl
	  | (if $nl >= 2 then "ok serve: \($nl) writes of its slot Lease admitted (taken, renewed or released)" else "FAIL serve: \($nl) admitted Lease writes" end),
	  ([$d[] | select(.responseStatus.code == 401 or .responseStatus.code == 403 or .responseStatus.code == 422)] as $bad
	   | if ($bad | length) == 0 then "ok serve: no request was refused (by RBAC or the admission policy)"
	     else "FAIL refused: \([$bad[] | "\(.verb) \(.requestURI) \(.responseStatus.code)"] | join("; "))" end)' \
	"$e2e_tmp/audit-serve.json"
if ! node2_clean; then sed 's/^/    serve: /' "$e2e_tmp/serve-sa.log" | tail -20; fi
reset_node node-2
fi

# --- cluster mode ----------------------------------------------------------------------
# Switching modes as cluster-mode/kustomization.yaml says: per-node mode's own objects go.
kubectl delete -f deploy/daemonset.yaml -f deploy/serviceaccount.yaml -f deploy/node-policy.yaml >"$e2e_tmp/cm-switch.out" 2>&1
check_eq "kubectl delete -f deploy/daemonset.yaml -f deploy/serviceaccount.yaml -f deploy/node-policy.yaml" 0 $?
kubectl apply -k "$overlay/cm" >"$e2e_tmp/cm.out" 2>&1
check_eq "kubectl apply -k deploy/cluster-mode$overlay_note" 0 $?
cm_running() {
	[ "$(kubectl -n drainer-system get pods -l app.kubernetes.io/component=controller -o json |
		jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = 2 ]
}
wait_until 90 cm_running
check "cluster mode: two drainer pods run" cm_running
cm_leader() { kubectl -n drainer-system get lease drainer-leader -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
cm_led() { [ -n "$(cm_leader)" ]; }
if check "cluster mode: one of them holds the Lease drainer-leader (<= 30 s)" wait_until 30 cm_led; then
	check "cluster mode: the holder is one of the two pods ($(cm_leader))" bash -c "kubectl -n drainer-system get pods -l app.kubernetes.io/component=controller -o name | sed 's|pod/||' | grep -qx '$(cm_leader | sed 's/_[0-9a-f]*$//')'"
fi
# (the budget counts Ready pods: the second one's first readiness probe may come up to
# its period, 10 s, after it runs, and the disruption controller follows)
cm_budget() { kubectl -n drainer-system get pdb drainer -o jsonpath='{.spec.minAvailable}/{.status.disruptionsAllowed}' 2>/dev/null; }
cm_budget_one() { [ "$(cm_budget)" = 1/1 ]; }
wait_until 30 cm_budget_one
check_eq "cluster mode: its PodDisruptionBudget keeps one (minAvailable 1, 1 disruption allowed)" "1/1" "$(cm_budget)"
check_eq "cluster mode: serve --all-nodes --leader-elect --max-parallel 2, /metrics on the pod IP (deploy/monitoring)" '["serve","--all-nodes","--max-parallel","2","--metrics-addr","[::]:9464","--leader-elect"]' \
	"$(kubectl kustomize deploy/cluster-mode | "$KUBECTL" create --dry-run=client -f - -o json | jq -cs '.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args')"
check_eq "cluster mode: its pod runs as ServiceAccount drainer-cluster" drainer-cluster \
	"$(kubectl -n drainer-system get pods -l app.kubernetes.io/component=controller -o json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].spec.serviceAccountName')"
check_eq "cluster mode: the per-node ServiceAccount and its policies are gone (the Events policy of base/ stays)" \
	"validatingadmissionpolicy.admissionregistration.k8s.io/drainer-events" \
	"$(kubectl -n drainer-system get serviceaccount drainer -o name 2>/dev/null; kubectl get validatingadmissionpolicy -l app.kubernetes.io/name=drainer -o name 2>/dev/null)"
# drainer-cluster is not confined to a node (nor are its tokens bound to one).
ckc=$e2e_tmp/cluster.kubeconfig
mkkc "$(kubectl -n drainer-system create token drainer-cluster --duration=10m)" "$ckc"
admission_admitted cm-n1 "cluster mode: drainer-cluster's token may annotate node-1" "$KUBECTL" --kubeconfig "$ckc" annotate node node-1 drainer.io/deploy-test=1
admission_admitted cm-n3 "... and node-3" "$KUBECTL" --kubeconfig "$ckc" annotate node node-3 drainer.io/deploy-test=1
admission_admitted cm-ev "... and post Events about any Node (server dry run)" \
	bash -c "$(declare -f event); event node-3 | '$KUBECTL' --kubeconfig '$ckc' create -f - --dry-run=server"
admission_refused cm-ev-ns "... but not in namespace demo (policy drainer-events)" "Events in namespace default only" \
	bash -c "$(declare -f event); event node-3 demo | '$KUBECTL' --kubeconfig '$ckc' create -f - --dry-run=server"
admission_refused cm-ev-pod "... nor about a Pod" "only creates Events about a Node" \
	bash -c "$(declare -f event); event node-3 default Pod | '$KUBECTL' --kubeconfig '$ckc' create -f - --dry-run=server"
check_eq "cluster mode: drainer-cluster has the ClusterRole's rights, and (RBAC) Events in every namespace, kept to default by the policy" "yes yes yes" \
	"$(for a in "patch nodes" "create events -n default" "create events -n demo"; do
		# shellcheck disable=SC2086
		kubectl auth can-i $a --as=system:serviceaccount:drainer-system:drainer-cluster 2>/dev/null; done | tr '\n' ' ' | sed 's/ $//')"
kubectl annotate node node-1 node-3 drainer.io/deploy-test- >/dev/null

# --- drainer rollout as drainer-cluster (deploy/rollout) --------------------------------
# What the rollout calls (drain/rollout.c, cmd/verb-rollout.c and the engine, node view,
# slots and announcer it drives): daemonsets get, controllerrevisions list and pods list
# in the driver's namespace, nodes list/watch/patch, pods/eviction create (the old plugin
# pod), claims and slices list/watch, devicetaintrules get/create/delete, leases in the lease
# namespace, events create in default. All but the revisions are the ClusterRole's
# already; deploy/rollout adds controllerrevisions list in dra-system, and nothing else.
RSA=system:serviceaccount:drainer-system:drainer-cluster
rcan() { # expected(yes|no) verb resource [namespace] [subresource]: as drainer-cluster
	local want=$1 verb=$2 res=$3 ns=${4:-} sub=${5:-} args got
	args=("$verb" "$res" "--as=$RSA")
	if [ "$ns" = all ]; then args+=(-A); elif [ -n "$ns" ]; then args+=(-n "$ns"); fi
	[ -n "$sub" ] && args+=("--subresource=$sub")
	got=$(kubectl auth can-i "${args[@]}" 2>/dev/null)
	[ "$ns" = all ] && ns=" -A" || ns=${ns:+ -n $ns}
	check_eq "rollout: drainer-cluster can-i $verb $res${sub:+/$sub}$ns: $want" "$want" "$got"
}
check_eq "deploy/rollout holds ClusterRole drainer-rollout and its RoleBinding (nothing else)" \
	"ClusterRole/drainer-rollout RoleBinding/drainer-rollout" "$(objects deploy/rollout)"
rcan no list controllerrevisions.apps dra-system # before deploy/rollout: the one thing missing
# The DaemonSet OnDelete for the rollout to run (a strategy change, no new revision: no
# pod is replaced); put back as it was afterwards.
ro_strategy=$(kubectl -n dra-system get ds dra-driver -o json | jq -c '.spec.updateStrategy')
ro_observed() { [ "$(kubectl -n dra-system get ds dra-driver -o json | jq '.status.observedGeneration == .metadata.generation')" = true ]; }
e2e_cleanup_hooks+=("kubectl -n dra-system patch ds dra-driver --type json -p '[{\"op\":\"replace\",\"path\":\"/spec/updateStrategy\",\"value\":$ro_strategy}]' >/dev/null 2>&1")
kubectl -n dra-system patch ds dra-driver --type merge -p '{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}' >/dev/null
wait_until 30 ro_observed
drainer_run ro-denied rollout dra-system/dra-driver --driver gpu.example.com --lease-namespace drainer-system --kubeconfig "$ckc"
check_rc "rollout as drainer-cluster without deploy/rollout: fails" 1 ro-denied
check "... on the ControllerRevisions list, forbidden" grep -qi 'cannot list the ControllerRevisions of namespace dra-system.*forbidden' "$e2e_tmp/ro-denied.err"
kubectl apply -k deploy/rollout >"$e2e_tmp/ro-apply.out" 2>&1
check_eq "kubectl apply -k deploy/rollout" 0 $?
check_eq "ClusterRole drainer-rollout: exactly controllerrevisions list" '["apps/controllerrevisions:list"]' \
	"$(kubectl get clusterrole drainer-rollout -o json | jq -c '[.rules[] | .apiGroups[] as $g | .resources[] as $r
		| "\($g)/\($r):\(.verbs | sort | join(","))"] | sort')"
check_eq "bound once: RoleBinding dra-system/drainer-rollout -> ClusterRole drainer-rollout, drainer-cluster only" \
	"RoleBinding/dra-system/drainer-rollout:ClusterRole/drainer-rollout:drainer-system/drainer-cluster" \
	"$({ kubectl get rolebinding -A -o json | jq -r '.items[] | select(.roleRef.name == "drainer-rollout") | "RoleBinding/\(.metadata.namespace)/\(.metadata.name):\(.roleRef.kind)/\(.roleRef.name):\([.subjects[] | "\(.namespace)/\(.name)"] | join(","))"'
	   kubectl get clusterrolebinding -o json | jq -r '.items[] | select(.roleRef.name == "drainer-rollout") | "ClusterRoleBinding/\(.metadata.name)"'; } | sort | tr '\n' ' ' | sed 's/ $//')"
# each verb the rollout needs
rcan yes get daemonsets.apps dra-system
rcan yes list controllerrevisions.apps dra-system
rcan yes list pods dra-system
rcan yes create pods dra-system eviction
for v in get list watch patch; do rcan yes "$v" nodes; done
for v in list watch; do rcan yes "$v" pods; done
for r in resourceclaims.resource.k8s.io resourceslices.resource.k8s.io; do
	for v in list watch; do rcan yes "$v" "$r"; done
done
for v in get create delete; do rcan yes "$v" devicetaintrules.resource.k8s.io; done
for v in get list watch create update; do rcan yes "$v" leases.coordination.k8s.io drainer-system; done
rcan yes create events default
# and no more: the DaemonSet, its revisions and its pods are never written
for v in create update patch delete deletecollection; do rcan no "$v" daemonsets.apps dra-system; done
for v in list watch; do rcan no "$v" daemonsets.apps dra-system; done
for v in get watch create update patch delete deletecollection; do rcan no "$v" controllerrevisions.apps dra-system; done
for ns in default kube-system drainer-system all; do rcan no list controllerrevisions.apps "$ns"; done
for v in create update patch delete deletecollection; do rcan no "$v" pods dra-system; done
rcan no create pods dra-system binding
rcan no update nodes
rcan no delete nodes
for v in list watch update patch; do rcan no "$v" devicetaintrules.resource.k8s.io; done
# A no-op rollout (every node on the update revision) with a token of drainer-cluster:
# every node skipped, no request of drainer-cluster refused (the cluster-mode pod runs as
# drainer-cluster too: its requests are in the window, and must not be refused either).
drainer_run ro-noop rollout dra-system/dra-driver --driver gpu.example.com --lease-namespace drainer-system --kubeconfig "$ckc" -o json
check_rc "rollout as drainer-cluster with deploy/rollout: every node already on the update revision" 0 ro-noop
check "... every node skipped" jqe '(.nodes | length) > 0 and all(.nodes[]; .result == "skipped")' "$e2e_tmp/ro-noop.out"
sleep 1
audit_window "$run_start" "$e2e_tmp/audit-ro.json"
jq_checks --arg sa "$RSA" '[.[] | select(.user.username == $sa)] as $d
	| (if ([$d[] | select(.objectRef.resource == "controllerrevisions" and .verb == "list" and .responseStatus.code == 200)] | length) > 0
	   then "ok the rollout listed the ControllerRevisions of dra-system as drainer-cluster"
	   else "FAIL no ControllerRevisions list of drainer-cluster answered 200" end),
	  ([$d[] | select(.responseStatus.code == 403)] as $bad
	   | if ($bad | length) == 0 then "ok no request of drainer-cluster was forbidden (\($d | length) requests)"
	     else "FAIL forbidden: \([$bad[] | "\(.verb) \(.requestURI)"] | join("; "))" end)' "$e2e_tmp/audit-ro.json"
kubectl -n dra-system patch ds dra-driver --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/updateStrategy\",\"value\":$ro_strategy}]" >/dev/null
check_eq "the driver's updateStrategy is back as found" "$ro_strategy" "$(kubectl -n dra-system get ds dra-driver -o json | jq -c '.spec.updateStrategy')"

# --- the DRA permission example -------------------------------------------------------
kubectl apply -k deploy/examples/dra-permissions >"$e2e_tmp/ex.out" 2>&1
check_eq "kubectl apply -k deploy/examples/dra-permissions" 0 $?
check_eq "example: claim roles labelled for aggregation into edit+admin and view" "true true true" \
	"$(kubectl get clusterrole dra-claims-edit dra-claims-view -o json | jq -r '[.items[].metadata.labels] | "\(.[0]["rbac.authorization.k8s.io/aggregate-to-edit"]) \(.[0]["rbac.authorization.k8s.io/aggregate-to-admin"]) \(.[1]["rbac.authorization.k8s.io/aggregate-to-view"])"')"
edit_has_claims() { kubectl get clusterrole edit -o json | jqe '[.rules[] | select(.apiGroups | index("resource.k8s.io")) | .resources[]] | index("resourceclaimtemplates")'; }
# The operator: a workload ServiceAccount of namespace demo, bound to "edit" there.
# Without the clusterrole-aggregation controller (tests/cluster does not run it) the
# example's roles are bound directly, which is what aggregation amounts to.
op=system:serviceaccount:demo:default
e2e_cleanup_hooks+=("kubectl -n demo delete rolebinding deploy-test-edit deploy-test-claims-edit deploy-test-claims-view --ignore-not-found >/dev/null 2>&1")
if wait_until 10 edit_has_claims; then
	aggregated=1
	pass "example: the built-in edit role now covers ResourceClaims and ResourceClaimTemplates"
	kubectl -n demo create rolebinding deploy-test-edit --clusterrole=edit --serviceaccount=demo:default >/dev/null
else
	aggregated=0
	echo "  note: edit was not aggregated (no clusterrole-aggregation controller in this cluster): binding the example's roles directly"
	kubectl -n demo create rolebinding deploy-test-claims-edit --clusterrole=dra-claims-edit --serviceaccount=demo:default >/dev/null
	kubectl -n demo create rolebinding deploy-test-claims-view --clusterrole=dra-claims-view --serviceaccount=demo:default >/dev/null
fi
check_eq "example: an editor of demo may create ResourceClaims there" yes "$(kubectl auth can-i create resourceclaims.resource.k8s.io -n demo --as=$op 2>/dev/null)"
check_eq "example: ... and ResourceClaimTemplates" yes "$(kubectl auth can-i delete resourceclaimtemplates.resource.k8s.io -n demo --as=$op 2>/dev/null)"
check_eq "example: ... but not in another namespace" no "$(kubectl auth can-i create resourceclaims.resource.k8s.io -n default --as=$op 2>/dev/null)"
check_eq "example: ... nor ResourceSlices" no "$(kubectl auth can-i create resourceslices.resource.k8s.io --as=$op 2>/dev/null)"
check_eq "example: ... nor DeviceClasses" no "$(kubectl auth can-i create deviceclasses.resource.k8s.io --as=$op 2>/dev/null)"
drv=system:serviceaccount:dra-system:dra-driver
check_eq "example: the driver may write ResourceSlices" yes "$(kubectl auth can-i create resourceslices.resource.k8s.io --as=$drv 2>/dev/null)"
check_eq "example: the driver may not write DeviceClasses" no "$(kubectl auth can-i create deviceclasses.resource.k8s.io --as=$drv 2>/dev/null)"
# The admission policy: a driver pod on node-2 may write node-2's slices, not node-1's.
# A token not bound to a pod names no node; once the policy is loaded it is refused.
nopod=$(kubectl -n dra-system create token dra-driver --duration=10m)
sed -e "s|token: .*|token: $nopod|" "$sakc" >"$e2e_tmp/driver-nopod.kubeconfig"
policy_active() { # (the create fails: not a pipe into grep, pipefail is on)
	local out
	out=$(slice node-2 | "$KUBECTL" --kubeconfig "$e2e_tmp/driver-nopod.kubeconfig" create -f - --dry-run=server 2>&1)
	grep -q 'names no node' <<<"$out"
}
kubectl -n dra-system apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: deploy-test-driver}
spec:
  serviceAccountName: dra-driver
  nodeName: node-2
  tolerations: [{operator: Exists}]
  containers: [{name: c, image: registry.example.com/none:1}]
EOF
slice() { # node: a ResourceSlice of a made-up driver on NODE
	printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: deploy-test-%s}\nspec: {driver: deploy-test.example.com, nodeName: %s, pool: {name: %s, generation: 1, resourceSliceCount: 1}, devices: []}\n' "$1" "$1" "$1"
}
wait_until 20 policy_active
if policy_active; then
	pass "example policy: a driver token not bound to a pod on a node may write no slice"
else
	fail "example policy: a driver token not bound to a pod on a node may write no slice"
	slice node-2 | "$KUBECTL" --kubeconfig "$e2e_tmp/driver-nopod.kubeconfig" create -f - --dry-run=server 2>&1 | sed 's/^/    /'
fi
dkc=$e2e_tmp/driver.kubeconfig
pod_token=$(kubectl -n dra-system create token dra-driver --bound-object-kind=Pod --bound-object-name=deploy-test-driver --duration=10m)
sed -e "s|token: .*|token: $pod_token|" "$sakc" >"$dkc"
slice node-2 | "$KUBECTL" --kubeconfig "$dkc" create -f - >/dev/null 2>"$e2e_tmp/own.err"
check "example policy: the driver pod on node-2 may create node-2's slice" [ $? -eq 0 ]
[ -s "$e2e_tmp/own.err" ] && sed 's/^/    /' "$e2e_tmp/own.err"
slice node-1 | "$KUBECTL" --kubeconfig "$dkc" create -f - >/dev/null 2>"$e2e_tmp/other.err"
check "example policy: ... but not node-1's (denied by the ValidatingAdmissionPolicy)" grep -q 'may only write the ResourceSlices of that node' "$e2e_tmp/other.err"

# --- clean up ----------------------------------------------------------------------------
kubectl -n demo delete rolebinding deploy-test-edit deploy-test-claims-edit deploy-test-claims-view --ignore-not-found >/dev/null 2>&1
remove_all
check "kubectl delete -k removed the namespace" bash -c "! '$KUBECTL' get namespace drainer-system >/dev/null 2>&1"
check "... the ClusterRoles, ClusterRoleBindings and the Events policy" bash -c "! '$KUBECTL' get clusterrole drainer >/dev/null 2>&1 && ! '$KUBECTL' get clusterrolebinding drainer >/dev/null 2>&1 &&
	! '$KUBECTL' get clusterrole drainer-events >/dev/null 2>&1 && ! '$KUBECTL' get clusterrolebinding drainer-events >/dev/null 2>&1 && ! '$KUBECTL' get clusterrolebinding drainer-cluster-events >/dev/null 2>&1 &&
	! '$KUBECTL' get validatingadmissionpolicy drainer-events >/dev/null 2>&1"
check "... and the example's roles and policy" bash -c "! '$KUBECTL' get clusterrole dra-claims-edit >/dev/null 2>&1 && ! '$KUBECTL' get validatingadmissionpolicy dra-driver-gpu.example.com-own-node-slices >/dev/null 2>&1"
if [ "$aggregated" = 1 ]; then
	edit_lacks_claims() { ! edit_has_claims >/dev/null 2>&1; }
	wait_until 10 edit_lacks_claims
	check "the edit role no longer covers ResourceClaims" edit_lacks_claims
fi
finish
