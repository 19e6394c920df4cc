#!/usr/bin/env bash
# drainer doctor against the real control plane. The cluster is shared
# with other tests, so this script makes its own bad state and undoes it:
#  - a ClusterRoleBinding that lets an ordinary user (doctor-test-alice) write
#    ResourceSlices; besides it, a namespaced RoleBinding of the same ClusterRole
#    (doctor-test-bob), which RBAC cannot turn into access to a cluster-scoped
#    resource, so it must not be reported; and a namespaced claim user (carol);
#  - the driver DaemonSet dra-system/dra-driver without its liveness probe;
#  - one node reporting kubelet v1.32.4 (node status nodeInfo; the simulator's
#    heartbeat patches conditions only, so it stays; a real kubelet reports its own
#    version within 10 s, so on real nodes that node's kubelet is stopped meanwhile,
#    tests/cluster/kubelet kill, and started again as up does afterwards, for the
#    few seconds of the doctor runs, well within the 50 s before the node lifecycle
#    controller would mark it not Ready).
# doctor must report exactly those findings, naming their objects, exit 5; after
# the fixes it reports no FAIL and exits 0. The ServiceAccount of deploy/doctor
# gets the same answers (its RBAC suffices). A Prometheus fixture on loopback
# (fixtures/doctor/prom-fixture.py, recorded answers) covers the interpretation of
# the guide's queries. Every request doctor made was a read (or a
# SubjectAccessReview, which stores nothing).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_drainer
fixtures=$e2e_root/tests/e2e/fixtures/doctor
start_line=$(audit_lines)
DRIVER=gpu.example.com
DS_NS=dra-system
DS=dra-driver

# not_pass TAG: "STATUS check subject" of every finding that is not PASS, sorted.
not_pass() { jq -r '.findings[] | select(.status != "PASS") | "\(.status) \(.check) \(.subject)"' "$e2e_tmp/$1.out" | sort; }
fails() { jq -r '.findings[] | select(.status == "FAIL") | "\(.check) \(.subject)"' "$e2e_tmp/$1.out" | sort; }
# finding TAG CHECK SUBJECT: the finding as compact JSON (empty if none).
finding() { jq -c --arg c "$2" --arg s "$3" '[.findings[] | select(.check == $c and .subject == $s)][0] // empty' "$e2e_tmp/$1.out"; }
show_findings() { # TAG: the findings that are not PASS, for a failed check's reader
	jq -r '.findings[] | select(.status != "PASS") | "    \(.status) \(.check) \(.subject): \(.message)"' "$e2e_tmp/$1.out" 2>/dev/null | head -20
}
not() { ! "$@"; }
# jqe JSON FILTER: the filter holds on JSON (a string).
jqe() { jq -e "$2" <<<"$1" >/dev/null; }

# Every node the driver runs on: wait until it runs there (another test may just have
# stopped and restored it).
driver_nodes=$(kubectl get nodes -l gpu.example.com/present=true -o jsonpath='{.items[*].metadata.name}')
for n in $driver_nodes; do wait_until 60 driver_running "$n" || fail "the driver does not run on $n"; done
old_node=$(echo "$driver_nodes" | tr ' ' '\n' | sort | tail -n 1)
check "the driver runs on at least 2 nodes (an old kubelet on one of them)" [ "$(echo "$driver_nodes" | wc -w)" -ge 2 ]

# ---- baseline ----------------------------------------------------------------------
echo "baseline"
drainer_run base doctor -o json
check_rc "doctor on the cluster as it is exits 0 (no FAIL)" 0 base
[ "$run_rc" = 0 ] || show_findings base
not_pass base >"$e2e_tmp/base.keys"
check_eq "baseline: no FAIL" "" "$(fails base)"
check_eq "baseline: the driver $DRIVER was found through its DaemonSet" "DaemonSet $DS_NS/$DS" \
	"$(finding base driver-daemonset "driver $DRIVER" | jq -r '.objects[0]')"
check_eq "baseline: liveness probe PASS (gRPC)" PASS "$(finding base liveness-probe "driver $DRIVER" | jq -r .status)"
check_eq "baseline: kubelet versions PASS" PASS "$(finding base kubelet-versions "driver $DRIVER" | jq -r .status)"
check_eq "baseline: driver pods healthy, SERVING on the gRPC port" \
	"PASS $(echo "$driver_nodes" | wc -w)" "$(finding base driver-health "driver $DRIVER" | jq -r '"\(.status) \(.details.serving)"')"
check "every finding names a section of the guide" \
	jqe "$(cat "$e2e_tmp/base.out")" '[.findings[] | select((.practice | length) == 0 or (.section | length) == 0)] | length == 0'

# ---- the bad cluster ---------------------------------------------------------------
echo "bad cluster: slice writer, no liveness probe, kubelet v1.32.4 on $old_node"
ci=$(kubectl -n "$DS_NS" get ds "$DS" -o json | jq '[.spec.template.spec.containers[] | .livenessProbe != null] | index(true)')
probe=$(kubectl -n "$DS_NS" get ds "$DS" -o json | jq -c ".spec.template.spec.containers[$ci].livenessProbe")
old_version=$(kubectl get node "$old_node" -o jsonpath='{.status.nodeInfo.kubeletVersion}')
check "the driver DaemonSet has a liveness probe to take away" [ "$ci" != null ] && [ "$probe" != null ]

undo_rbac() {
	kubectl delete clusterrolebinding doctor-test-slice-writer --ignore-not-found >/dev/null
	kubectl -n default delete rolebinding doctor-test-ns-slice-writer doctor-test-claim-user --ignore-not-found >/dev/null
	kubectl delete clusterrole doctor-test-slice-writer doctor-test-claim-user --ignore-not-found >/dev/null
}
restore_probe() {
	if [ "$(kubectl -n "$DS_NS" get ds "$DS" -o json | jq ".spec.template.spec.containers[$ci].livenessProbe")" = null ]; then
		kubectl -n "$DS_NS" patch ds "$DS" --type=json \
			-p "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/$ci/livenessProbe\",\"value\":$probe}]" >/dev/null
	fi
	kubectl -n "$DS_NS" rollout status ds "$DS" --timeout=120s >/dev/null
}
kubelet_stopped=
restore_kubelet() {
	kubectl patch node "$old_node" --subresource=status --type=merge \
		-p "{\"status\":{\"nodeInfo\":{\"kubeletVersion\":\"$old_version\"}}}" >/dev/null
	if [ -n "$kubelet_stopped" ]; then
		"$e2e_root/tests/cluster/kubelet" start "$old_node" 2>/dev/null || fail "$old_node's kubelet started again"
		kubelet_stopped=
	fi
}
e2e_cleanup_hooks+=(undo_rbac restore_probe restore_kubelet)

kubectl create clusterrole doctor-test-slice-writer --verb=create,update,patch,delete \
	--resource=resourceslices.resource.k8s.io >/dev/null
kubectl create clusterrolebinding doctor-test-slice-writer --clusterrole=doctor-test-slice-writer \
	--user=doctor-test-alice >/dev/null
kubectl -n default create rolebinding doctor-test-ns-slice-writer --clusterrole=doctor-test-slice-writer \
	--user=doctor-test-bob >/dev/null
kubectl create clusterrole doctor-test-claim-user --verb=create,get,list \
	--resource=resourceclaims.resource.k8s.io,resourceclaimtemplates.resource.k8s.io >/dev/null
kubectl -n default create rolebinding doctor-test-claim-user --clusterrole=doctor-test-claim-user \
	--user=doctor-test-carol >/dev/null
# What the API server really does with a write (server-side dry run: nothing is stored).
slice_dry_run() { # USER
	kubectl create --dry-run=server --as="$1" -o name -f - >/dev/null 2>&1 <<-EOF
	apiVersion: resource.k8s.io/v1
	kind: ResourceSlice
	metadata:
	  name: doctor-test-dry-run
	spec:
	  driver: doctor-test.example.com
	  pool: {name: doctor-test, resourceSliceCount: 1}
	  allNodes: true
	EOF
}
check "the API server lets alice create a ResourceSlice (dry run)" slice_dry_run doctor-test-alice
check "the API server refuses bob (a RoleBinding cannot grant a cluster-scoped resource)" \
	not slice_dry_run doctor-test-bob
kubectl -n "$DS_NS" patch ds "$DS" --type=json \
	-p "[{\"op\":\"remove\",\"path\":\"/spec/template/spec/containers/$ci/livenessProbe\"}]" >/dev/null
kubectl -n "$DS_NS" rollout status ds "$DS" --timeout=120s >/dev/null
check "the driver DaemonSet rolled out without the probe" [ $? = 0 ]
for n in $driver_nodes; do wait_until 60 driver_running "$n" || fail "the driver does not run on $n after the rollout"; done
if [ "${DRAINER_CLUSTER_NODES:-}" = real ]; then
	# (a real kubelet would report its own version again at its next status update)
	"$e2e_root/tests/cluster/kubelet" kill "$old_node" 2>/dev/null && kubelet_stopped=1
	check "$old_node's kubelet stopped, so that nothing rewrites its version" test -n "$kubelet_stopped"
fi
kubectl patch node "$old_node" --subresource=status --type=merge \
	-p '{"status":{"nodeInfo":{"kubeletVersion":"v1.32.4"}}}' >/dev/null
check_eq "$old_node reports kubelet v1.32.4" v1.32.4 "$(kubectl get node "$old_node" -o jsonpath='{.status.nodeInfo.kubeletVersion}')"

drainer_run bad doctor -o json
check_rc "doctor on the bad cluster exits 5 (a FAIL)" 5 bad
not_pass bad >"$e2e_tmp/bad.keys"
check_eq "exactly two FAILs: the slice writer and the missing probe" \
	"$(printf '%s\n' "dra-api-writers User doctor-test-alice" "liveness-probe driver $DRIVER" | sort)" "$(fails bad)"
check_eq "exactly three new findings against the baseline" \
	"$(printf '%s\n' "FAIL dra-api-writers User doctor-test-alice" "FAIL liveness-probe driver $DRIVER" \
		"WARN kubelet-versions driver $DRIVER" | sort)" \
	"$(comm -13 "$e2e_tmp/base.keys" "$e2e_tmp/bad.keys")"
check_eq "no baseline finding went away" "" "$(comm -23 "$e2e_tmp/base.keys" "$e2e_tmp/bad.keys")"
f=$(finding bad dra-api-writers "User doctor-test-alice")
check_eq "alice: the ClusterRoleBinding is named" '["ClusterRoleBinding doctor-test-slice-writer -> ClusterRole doctor-test-slice-writer"]' \
	"$(echo "$f" | jq -c .objects)"
check "alice: may create, update, patch, delete resourceslices (and nothing about deviceclasses)" \
	jqe "$f" '(.message | startswith("may create, update, patch, delete resourceslices:"))
		and (.message | test("deviceclasses") | not) and (.message | test("ClusterRoleBinding \"doctor-test-slice-writer\""))
		and .section == "Separate permissions to DRA related APIs" and (.fix | length > 0)'
check_eq "bob (namespaced RoleBinding) is named nowhere" 0 "$(grep -c doctor-test-bob "$e2e_tmp/bad.out")"
check_eq "carol is listed as a namespaced claim user" true \
	"$(jq '[.findings[] | select(.check == "claim-users" and .status == "PASS") | .objects[]] | index("User doctor-test-carol in namespace default") != null' "$e2e_tmp/bad.out")"
f=$(finding bad liveness-probe "driver $DRIVER")
check_eq "liveness: the DaemonSet is named" "FAIL [\"DaemonSet $DS_NS/$DS\"]" "$(echo "$f" | jq -r '"\(.status) \(.objects | tojson)"')"
check_eq "liveness: the guide's section" "Confirm your DRA driver exposes a liveness probe and utilize it" "$(echo "$f" | jq -r .section)"
f=$(finding bad kubelet-versions "driver $DRIVER")
check_eq "old kubelet: WARN naming exactly that node and version" "WARN [\"Node $old_node (kubelet v1.32.4)\"]" \
	"$(echo "$f" | jq -r '"\(.status) \(.objects | tojson)"')"
check_eq "old kubelet: the guide's section" "Use drivers with seamless upgrade if available" "$(echo "$f" | jq -r .section)"
check_eq "driver pods still healthy (no probe port to ask now)" PASS "$(finding bad driver-health "driver $DRIVER" | jq -r .status)"

# The text form: grouped by practice, the same objects.
drainer_run bad-text doctor
check_rc "text output, same exit code" 5 bad-text
for s in "Separate permissions to DRA related APIs" "DRA driver deployment and maintenance" \
	"Monitor and tune components for higher load, especially in high scale environments" \
	"FAIL   dra-api-writers" "User doctor-test-alice" "ClusterRoleBinding doctor-test-slice-writer" \
	"DaemonSet $DS_NS/$DS" "Node $old_node (kubelet v1.32.4)" "2 FAIL, "; do
	check "text output has \"$s\"" grep -qF -- "$s" "$e2e_tmp/bad-text.out"
done

# --node limits the per-node checks: the old kubelet is out of scope on another node.
other=$(echo "$driver_nodes" | tr ' ' '\n' | sort | head -n 1)
drainer_run node doctor --node "$other" -o json
check_rc "--node $other: still exit 5 (cluster-wide FAILs)" 5 node
check_eq "--node $other: kubelet versions PASS there" PASS "$(finding node kubelet-versions "driver $DRIVER" | jq -r .status)"
check_eq "--node $other: the JSON says so" "$other" "$(jq -r .cluster.node "$e2e_tmp/node.out")"

# The ServiceAccount of deploy/doctor sees the same: its RBAC is enough.
created_ns=
ns_settled drainer-system || fail "namespace drainer-system still terminating after 120 s"
if ! kubectl get namespace drainer-system >/dev/null 2>&1; then
	kubectl create namespace drainer-system >/dev/null && created_ns=1
fi
undo_deploy() {
	kubectl delete -k "$e2e_root/deploy/doctor" --ignore-not-found >/dev/null 2>&1
	[ -z "$created_ns" ] || kubectl delete namespace drainer-system --wait=false >/dev/null 2>&1
}
e2e_cleanup_hooks+=(undo_deploy)
kubectl apply -k "$e2e_root/deploy/doctor" >/dev/null
check "kubectl apply -k deploy/doctor" [ $? = 0 ]
token=$(kubectl -n drainer-system create token drainer-doctor --duration=10m 2>/dev/null)
if [ -n "$token" ]; then
	kubectl config view --raw --minify -o json | jq --arg t "$token" '.users[0].user = {token: $t}' >"$e2e_tmp/sa.kubeconfig"
	drainer_run sa --kubeconfig "$e2e_tmp/sa.kubeconfig" doctor -o json
	check_rc "doctor as ServiceAccount drainer-system/drainer-doctor: exit 5" 5 sa
	check_eq "the ServiceAccount gets the same findings as an admin" "$(cat "$e2e_tmp/bad.keys")" "$(not_pass sa)"
	check_eq "no 'cannot' finding for the ServiceAccount" 0 "$(jq '[.findings[] | select(.message | test("^cannot |could not|failed"))] | length' "$e2e_tmp/sa.out")"
else
	fail "kubectl create token drainer-doctor"
fi
restore_kubelet
undo_deploy

# ---- fixed ---------------------------------------------------------------------------
echo "fixed"
undo_rbac
restore_kubelet
restore_probe
check "the driver DaemonSet rolled out with its probe again" [ "$(kubectl -n "$DS_NS" get ds "$DS" -o json | jq ".spec.template.spec.containers[$ci].livenessProbe != null")" = true ]
for n in $driver_nodes; do wait_until 60 driver_running "$n" || fail "the driver does not run on $n after the rollout"; done
drainer_run fixed doctor -o json
check_rc "doctor after the fixes exits 0" 0 fixed
[ "$run_rc" = 0 ] || show_findings fixed
check_eq "after the fixes: no FAIL" "" "$(fails fixed)"
check_eq "after the fixes: the findings of the baseline again" "$(cat "$e2e_tmp/base.keys")" "$(not_pass fixed)"

# ---- drain readiness and client QPS -------------------------------------------------
echo "drain readiness: a cordoned node with claims, an unfinished drain, a serve pod; static control plane pods"
demo || fail "demo workload"
cordon_node=node-1
ann_node=$(echo "$driver_nodes" | tr ' ' '\n' | sort | sed -n 2p)
serve_node=$old_node
undo_readiness() {
	kubectl uncordon "$cordon_node" >/dev/null 2>&1
	kubectl annotate node "$ann_node" drainer.io/state- drainer.io/state-since- drainer.io/message- >/dev/null 2>&1
	kubectl -n default delete pod doctor-test-drainer-serve --ignore-not-found --grace-period=1 >/dev/null 2>&1
	kubectl -n kube-system delete pod kube-controller-manager-doctor-test kube-scheduler-doctor-test \
		--ignore-not-found --grace-period=1 >/dev/null 2>&1
}
e2e_cleanup_hooks+=(undo_readiness)
claims_on_node "$cordon_node" | jq -r '.[] | "ResourceClaim \(.ns)/\(.name)"' | sort >"$e2e_tmp/held.want"
kubectl cordon "$cordon_node" >/dev/null
kubectl annotate node "$ann_node" drainer.io/state=evict-rest drainer.io/state-since=2026-01-01T00:00:00Z \
	drainer.io/message="evicting 3 pods" >/dev/null
kubectl apply -f - >/dev/null <<-EOF
	apiVersion: v1
	kind: Pod
	metadata:
	  name: doctor-test-drainer-serve
	  namespace: default
	  labels: {app.kubernetes.io/name: drainer}
	spec:
	  nodeName: $serve_node
	  containers:
	  - {name: drainer, image: drainer:latest, command: ["/usr/bin/drainer"], args: ["serve", "--node", "$serve_node"]}
	---
	apiVersion: v1
	kind: Pod
	metadata:
	  name: kube-controller-manager-doctor-test
	  namespace: kube-system
	  labels: {component: kube-controller-manager, tier: control-plane}
	spec:
	  nodeName: $serve_node
	  containers:
	  - {name: kcm, image: kube-controller-manager, command: ["kube-controller-manager", "--kube-api-qps=2", "--kube-api-burst", "3"]}
	---
	apiVersion: v1
	kind: Pod
	metadata:
	  name: kube-scheduler-doctor-test
	  namespace: kube-system
	  labels: {component: kube-scheduler, tier: control-plane}
	spec:
	  nodeName: $serve_node
	  containers:
	  - {name: sched, image: kube-scheduler, command: ["kube-scheduler", "--config=/etc/kubernetes/scheduler.conf"]}
	EOF
pod_running() { [ "$(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
wait_until 30 pod_running default doctor-test-drainer-serve || fail "the drainer serve stand-in does not run"
drainer_run ready doctor -o json
check_rc "drain readiness findings are WARNs: exit 0" 0 ready
check "the demo holds claims on $cordon_node" [ -s "$e2e_tmp/held.want" ]
f=$(finding ready cordoned-with-claims "$cordon_node")
check_eq "cordoned $cordon_node with claims: WARN" WARN "$(echo "$f" | jq -r .status)"
check_eq "cordoned $cordon_node: exactly the claims on it (the DESIGN.md rule), and the node" \
	"$(printf '%s\n' "Node $cordon_node"; cat "$e2e_tmp/held.want")" "$(echo "$f" | jq -r '.objects[]')"
f=$(finding ready unfinished-drain "$ann_node")
check_eq "unfinished drain on $ann_node: WARN with its phase and message" "WARN evict-rest evicting 3 pods" \
	"$(echo "$f" | jq -r '"\(.status) \(.message | capture("phase (?<p>[a-z-]+)").p) \(.objects[1] | sub("drainer.io/message: "; ""))"')"
check_eq "$serve_node (a drainer serve pod) is not reported uncovered" false \
	"$(jq --arg n "Node $serve_node" '[.findings[] | select(.check == "drain-coverage" and .status == "WARN") | .objects[]] | index($n) != null' "$e2e_tmp/ready.out")"
check "the coverage PASS counts the serve daemon" \
	jqe "$(cat "$e2e_tmp/ready.out")" '[.findings[] | select(.check == "drain-coverage" and .status == "PASS" and (.message | test("[1-9][0-9]* by drainer serve")))] | length == 1'
f=$(finding ready client-qps kube-controller-manager)
check "kube-controller-manager at QPS 2 / burst 3: WARN below the scaled floor, naming its pod" \
	jqe "$f" '.status == "WARN" and (.message | test("--kube-api-qps 2, --kube-api-burst 3: below")) and .objects == ["Pod kube-system/kube-controller-manager-doctor-test"] and .details.qps == 2'
check_eq "kube-scheduler with --config: WARN, not visible" "WARN" \
	"$(finding ready client-qps kube-scheduler | jq -r 'select(.message | test("--config")) | .status')"
undo_readiness
drainer_run ready-undone doctor -o json
check_eq "readiness undone: the findings of the baseline again" "$(cat "$e2e_tmp/base.keys")" "$(not_pass ready-undone)"

# ---- Prometheus: the guide's queries and their interpretation -------------------------
prom_pid=
prom_start() { # SCENARIO
	rm -f "$e2e_tmp/prom.port" "$e2e_tmp/prom.log"
	python3 "$fixtures/prom-fixture.py" "$fixtures/$1.json" "$e2e_tmp/prom.port" "$e2e_tmp/prom.log" &
	prom_pid=$!
	wait_until 10 test -s "$e2e_tmp/prom.port"
	prom_url=http://127.0.0.1:$(cat "$e2e_tmp/prom.port")
}
prom_stop() {
	[ -z "$prom_pid" ] || { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; }
	prom_pid=
}
e2e_cleanup_hooks+=(prom_stop)
# metric TAG CHECK: "STATUS fix-or-message" of the metric finding CHECK
metric() { jq -r --arg c "$2" '[.findings[] | select(.check == $c)][0] | "\(.status) \(.section) | \(.message) | \(.fix // "")"' "$e2e_tmp/$1.out"; }
expect_metric() { # TAG CHECK STATUS SECTION TEXT
	local got
	got=$(metric "$1" "$2")
	case $got in
	"$3 $4 |"*"$5"*) pass "$1: $2 $3 ($5)" ;;
	*) fail "$1: $2: expected $3 in \"$4\" mentioning \"$5\", got: $got" ;;
	esac
}
KCM="kube-controller-manager metrics"
SCHED="kube-scheduler metrics"
KUBELET="kubelet metrics"
PLUGIN="DRA kubeletplugin operations"

prom_checks() {
	prom_start healthy
	drainer_run prom-healthy doctor --prometheus "$prom_url/" -o json
	check_rc "healthy metrics: exit 0" 0 prom-healthy
	expect_metric prom-healthy resource-claim-workqueue PASS "$KCM" "keeps up"
	expect_metric prom-healthy scheduling-latency PASS "$SCHED" "0.743 s end to end"
	expect_metric prom-healthy prepare-latency PASS "$KUBELET" "0.248 s as the kubelet sees it"
	expect_metric prom-healthy unprepare-latency PASS "$KUBELET" "0.0995 s as the kubelet sees it"
	check_eq "with metrics, the invisible client QPS is judged by them" "PASS PASS" \
		"$(jq -r '[.findings[] | select(.check == "client-qps") | .status] | join(" ")' "$e2e_tmp/prom-healthy.out")"
	check_eq "doctor asked exactly the guide's queries, verbatim" "$(sort "$fixtures/guide-queries.txt")" "$(sort -u "$e2e_tmp/prom.log")"
	prom_stop

	prom_start controller-slow
	drainer_run prom-slow doctor --prometheus "$prom_url" -o json
	check_rc "slow controller: WARNs only, exit 0" 0 prom-slow
	expect_metric prom-slow resource-claim-workqueue WARN "$KCM" "raise kube-controller-manager's --kube-api-qps and --kube-api-burst, and its CPU/memory"
	check "without kube-prometheus-stack's endpoint label, the depth is asked without it" \
		grep -qxF 'sum(workqueue_depth{name="resource_claim"})' "$e2e_tmp/prom.log"
	check_eq "the finding names the depth query that answered" true \
		"$(jq '[.findings[] | select(.check == "resource-claim-workqueue") | .objects[]] | index("query sum(workqueue_depth{name=\"resource_claim\"})") != null' "$e2e_tmp/prom-slow.out")"
	check_eq "the finding carries the numbers" '{"addRate":0.5,"depth":42,"workP99Seconds":2.5}' \
		"$(jq -c '[.findings[] | select(.check == "resource-claim-workqueue")][0].details' "$e2e_tmp/prom-slow.out")"
	expect_metric prom-slow scheduling-latency WARN "$SCHED" "clientConnection.qps/burst"
	expect_metric prom-slow prepare-latency WARN "$KUBELET" "look at the kubelets"
	expect_metric prom-slow unprepare-latency WARN "$PLUGIN" "look at the DRA driver"
	prom_stop

	prom_start concurrency
	drainer_run prom-conc doctor --prometheus "$prom_url" -o json
	check_rc "busy controller: exit 0" 0 prom-conc
	expect_metric prom-conc resource-claim-workqueue WARN "$KCM" "lower the pod creation QPS"
	expect_metric prom-conc scheduling-latency WARN "$SCHED" "more CPU"
	expect_metric prom-conc prepare-latency WARN "$KUBELET" "+Inf s"
	expect_metric prom-conc unprepare-latency PASS "$KUBELET" "0.3 s"
	prom_stop

	prom_start empty
	drainer_run prom-empty doctor --prometheus "$prom_url" -o json
	check_rc "no samples: exit 0" 0 prom-empty
	check_eq "no samples: four WARNs saying so" 4 \
		"$(jq '[.findings[] | select(.status == "WARN" and (.message | test("no samples")))] | length' "$e2e_tmp/prom-empty.out")"
	prom_stop

	prom_start error
	drainer_run prom-error doctor --prometheus "$prom_url" -o json
	check_rc "a refused query: exit 0" 0 prom-error
	expect_metric prom-error scheduling-latency WARN "$SCHED" "query refused (HTTP 400): bad_data"
	expect_metric prom-error resource-claim-workqueue PASS "$KCM" "keeps up"
	port=$(cat "$e2e_tmp/prom.port")
	prom_stop
	drainer_run prom-down doctor --prometheus "http://127.0.0.1:$port" -o json
	check_rc "Prometheus unreachable: WARNs, exit 0" 0 prom-down
	check_eq "Prometheus unreachable: four WARNs saying so" 4 \
		"$(jq '[.findings[] | select(.status == "WARN" and (.message | test("cannot query it")))] | length' "$e2e_tmp/prom-down.out")"
}
if command -v python3 >/dev/null; then
	prom_checks
else
	fail "python3 is needed for the Prometheus fixture (apt-get install python3-minimal): its checks did not run"
fi

# ---- usage and read-only --------------------------------------------------------------
drainer_run usage1 doctor extra
check_rc "a positional argument is bad usage" 2 usage1
drainer_run usage2 doctor --prometheus ftp://x
check_rc "--prometheus needs http(s)" 2 usage2
drainer_run usage3 doctor --bogus
check_rc "unknown flag" 2 usage3
drainer_run usage4 doctor --node no-such-node
check_rc "unknown --node exits 8 (the node does not exist)" 8 usage4
check "unknown node is named" grep -q 'node "no-such-node" not found' "$e2e_tmp/usage4.err"
drainer_run help doctor --help
check_rc "--help" 0 help
check "--help documents exit code 5" grep -q "5 at least one finding is FAIL" "$e2e_tmp/help.out"

sleep 1
writes=$(tail -n +"$((start_line + 1))" "$AUDIT" | grep '"userAgent":"drainer/' |
	jq -r 'select(.stage == "ResponseComplete") | select(.verb != "get" and .verb != "list")
		| "\(.verb) \(.objectRef.resource)"' | sort | uniq -c | awk '{ print $2, $3 }' | tr '\n' ';')
check_eq "doctor only read (and asked SubjectAccessReviews)" "create subjectaccessreviews;" "$writes"
finish
