#!/usr/bin/env bash
# deploy/ against the real control plane: `kubectl apply -k deploy/` works (and its
# server-side dry run, and those of deploy/cluster-mode and the DRA permission
# example), the DaemonSet gets a pod on every node (also on a cordoned node with the
# drain taint), the ClusterRole holds exactly DESIGN.md's verbs, and the drainer
# ServiceAccount can do each of them but cannot write ResourceSlices, DeviceClasses or
# Secrets, delete pods, or touch Leases outside drainer-system (kubectl auth can-i
# --as, SubjectAccessReview, and real requests with its token). drainer status and plan
# then run with a kubeconfig holding only that token, and the audit log shows they
# only read and were never refused. Cluster mode runs its single pod; the example's
# ValidatingAdmissionPolicy keeps a driver to its own node's ResourceSlices.
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
SA_GROUPS='["system:serviceaccounts","system:serviceaccounts:drainer-system","system:authenticated"]'

# remove_all: what this test may have created, gone (waits for the namespace).
remove_all() {
	kubectl delete -k deploy/examples/dra-permissions --ignore-not-found >/dev/null 2>&1
	# The example's ServiceAccount is the simulated driver's own (tests/cluster/manifests):
	# its DaemonSet cannot create pods without it.
	kubectl -n dra-system create serviceaccount dra-driver >/dev/null 2>&1
	kubectl delete resourceslice deploy-test-node-1 deploy-test-node-2 --ignore-not-found >/dev/null 2>&1
	kubectl -n dra-system delete pod deploy-test-driver --ignore-not-found --grace-period=1 >/dev/null 2>&1
	kubectl delete -k deploy/cluster-mode --ignore-not-found >/dev/null 2>&1
	kubectl delete -k deploy/ --ignore-not-found >/dev/null 2>&1
	wait_until 60 bash -c "! '$KUBECTL' get namespace drainer-system"
}
e2e_cleanup_hooks+=("kubectl taint node node-3 drainer.io/draining:NoSchedule- >/dev/null 2>&1; kubectl uncordon node-3 >/dev/null 2>&1")
e2e_cleanup_hooks+=("remove_all")
remove_all # leftovers of an interrupted run

demo || { fail "demo workload"; finish; exit 1; }
nodes=$(kubectl get nodes -o json | jq -r '[.items[].metadata.name] | sort | join(" ")')

# --- rendering and applying -----------------------------------------------------------
kubectl kustomize deploy/ >"$e2e_tmp/base.yaml"
check_eq "kubectl kustomize deploy/" 0 $?
check_eq "deploy/ holds the namespace, SA, RBAC and the DaemonSet" \
	"ClusterRole/drainer ClusterRoleBinding/drainer DaemonSet/drainer Namespace/drainer-system Role/drainer-leases RoleBinding/drainer-leases ServiceAccount/drainer" \
	"$(kubectl kustomize deploy/ | "$KUBECTL" create --dry-run=client -f - -o json | jq -rs '.[] | "\(.kind)/\(.metadata.name)"' | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "deploy/cluster-mode holds a Deployment and no DaemonSet" "Deployment" \
	"$(kubectl kustomize deploy/cluster-mode | "$KUBECTL" create --dry-run=client -f - -o json | jq -rs '[.[] | select(.kind | IN("Deployment", "DaemonSet")) | .kind] | join(" ")')"

kubectl apply -k deploy/ >"$e2e_tmp/apply.out" 2>&1
check_eq "kubectl apply -k deploy/" 0 $?
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
wait_until 20 ds_ready
check_eq "DaemonSet status: desired = ready = $n nodes" "$n $n" "$(ds_status)"
jq_checks '.spec.template.spec as $s | $s.containers[0] as $c
	| (if $s.securityContext.runAsNonRoot == true and $c.securityContext.readOnlyRootFilesystem == true
		and $c.securityContext.allowPrivilegeEscalation == false and $c.securityContext.capabilities.drop == ["ALL"]
		and $s.securityContext.seccompProfile.type == "RuntimeDefault"
	   then "ok pod: non-root, read-only root fs, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault"
	   else "FAIL pod security context: \($s.securityContext) \($c.securityContext)" end),
	  (if ($c.env | map(select(.name == "NODE_NAME" and .valueFrom.fieldRef.fieldPath == "spec.nodeName")) | length) == 1
	   then "ok NODE_NAME from spec.nodeName" else "FAIL no NODE_NAME from spec.nodeName" end),
	  (if $c.args == ["serve", "--node", "$(NODE_NAME)", "--metrics-addr", "0.0.0.0:9464"] then "ok runs serve --node $(NODE_NAME) --metrics-addr 0.0.0.0:9464" else "FAIL args \($c.args)" end),
	  (if $s.serviceAccountName == "drainer" then "ok ServiceAccount drainer" else "FAIL serviceAccountName \($s.serviceAccountName)" end)' \
	<(kubectl -n drainer-system get ds drainer -o json)
check_eq "namespace enforces Pod Security restricted (and admitted the pods)" restricted \
	"$(kubectl get ns drainer-system -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')"

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

# --- RBAC: exactly DESIGN.md's verbs (+ PDB reads) ------------------------------------
check_eq "ClusterRole drainer: exactly these rules" \
	'["/events:create,patch","/nodes:get,list,patch,watch","/pods/eviction:create","/pods:get,list,watch","apps/daemonsets:get","policy/poddisruptionbudgets:get,list,watch","resource.k8s.io/resourceclaims:get,list,watch","resource.k8s.io/resourceslices:get,list,watch"]' \
	"$(kubectl get clusterrole drainer -o json | jq -c '[.rules[] | .apiGroups[] as $g | .resources[] as $r
		| "\($g)/\($r):\(.verbs | sort | join(","))"] | sort')"
check_eq "Role drainer-leases (drainer-system): exactly leases get/list/watch/create/update/delete" \
	'["coordination.k8s.io/leases:create,delete,get,list,update,watch"]' \
	"$(kubectl -n drainer-system get role drainer-leases -o json | jq -c '[.rules[] | .apiGroups[] as $g | .resources[] as $r
		| "\($g)/\($r):\(.verbs | sort | join(","))"] | sort')"

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
for v in create patch; do can yes "$v" events default; done
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
token=$(kubectl -n drainer-system create token drainer --duration=10m)
server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
check "a token for the drainer ServiceAccount, the server and its CA" test -n "$token" -a -n "$server" -a -n "$ca"
(umask 077 && cat >"$sakc" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: drainer
  user:
    token: $token
contexts:
- name: drainer
  context: {cluster: c, user: drainer}
current-context: drainer
EOF
)
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
sak annotate node node-3 drainer.io/deploy-test=1 >/dev/null 2>&1
check_eq "with the token: annotating a Node (patch) works" 1 "$(node_ann node-3 drainer.io/deploy-test)"
sak annotate node node-3 drainer.io/deploy-test- >/dev/null 2>&1
check_eq "with the token: ... and removing the annotation" "" "$(node_ann node-3 drainer.io/deploy-test)"

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

# --- serve as the ServiceAccount: a drain and its undo, through the annotation ----------
node_state2() { kubectl get node node-2 -o jsonpath='{.metadata.annotations.drainer\.io/state}'; }
node2_clean() {
	[ "$(kubectl get node node-2 -o json | jq '[.metadata.annotations // {} | keys[] | select(startswith("drainer.io/"))] | length')" = 0 ] &&
		[ "$(kubectl get node node-2 -o jsonpath='{.spec.unschedulable}')" != true ]
}
start=$(audit_lines)
"$DRAINER" serve --node node-2 --kubeconfig "$sakc" --metrics-addr "" >"$e2e_tmp/serve-sa.log" 2>&1 &
spid=$!
sleep 1
kubectl annotate node node-2 drainer.io/request=drain --overwrite >/dev/null
node2_drained() { [ "$(node_state2)" = drained ]; }
wait_until 90 node2_drained
check_eq "serve as the ServiceAccount: kubectl annotate drainer.io/request=drain drains node-2" drained "$(node_state2)"
kubectl annotate --overwrite node node-2 drainer.io/request=uncordon >/dev/null
wait_until 90 node2_clean
check "serve as the ServiceAccount: request=uncordon restores node-2 and clears the annotations" node2_clean
kill -TERM "$spid" 2>/dev/null
wait "$spid"
check_eq "serve exits 0 on SIGTERM" 0 $?
sleep 1
audit_window "$start" "$e2e_tmp/audit-serve.json"
jq_checks --arg sa "$SA" '[.[] | select(.userAgent | startswith("drainer/"))] as $d
	| (if ($d | length) > 0 and ([$d[] | select(.user.username != $sa)] | length) == 0
	   then "ok serve: all \($d | length) requests were made as \($sa)"
	   else "FAIL serve requests as \([$d[].user.username] | unique | join(","))" end),
	  ([$d[] | select(.responseStatus.code == 401 or .responseStatus.code == 403)] as $bad
	   | if ($bad | length) == 0 then "ok serve: no request was refused by RBAC"
	     else "FAIL refused: \([$bad[] | "\(.verb) \(.requestURI) \(.responseStatus.code)"] | join("; "))" end)' \
	"$e2e_tmp/audit-serve.json"
if ! node2_clean; then sed 's/^/    serve: /' "$e2e_tmp/serve-sa.log" | tail -20; fi
reset_node node-2

# --- cluster mode ----------------------------------------------------------------------
kubectl -n drainer-system delete daemonset drainer >/dev/null
kubectl apply -k deploy/cluster-mode >"$e2e_tmp/cm.out" 2>&1
check_eq "kubectl apply -k deploy/cluster-mode" 0 $?
cm_running() {
	[ "$(kubectl -n drainer-system get pods -l app.kubernetes.io/component=controller -o json |
		jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = 1 ]
}
wait_until 60 cm_running
check "cluster mode: one drainer pod runs" cm_running
check_eq "cluster mode: serve --all-nodes --max-parallel 2, /metrics on the pod IP (deploy/monitoring)" '["serve","--all-nodes","--max-parallel","2","--metrics-addr","0.0.0.0:9464"]' \
	"$(kubectl -n drainer-system get deploy drainer -o json | jq -c '.spec.template.spec.containers[0].args')"

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
check "... the ClusterRole and ClusterRoleBinding" bash -c "! '$KUBECTL' get clusterrole drainer >/dev/null 2>&1 && ! '$KUBECTL' get clusterrolebinding drainer >/dev/null 2>&1"
check "... and the example's roles and policy" bash -c "! '$KUBECTL' get clusterrole dra-claims-edit >/dev/null 2>&1 && ! '$KUBECTL' get validatingadmissionpolicy dra-driver-gpu.example.com-own-node-slices >/dev/null 2>&1"
if [ "$aggregated" = 1 ]; then
	edit_lacks_claims() { ! edit_has_claims >/dev/null 2>&1; }
	wait_until 10 edit_lacks_claims
	check "the edit role no longer covers ResourceClaims" edit_lacks_claims
fi
finish
