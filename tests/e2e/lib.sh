# Shared helpers of drainer's e2e tests (sourced). They run against the cluster of
# tests/cluster (DRAINER_CLUSTER_DIR) and assert on what the API server holds and
# on its audit log, not on drainer's own log lines.
set -uo pipefail

e2e_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${DRAINER_CLUSTER_DIR:=/tmp/drainer-cluster}"
export KUBECONFIG=$DRAINER_CLUSTER_DIR/kubeconfig
# (kubectl's discovery cache: the cluster's own, emptied by each up; tests/cluster/lib.sh)
export KUBECACHEDIR=$DRAINER_CLUSTER_DIR/kube-cache
DRAINER=${DRAINER:-$e2e_root/build/drainer}
KUBECTL=$DRAINER_CLUSTER_DIR/bin/kubectl
AUDIT=$DRAINER_CLUSTER_DIR/audit.log
e2e_tmp=$(mktemp -d)
e2e_checks=0
e2e_failed=0
trap 'e2e_cleanup' EXIT
e2e_cleanup_hooks=()
# A script that cannot put the demo workload back fails itself, by name, rather than
# leaving the next scripts to time out on what it left (demo, below).
e2e_in_cleanup=0 e2e_cleanup_failed=0
e2e_cleanup() {
	local h
	e2e_in_cleanup=1
	for h in "${e2e_cleanup_hooks[@]}"; do eval "$h" || true; done
	if [ -n "${E2E_KEEP_TMP:-}" ]; then
		echo "(kept $e2e_tmp)"
	else
		rm -rf "$e2e_tmp"
	fi
	if [ "$e2e_cleanup_failed" != 0 ]; then
		echo "cleanup failed: the cluster is not as the next script expects"
		# the count again, with the cleanup's failures (finish printed it before them)
		echo "$((e2e_checks - e2e_failed)) passed, $e2e_failed failed"
		exit 1
	fi
}

# The DRA API the cluster serves (tests/cluster/up wrote it): the manifests of the
# scripts are written in resource.k8s.io/v1, and a manifest given on stdin is
# rewritten into the served version (tests/cluster/dra-manifest).
e2e_dra_api=$(sed -n 's/^DRAINER_CLUSTER_DRA_API=//p' "$DRAINER_CLUSTER_DIR/cluster.env" 2>/dev/null) || e2e_dra_api=
e2e_dra_api=${e2e_dra_api:-v1}
e2e_nodes=$(sed -n 's/^DRAINER_CLUSTER_NODES=//p' "$DRAINER_CLUSTER_DIR/cluster.env" 2>/dev/null) || e2e_nodes=
e2e_kube_version=$(sed -n 's/^DRAINER_CLUSTER_KUBE_VERSION=//p' "$DRAINER_CLUSTER_DIR/cluster.env" 2>/dev/null) || e2e_kube_version=
# Real nodes without a DRA API run no DRA driver (tests/cluster/up: driver_manifests).
e2e_no_driver() { [ "$e2e_dra_api" = off ] && [ "$e2e_nodes" = real ]; }
kubectl() {
	if [ "$e2e_dra_api" != v1 ] && [[ " $* " == *" -f - "* ]]; then
		"$e2e_root/tests/cluster/dra-manifest" "$e2e_dra_api" | "$KUBECTL" "$@"
	else
		"$KUBECTL" "$@"
	fi
}

# claim_template NS NAME [DEVICECLASS [REQUEST]]: a ResourceClaimTemplate of one device
# of DEVICECLASS (default gpu.example.com) in request REQUEST (default gpu), as a YAML
# document ending in "---", to put before a script's own manifests on kubectl's stdin:
#     { claim_template demo e2e-gpu; cat <<'YAML'; } | kubectl apply -f - >/dev/null
claim_template() {
	cat <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: $2
  namespace: $1
spec:
  spec:
    devices:
      requests:
      - name: ${4:-gpu}
        exactly:
          deviceClassName: ${3:-gpu.example.com}
---
YAML
}

# pdb NS NAME APP minAvailable|maxUnavailable N: a PodDisruptionBudget over the pods
# labelled app=APP, as a YAML document ending in "---".
pdb() {
	cat <<YAML
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: $2
  namespace: $1
spec:
  $4: $5
  selector:
    matchLabels: {app: $3}
---
YAML
}

# A TCP port of 127.0.0.1 that nothing listens on, below the ephemeral range (so no
# outgoing connection holds it either).
free_port() {
	local p i
	for i in $(seq 1 100); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# Background processes a helper started: the exit hooks signal a pid only while it
# is still tracked, so a pid that ended long ago (and may belong to someone else by
# then: a long test forks thousands of processes) is never signalled.
declare -A e2e_pids=()
track_pid() { e2e_pids[$1]=1; }
untrack_pid() { unset "e2e_pids[$1]"; }
reap_pid() { # PID [SIGNAL]
	[ -n "${e2e_pids[$1]:-}" ] || return 0
	kill -"${2:-TERM}" "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	untrack_pid "$1"
}

pass() { e2e_checks=$((e2e_checks + 1)); echo "  ok: $*"; }
fail() {
	e2e_checks=$((e2e_checks + 1)) e2e_failed=$((e2e_failed + 1))
	echo "  FAIL: $*"
	fail_record "$*"
}
# fail_record TEXT: tests/run-all's summary repeats every failed check with its step:
# the ones that count, this shell's (a subshell's are a checker's self-test, or lost
# with the subshell's counters).
fail_record() {
	[ -z "${DRAINER_E2E_FAIL_LOG:-}" ] || [ "$BASH_SUBSHELL" != 0 ] ||
		printf '%s: %s\n' "${DRAINER_E2E_STEP:-$(basename "$0")}" "$1" >>"$DRAINER_E2E_FAIL_LOG"
}
check() { # description command...
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
check_eq() { # description expected actual
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi
}
finish() {
	echo "$((e2e_checks - e2e_failed)) passed, $e2e_failed failed"
	[ "$e2e_failed" = 0 ]
}

# wait_until SECONDS command...: polls every 0.2 s.
# admission_refused TAG WHAT PATTERN CMD...: CMD fails with PATTERN in its error (a
# ValidatingAdmissionPolicy's message); its output in $e2e_tmp/TAG.{out,err}.
admission_refused() {
	local tag=$1 what=$2 pat=$3
	shift 3
	if "$@" >"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err"; then
		fail "$what: admitted"
	elif grep -q -- "$pat" "$e2e_tmp/$tag.err"; then
		pass "$what: refused ($(grep -o "ValidatingAdmissionPolicy '[^']*'" "$e2e_tmp/$tag.err" | head -n 1))"
	else
		fail "$what: refused, but not with [$pat]: $(head -c 400 "$e2e_tmp/$tag.err")"
	fi
}
# admission_admitted TAG WHAT CMD...: CMD succeeds.
admission_admitted() {
	local tag=$1 what=$2
	shift 2
	if "$@" >"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err"; then pass "$what"; else fail "$what: $(head -c 400 "$e2e_tmp/$tag.err")"; fi
}

wait_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# ns_settled NAME: waits up to 120 s while namespace NAME is terminating (another
# script deleted it without waiting): nothing can be created in it until it is gone.
ns_settled() {
	wait_until 120 bash -c "[ \"\$('$KUBECTL' get namespace '$1' -o jsonpath='{.status.phase}' 2>/dev/null)\" != Terminating ]"
}

# Audit events of requests made by drainer (its User-Agent), as JSON lines.
audit_drainer() {
	grep '"userAgent":"drainer/' "$AUDIT" | jq -c 'select(.stage == "ResponseComplete" or .stage == "Panic" or .stage == "ResponseStarted")'
}
audit_lines() { wc -l <"$AUDIT"; }

# ---------------------------------------------------------------------------
# Helpers of the drain tests (test-drain-*.sh).

# The cluster's own settings (ports, IP prefix), so that tests/cluster/demo and
# up talk to the cluster in $DRAINER_CLUSTER_DIR even when only that is set.
if [ -f "$DRAINER_CLUSTER_DIR/cluster.env" ]; then
	set -a
	# shellcheck disable=SC1091
	. "$DRAINER_CLUSTER_DIR/cluster.env"
	set +a
fi

# need_drainer: fails the script (and ends it) when there is no drainer binary.
need_drainer() {
	if ! [ -x "$DRAINER" ] || ! "$DRAINER" version >/dev/null 2>&1; then
		fail "no working drainer binary at $DRAINER (build it, or set DRAINER)"
		finish
		exit 1
	fi
}

# demo: (re)creates the demo workload on node-1 (tests/cluster/demo).
demo() {
	"$e2e_root/tests/cluster/demo" >"$e2e_tmp/demo.log" 2>&1 || {
		tail -n 20 "$e2e_tmp/demo.log" | sed 's/^/    demo: /'
		if [ "$e2e_in_cleanup" = 1 ]; then
			fail "cleanup: the demo workload is not back"
			e2e_cleanup_failed=1
		fi
		return 1
	}
}

# finalizers_clear NS POD: removes every finalizer of POD (a pod a test held).
finalizers_clear() {
	kubectl -n "$1" patch pod "$2" --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null 2>&1
}
# hold_pod_start: a pod that stays, deleting, once evicted, until hold_pod_release:
# one replica of e2e-hold (fixtures/hold-deployment.yaml, on node-1) whose running pod
# ($hold_pod) gets the finalizer e2e.drainer.io/hold (the pod, not the template: the
# replica that replaces it is free). Two checks; the cleanup deletes the Deployment
# and releases the pod. hold_pod_deleting: it was deleted and is still there.
hold_pod=
hold_pod_start() {
	kubectl apply -f "$e2e_root/tests/e2e/fixtures/hold-deployment.yaml" >/dev/null
	e2e_cleanup_hooks+=("kubectl -n demo delete deployment e2e-hold --ignore-not-found >/dev/null 2>&1" "hold_pod_release")
	check "a pod of e2e-hold runs on node-1" wait_until 60 hold_pod_find
	check "${hold_pod:-the pod of e2e-hold} gets the finalizer e2e.drainer.io/hold" hold_pod_patch
}
hold_pod_patch() {
	kubectl -n demo patch pod "${hold_pod:-none}" -p '{"metadata":{"finalizers":["e2e.drainer.io/hold"]}}' >/dev/null
}
hold_pod_find() {
	hold_pod=$(kubectl -n demo get pods -l app=e2e-hold --field-selector status.phase=Running -o jsonpath='{.items[0].metadata.name}' 2>/dev/null) || hold_pod=
	[ -n "$hold_pod" ]
}
hold_pod_deleting() { [ -n "$(kubectl -n demo get pod "${hold_pod:-none}" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]; }
hold_pod_release() {
	[ -z "$hold_pod" ] || finalizers_clear demo "$hold_pod" || true
	hold_pod=
}

# hold_driver_start NODE: NODE's DRA driver pod, once evicted, stays (deleting) until
# hold_driver_release: the finalizer e2e.drainer.io/hold on the running pod, so that a
# drain stays in stop-drivers (drainer counts a deleting driver pod as not stopped) even
# where the kubelet removes the pod at once. One check; the cleanup releases the pod.
held_driver=
hold_driver_start() {
	local ref
	ref=$(driver_pod "$1")
	held_driver=${ref#*/}
	e2e_cleanup_hooks+=("hold_driver_release")
	check "${held_driver:-the driver pod of $1} gets the finalizer e2e.drainer.io/hold" hold_driver_patch
}
hold_driver_patch() {
	kubectl -n dra-system patch pod "${held_driver:-none}" -p '{"metadata":{"finalizers":["e2e.drainer.io/hold"]}}' >/dev/null
}
hold_driver_release() {
	[ -z "$held_driver" ] || finalizers_clear dra-system "$held_driver" || true
	held_driver=
}

# guard_kustomize DIR MANIFEST IMAGE: in DIR, a kustomize base of the DRA driver's
# MANIFEST (its DaemonSet labelled app.kubernetes.io/component=kubeletplugin, which the
# test manifests carry only on the pods: the guard component's target) and an overlay,
# DIR/overlay, that adds deploy/driver-guard with drainer's image retargeted to IMAGE, as
# a user would.
guard_kustomize() {
	local kdir=$1 manifest=$2 image=$3
	mkdir -p "$kdir/base" "$kdir/overlay"
	cp "$manifest" "$kdir/base/dra-driver.yaml"
	cat >"$kdir/base/kustomization.yaml" <<'EOF'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [dra-driver.yaml]
patches:
- target: {group: apps, version: v1, kind: DaemonSet, name: dra-driver}
  patch: |-
    - op: add
      path: /metadata/labels/app.kubernetes.io~1component
      value: kubeletplugin
EOF
	cat >"$kdir/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../base]
components: [$(realpath --relative-to="$kdir/overlay" "$e2e_root/deploy/driver-guard")]
images:
- {name: localhost/drainer, newName: ${image%:*}, newTag: "${image##*:}"}
EOF
}

# node_back NODE: a real node whose Node a peer deleted (Cluster API, Karpenter) back as
# up made it: the kubelet registers it again, restarted if it does not within 10 s (a 1.37
# kubelet whose Node was deleted does not register it again by itself); then what up's
# init_real_nodes does for a new Node (the kubelets run with --cloud-provider=external):
# its InternalIP, the uninitialized taint gone, drainer's annotations reset. One failure
# (named) if it does not come back within 120 s.
node_back() {
	local node=$1
	if ! wait_until 10 kubectl get node "$node"; then
		echo "    (the kubelet of $node did not register its Node again: restarting it)"
		"$e2e_root/tests/cluster/kubelet" kill "$node" >/dev/null 2>&1
		"$e2e_root/tests/cluster/kubelet" start "$node" >/dev/null 2>&1
	fi
	wait_until 120 kubectl get node "$node" || { fail "$node did not come back"; return 1; }
	kubectl patch node "$node" --subresource=status --type=merge -p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"$DRAINER_CLUSTER_IP_PREFIX.0.${node#node-}\"},{\"type\":\"Hostname\",\"address\":\"$node\"}]}}" >/dev/null
	kubectl taint node "$node" node.cloudprovider.kubernetes.io/uninitialized- >/dev/null 2>&1
	reset_node "$node" >/dev/null 2>&1
}

# pdb_budget_start NAME: a pod a PodDisruptionBudget holds back: one replica of e2e-hold
# (fixtures/hold-deployment.yaml, on node-1) and the PDB NAME (minAvailable 1) over it;
# two checks (the pod runs, the PDB allows 0 disruptions); sets budget_pod. The caller's
# cleanup deletes both.
budget_pod=
pdb_budget_start() {
	local name=$1
	kubectl apply -f "$e2e_root/tests/e2e/fixtures/hold-deployment.yaml" >/dev/null
	pdb demo "$name" e2e-hold minAvailable 1 | kubectl apply -f - >/dev/null
	check "the pod of e2e-hold runs on node-1" wait_until 60 budget_pod_running
	check "PDB $name allows 0 disruptions" wait_until 30 budget_settled "$name"
	budget_pod=$(kubectl -n demo get pods -l app=e2e-hold -o jsonpath='{.items[0].metadata.name}')
}
budget_pod_running() {
	[ "$(kubectl -n demo get pods -l app=e2e-hold --field-selector spec.nodeName=node-1 -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]
}
budget_settled() { [ "$(kubectl -n demo get pdb "$1" -o jsonpath='{.status.currentHealthy}/{.status.disruptionsAllowed}')" = 1/0 ]; }

# drainer_run TAG ARGS...: runs drainer (at most $DRAINER_RUN_TIMEOUT, default 90 s), stdout in
# $e2e_tmp/TAG.out, stderr in $e2e_tmp/TAG.err. Sets run_rc, run_start (the
# audit log's line count before the run) and run_secs.
drainer_run() {
	local tag=$1 t0
	shift
	run_start=$(audit_lines)
	echo "  \$ drainer $*"
	t0=$(date +%s.%N)
	timeout -k 5 "${DRAINER_RUN_TIMEOUT:-90}" "$DRAINER" "$@" >"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err"
	run_rc=$?
	run_secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	echo "    -> exit $run_rc in $run_secs s"
	return 0
}
# check_rc DESCRIPTION EXPECTED TAG: run_rc is EXPECTED; else shows the run's stderr.
check_rc() {
	if [ "$run_rc" = "$2" ]; then
		pass "$1 (exit $2)"
	else
		fail "$1: expected exit $2, got $run_rc"
		tail -n 25 "$e2e_tmp/$3.err" | sed 's/^/    stderr: /'
	fi
}

# audit_window FROM_LINE FILE: the ResponseComplete events after line FROM_LINE
# as one JSON array sorted by requestReceivedTimestamp (fixed-width RFC 3339
# with microseconds, so strings compare as times).
# No audit log at all is a failed check (the recorder of most checks is missing). A
# window may well be empty (nothing happened); the checkers over it fail then
# (jq_checks, drainer_writes, check_rate).
audit_window() {
	audit_log_present || return 0
	tail -n +"$(($1 + 1))" "$AUDIT" | jq -c 'select(.stage == "ResponseComplete")' |
		jq -s 'sort_by(.requestReceivedTimestamp)' >"$2"
}
audit_log_present() {
	[ -s "$AUDIT" ] || { fail "no audit log at $AUDIT: the checks on the API server's record have nothing to check"; return 1; }
}
# drainer_writes FILE: the writes drainer made in an audit window file, one
# "verb resource[/sub] ns/name" line each. With a second argument "except-events",
# Events are left out.
# A window without any request of drainer prints one line saying so (a check that
# expects no write must not pass because drainer never ran).
drainer_writes() {
	if [ "$(drainer_requests "$1" 2>/dev/null)" = 0 ] || ! [ -s "$1" ]; then
		echo "(no request of drainer at all in ${1##*/})"
		return
	fi
	jq -r --arg ex "${2:-}" '.[] | select(.userAgent | startswith("drainer/"))
		| select(.verb | IN("create", "update", "patch", "delete", "deletecollection"))
		| select($ex != "except-events" or .objectRef.resource != "events")
		| "\(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.namespace // "")/\(.objectRef.name // "")"' "$1"
}
# drainer_requests FILE: how many requests drainer made in an audit window file.
drainer_requests() {
	jq '[.[] | select(.userAgent | startswith("drainer/"))] | length' "$1"
}

# Node state.
node_json() { kubectl get node "$1" -o json; }
node_ann() { kubectl get node "$1" -o json | jq -r --arg k "$2" '.metadata.annotations[$k] // ""'; }
# node_drainer_anns NODE: the node's drainer.io/ annotations as a compact JSON object.
node_drainer_anns() {
	kubectl get node "$1" -o json | jq -c '.metadata.annotations // {} | with_entries(select(.key | startswith("drainer.io/")))'
}
node_unschedulable() { kubectl get node "$1" -o json | jq -r '.spec.unschedulable // false'; }
node_tainted() { kubectl get node "$1" -o json | jq -r '[.spec.taints // [] | .[] | select(.key == "drainer.io/draining")] | length > 0'; }
# node_fingerprint NODE: what a drain may change on a Node (annotations but the
# simulator's switches, labels, spec), to compare before and after a run.
node_fingerprint() {
	kubectl get node "$1" -o json | jq -cS '{ann: (.metadata.annotations // {} | with_entries(select(.key | startswith("drainer.io/")))),
		labels: .metadata.labels, unschedulable: (.spec.unschedulable // false),
		taints: [.spec.taints // [] | .[] | {key, value, effect}]}'
}

# Driver pods (namespace dra-system, app.kubernetes.io/component=kubeletplugin).
driver_pods_json() {
	kubectl -n dra-system get pods -l app.kubernetes.io/component=kubeletplugin --field-selector "spec.nodeName=$1" -o json
}
# driver_pod NODE: "ns/name" of the node's driver pod that is not being deleted.
driver_pod() {
	driver_pods_json "$1" | jq -r '.items[] | select(.metadata.deletionTimestamp == null) | "\(.metadata.namespace)/\(.metadata.name)"' | head -n 1
}
driver_count() { driver_pods_json "$1" | jq '.items | length'; }
# driver_running NODE: the node's driver pod is Running and Ready, not deleting.
driver_running() {
	[ "$(driver_pods_json "$1" | jq '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running"
		and ([.status.conditions // [] | .[] | select(.type == "Ready" and .status == "True")] | length > 0))] | length')" -ge 1 ]
}
no_driver_pod() { [ "$(driver_count "$1")" = 0 ]; }
slice_published() {
	[ "$(kubectl get resourceslices -o json | jq --arg n "$1" '[.items[] | select(.spec.nodeName == $n and .spec.driver == "gpu.example.com")] | length')" -ge 1 ]
}
no_slice() { ! slice_published "$1"; }

# pods_on_node NODE FILE: the pods bound to NODE (kubectl JSON) in FILE.
# Bare pods without claims on NODE in namespace demo (label app=e2e-plain), one per NAME:
# the pods a driver drain must leave running with the same UIDs.
plain_pods() { # NODE NAME...
	local node=$1 p
	shift
	for p in "$@"; do
		kubectl apply -f - >/dev/null <<YAML || return 1
apiVersion: v1
kind: Pod
metadata:
  name: $p
  namespace: demo
  labels: {app: e2e-plain}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: registry.example.com/plain:v1
YAML
	done
}
pods_on_node() { kubectl get pods -A --field-selector "spec.nodeName=$1" -o json >"$2"; }
# classify_pods FILE: [{ns, name, uid, cls}] of a pods_on_node file, with cls as
# DESIGN.md classifies them: driver, mirror, holder (claim-holding),
# holder-critical (and system-*-critical), ds (DaemonSet pod without claims),
# rest, rest-critical. Terminal pods are left out.
classify_pods() {
	jq -c '[.items[] | select(.status.phase != "Succeeded" and .status.phase != "Failed")
		| . as $p
		| (((.spec.resourceClaims // []) | map(select(.resourceClaimName != null)) | length) > 0
		   or ((.status.resourceClaimStatuses // []) | map(select(.resourceClaimName != null)) | length) > 0
		   or .status.extendedResourceClaimStatus != null) as $holds
		| ((.spec.priorityClassName // "") | test("^system-.*-critical$")) as $crit
		| {ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid,
		   cls: (if .metadata.labels["app.kubernetes.io/component"] == "kubeletplugin" then "driver"
			elif .metadata.annotations["kubernetes.io/config.mirror"] != null then "mirror"
			elif $holds then (if $crit then "holder-critical" else "holder" end)
			elif ((.metadata.ownerReferences // []) | any(.kind == "DaemonSet" and .controller == true)) then "ds"
			elif $crit then "rest-critical" else "rest" end)}]' "$1"
}

# claims_on_node NODE: [{ns, name, uid}] of the ResourceClaims on NODE by the
# DESIGN.md rule (reserved for a pod bound to NODE, or allocated node-locally:
# the single matchFields term metadata.name In [NODE], or a device from a pool
# of a ResourceSlice of NODE), computed from what the API server holds.
claims_on_node() {
	local pods claims slices
	pods=$(kubectl get pods -A --field-selector "spec.nodeName=$1" -o json | jq -c '[.items[].metadata.uid]')
	slices=$(kubectl get resourceslices -o json | jq -c --arg n "$1" '[.items[] | select(.spec.nodeName == $n) | "\(.spec.driver)/\(.spec.pool.name)"]')
	kubectl get resourceclaims -A -o json | jq -c --arg n "$1" --argjson uids "$pods" --argjson pools "$slices" '[.items[]
		| select(((.status.reservedFor // []) | map(.uid) | any(. as $u | $uids | index($u)))
			or ((.status.allocation.nodeSelector.nodeSelectorTerms // [])
				| (length == 1 and (.[0].matchFields // []) == [{"key": "metadata.name", "operator": "In", "values": [$n]}]
				   and (.[0].matchExpressions // []) == []))
			or ((.status.allocation.devices.results // []) | any("\(.driver)/\(.pool)" as $dp | $pools | index($dp))))
		| {ns: .metadata.namespace, name: .metadata.name, uid: .metadata.uid}]'
}
no_claims_on_node() { [ "$(claims_on_node "$1" | jq length)" = 0 ]; }

# jq_checks JQ-ARGS...: runs jq -r with these arguments; its output is "ok TEXT"
# or "FAIL TEXT" lines, each recorded as a check (in this shell, not a pipe's
# subshell). A jq error is a failed check. So is an input that holds nothing (the
# input file, the last argument unless -n is given, and every --slurpfile file:
# missing, empty, or a JSON [] / null), and a program that printed no verdict at all:
# a checker never passes on nothing.
jq_checks() {
	local out status text verdicts=0 null_input=0 i j=0 f nwords=0
	local -a args=("$@") files=()
	# The input files: every --slurpfile/--rawfile file, and the words after the program
	# (unless -n). One that is not a regular file (a <(...) pipe) is read into a file
	# here first, so that it can be looked at without being used up.
	for ((i = 0; i < ${#args[@]}; i++)); do
		case ${args[i]} in
		-n | --null-input) null_input=1 ;;
		--slurpfile | --rawfile) files+=($((i + 2))) i=$((i + 2)) ;;
		--arg | --argjson) i=$((i + 2)) ;;
		-*) ;;
		*) nwords=$((nwords + 1)) && [ "$nwords" = 1 ] || files+=("$i") ;;
		esac
	done
	for i in "${files[@]}"; do
		f=${args[i]:-}
		if [ "$null_input" = 1 ] && [ "${args[i - 2]:-}" != --slurpfile ] && [ "${args[i - 2]:-}" != --rawfile ]; then
			continue
		fi
		if [ -e "$f" ] && ! [ -f "$f" ]; then
			j=$((j + 1))
			cat "$f" >"$e2e_tmp/jq_checks.in.$j"
			args[i]=$e2e_tmp/jq_checks.in.$j
			f=${args[i]}
		fi
		if [ -e "$f.failed" ]; then
			fail "${FUNCNAME[1]:-a check}: the recorder of ${f##*/} failed ($(cat "$f.failed")): nothing certain to check"
			return
		fi
		if ! [ -s "$f" ] || { [ "$(stat -c %s "$f")" -lt 64 ] && [[ "$(tr -d ' \t\n' <"$f")" =~ ^(\[\]|null|\{\})?$ ]]; }; then
			fail "${FUNCNAME[1]:-a check}: its input ${f##*/} holds nothing (did its recorder run?): nothing to check"
			return
		fi
	done
	set -- "${args[@]}"
	if ! out=$(jq -r "$@"); then
		fail "jq failed in ${FUNCNAME[1]:-a check}"
		return
	fi
	while read -r status text; do
		[ -n "$status" ] || continue
		verdicts=$((verdicts + 1))
		case $status in
		ok) pass "$text" ;;
		*) fail "$text" ;;
		esac
	done <<<"$out"
	[ "$verdicts" -gt 0 ] || fail "${FUNCNAME[1]:-a check}: no verdict at all (nothing to check)"
}

# check_order AUDIT PODS CLAIMS NODE [RELEASER]: the order rule (claim holders
# first, DRA drivers last) over an audit window (audit_window), the classified pods
# of NODE before the drain (classify_pods) and the claims on NODE before it
# (claims_on_node):
#  - every claim holder and every other workload pod was evicted (or deleted) by
#    drainer; mirror pods and DaemonSet pods without claims were not;
#  - every eviction request for a non-critical claim holder was answered before
#    any request for a critical one, and those before any request for a pod
#    without claims;
#  - the driver pod's eviction was requested after the kubelet's
#    DELETE of every evicted pod (or, for a pod removed with grace 0, after that
#    request completed; or after drainer was answered 404 for it: gone), and after
#    every write of the resourceclaim
#    controller to the node's claims (each of which it wrote at least once:
#    reservations dropped, deallocated or deleted). RELEASER: the user that releases
#    claims (default system:kube-controller-manager; a test that plays the
#    resourceclaim controller itself names its own).
check_order() {
	jq_checks --argjson pods "$(cat "$2")" --argjson claims "$(cat "$3")" --arg node "$4" --arg releaser "${5:-system:kube-controller-manager}" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	def removal: (.userAgent | startswith("drainer/")) and .objectRef.resource == "pods"
		and ((.verb == "create" and .objectRef.subresource == "eviction") or (.verb == "delete" and .objectRef.subresource == null));
	def names: map(key) | unique | join(", ");
	def grace: if .verb == "create" then .requestObject.deleteOptions.gracePeriodSeconds else .requestObject.gracePeriodSeconds end;
	. as $ev
	| (if ($pods | length) == 0 then "FAIL order: no pod on \($node) before the drain: nothing to check"
	   elif ([$pods[] | select(.cls | startswith("holder"))] | length) == 0 then "FAIL order: no claim holder on \($node) before the drain: nothing to check"
	   else empty end),
	  (if ($claims | length) == 0 then "FAIL order: no ResourceClaim on \($node) before the drain: the release rule has nothing to check" else empty end),
	  (if ([$ev[] | select(.userAgent | startswith("drainer/"))] | length) == 0 then "FAIL order: no request of drainer in the audit window" else empty end),
	  (($pods | map({key: "\(.ns)/\(.name)", value: .}) | from_entries) as $by
	| [$ev[] | select(removal)] as $rem
	| ($rem | map(. + {cls: ($by[key].cls // "unknown")})) as $rem
	| [$rem[] | select(.cls == "holder")] as $h
	| [$rem[] | select(.cls == "holder-critical")] as $hc
	| [$rem[] | select(.cls == "rest" or .cls == "rest-critical")] as $r
	| [$rem[] | select(.cls == "driver")] as $d
	| ([$rem[] | key] | unique) as $removed
	| [$pods[] | select(.cls | IN("holder", "holder-critical", "rest", "rest-critical")) | "\(.ns)/\(.name)"] as $want
	| ([$want[] | select(. as $k | $removed | index($k) | not)]) as $missing
	| (if ($missing | length) == 0 then "ok every claim holder and workload pod (\($want | length)) was evicted by drainer"
	   else "FAIL not evicted by drainer: \($missing | join(", "))" end),
	  ([$rem[] | select(.cls == "mirror" or .cls == "ds")] as $bad
	   | if ($bad | length) == 0 then "ok no mirror pod or claim-less DaemonSet pod was evicted"
	     else "FAIL evicted although it stays: \($bad | names)" end),
	  (if ($h | length) == 0 or ($r | length) == 0 then "FAIL nothing to compare: \($h | length) claim-holder and \($r | length) other evictions"
	   elif ([$h[].stageTimestamp] | max) < ([$r[].requestReceivedTimestamp] | min)
	   then "ok all \($h | length) claim-holder eviction requests (\($h | names)) answered before the first eviction of a pod without claims"
	   else "FAIL a pod without claims was evicted before a claim holder: last holder answered \([$h[].stageTimestamp] | max), first other requested \([$r[].requestReceivedTimestamp] | min) (\([$r[] | select(.requestReceivedTimestamp < ([$h[].stageTimestamp] | max))] | names))" end),
	  (if ($hc | length) == 0 then empty
	   elif ($h | length) > 0 and ([$h[].stageTimestamp] | max) >= ([$hc[].requestReceivedTimestamp] | min)
	   then "FAIL a critical claim holder (\($hc | names)) was evicted before a non-critical one"
	   elif ($r | length) > 0 and ([$hc[].stageTimestamp] | max) >= ([$r[].requestReceivedTimestamp] | min)
	   then "FAIL a pod without claims was evicted before the critical claim holder \($hc | names)"
	   else "ok the system-*-critical claim holder (\($hc | names)) came after the other claim holders and before the pods without claims" end),
	  (if ($d | length) == 0 then "FAIL the driver pod was never evicted or deleted by drainer"
	   else ([$d[].requestReceivedTimestamp] | min) as $dt
	   | ("ok driver pod \($d | names) evicted at \($dt)"),
	     ([$want[] as $k
	       | ($pods[] | select("\(.ns)/\(.name)" == $k) | .uid) as $uid
	       | ([$rem[] | select(key == $k) | .requestReceivedTimestamp] | min) as $t0
	       | ([$ev[] | select((.user.username | test("^(drainer-sim|system:node:.+)$")) and .verb == "delete" and .objectRef.resource == "pods"
			and .objectRef.subresource == null and key == $k and .responseStatus.code == 200
			and ((.requestObject.preconditions.uid // $uid) == $uid)
			and ($t0 != null and .requestReceivedTimestamp > $t0))] | map(.requestReceivedTimestamp) | min) as $sim
	       # a pod removed with grace 0 (allowed for pods without claims) is gone when that request completes
	       | ([$rem[] | select(key == $k and .responseStatus.code < 300 and grace == 0) | .stageTimestamp] | min) as $forced
	       # an eviction (or DELETE) of drainer answered 404: the pod was gone by then (a
	       # request resent after an API server restart whose first answer was lost)
	       | ([$rem[] | select(key == $k and .responseStatus.code == 404) | .stageTimestamp] | min) as $notfound
	       | ([$sim, $forced, $notfound] | map(select(. != null)) | min) as $gone
	       | select($gone == null or $gone >= $dt) | "\($k) (deleted by the kubelet at \($gone))"] as $late
	      | if ($late | length) == 0 then "ok the driver was evicted after the kubelet deleted every evicted pod (\($want | length))"
	        else "FAIL the driver was evicted before these pods were gone: \($late | join(", "))" end),
	     ($claims[] | "\(.ns)/\(.name)" as $k
	       # Its status writes drop reservations and the allocation; a claim deleted
	       # without one was released by the delete. (Removing the finalizer and
	       # deleting a generated claim after its release do not matter.)
	       | [$ev[] | select(.user.username == $releaser and .objectRef.resource == "resourceclaims"
			and key == $k and .responseStatus.code < 300)] as $all
	       | [$all[] | select((.verb | IN("update", "patch")) and .objectRef.subresource == "status")] as $st
	       | (if ($st | length) > 0 then $st else [$all[] | select(.verb == "delete")] end) as $w
	       | if ($w | length) == 0 then "FAIL the resourceclaim controller never released claim \($k)"
	         elif ([$w[].requestReceivedTimestamp] | max) >= $dt then "FAIL claim \($k) was still being released (\([$w[].requestReceivedTimestamp] | max)) when the driver was evicted (\($dt))"
	         else "ok claim \($k) released (last status write by the resourceclaim controller at \([$w[].requestReceivedTimestamp] | max)) before the driver eviction" end)
	   end))' "$1"
}

# check_grace AUDIT PODS: the grace rule: every eviction or DELETE drainer
# sent for a claim holder (of the classified PODS) asked for a grace period
# other than 0 (Eviction deleteOptions.gracePeriodSeconds, DeleteOptions
# gracePeriodSeconds; absent = the pod's own), and each such pod was then
# deleted by the kubelet (drainer-sim, or a real kubelet: user system:node:NODE)
# after it terminated, i.e. it was not
# removed at once. Needs the audit policy of tests/cluster/up (requests of
# evictions and pod deletions logged at level Request).
check_grace() {
	jq_checks --argjson pods "$(cat "$2")" '
	def key: "\(.objectRef.namespace)/\(.objectRef.name)";
	def removal: (.userAgent | startswith("drainer/")) and .objectRef.resource == "pods"
		and ((.verb == "create" and .objectRef.subresource == "eviction") or (.verb == "delete" and .objectRef.subresource == null));
	def grace: if .verb == "create" then .requestObject.deleteOptions.gracePeriodSeconds else .requestObject.gracePeriodSeconds end;
	. as $ev
	| [$pods[] | select(.cls == "holder" or .cls == "holder-critical")] as $holders
	| [$ev[] | select(removal and .verb == "create")] as $evictions
	| (if ($holders | length) == 0 then "FAIL grace: no claim holder among the pods before the drain: nothing to check" else empty end),
	  (if ([$ev[] | select(.userAgent | startswith("drainer/"))] | length) == 0 then "FAIL grace: no request of drainer in the audit window" else empty end),
	  (if ($evictions | length) > 0 and ([$evictions[] | select(.requestObject == null)] | length) > 0
	   then "FAIL the audit log has no request bodies for evictions: the cluster runs an old audit policy (tests/cluster/down, then up)"
	   else empty end),
	  ($holders[] | "\(.ns)/\(.name)" as $k | .uid as $uid
	   | [$ev[] | select(removal and key == $k)] as $r
	   | if ($r | length) == 0 then "FAIL claim holder \($k) was not evicted or deleted by drainer"
	     else ([$r[] | select(grace == 0)] | length) as $zero
	     | ([$r[] | "\(.verb)=\(grace // "pod default")"] | unique | join(",")) as $asked
	     | ([$r[].requestReceivedTimestamp] | min) as $t0
	     | ([$ev[] | select((.user.username | test("^(drainer-sim|system:node:.+)$")) and .verb == "delete" and .objectRef.resource == "pods"
			and .objectRef.subresource == null and key == $k and .responseStatus.code == 200
			and ((.requestObject.preconditions.uid // $uid) == $uid) and .requestReceivedTimestamp > $t0)] | length) as $sim
	     | if $zero > 0 then "FAIL claim holder \($k) removed with grace period 0 (\($asked))"
	       elif $sim == 0 then "FAIL claim holder \($k) was not terminated by the kubelet (no later DELETE by a kubelet): removed at once?"
	       else "ok claim holder \($k): drainer asked \($asked), then the kubelet deleted it after termination" end
	     end)' "$1"
}

# check_rate AUDIT QPS BURST [UA-PREFIX] [RESTARTS] [START]: the client rate limit, from
# the audit log. AUDIT is a JSON array of audit events (audit_window or
# audit_since); each request of a client whose userAgent starts with UA-PREFIX
# (default drainer/) is counted once (by auditID, at its
# requestReceivedTimestamp, so a watch counts when it was asked for). A token
# bucket of BURST tokens refilled at QPS admits at most BURST + QPS*(t_j - t_i)
# requests in any window [t_i, t_j]; one more is allowed for the jitter between
# the client's clock and the server's receive time. Checked over every window in
# one pass: with a_k = k - QPS*t_k (requests sorted by time), the worst window is
# max over i <= j of a_j - a_i, which must stay <= BURST. Prints the worst window
# (count, length, allowed). No request at all is a failure (nothing was
# measured). One client only: two drainer processes in the window have two
# buckets. Requests of ServiceAccounts are another client's (on real nodes, the
# guard sidecar of a driver pod being evicted: drainer/ too, with its pod's
# token), not the drainer under test's, which uses the kubeconfig's user.
# RESTARTS (a JSON array of RFC 3339 times at which kube-apiserver was started
# again, or frozen with SIGSTOP; default []): a restarted kube-apiserver listens
# about a second before it serves (a frozen one reads nothing until SIGCONT), so
# requests sent in between wait in the kernel and all get the receive time of the
# moment it starts serving (S, its first audit event after R). Then, for a while,
# every client's held requests and relists arrive at once and the server stamps
# what is sent next late and bunched (on real nodes: three kubelets relisting;
# seen: a relist's requests received 240 ms late, within 20 ms of each other). So
# the client's requests received in the first second after S may have been sent
# any time from R on (before R nothing listened): each is placed back at the
# earliest time from R on at which a token bucket of BURST and QPS, fed the
# client's requests before it, has a token (never later than it arrived; what it
# sent just before R counts). A client that sent more than its bucket allowed from
# R to S + 1 s still fails, and so does one whose requests after that second
# break the rule.
# START (an RFC 3339 time just before the client was launched; default none): the
# same for the client's first connection, with R = START and S = the client's first
# request. What the client sends while that connection is set up (TCP and TLS
# handshake) is received when it is up, bunched: with a handshake longer than
# 1/QPS, the burst and the next requests arrive together and the window from the
# first of them looks one token too full (seen under ASan on a loaded machine: 8
# requests in 0.963 s at qps 5 burst 2). The first second of requests is placed back
# from START as above: a client that sent more than its bucket allowed from START
# on still fails.
check_rate() {
	jq_checks --argjson q "$2" --argjson b "$3" --arg ua "${4:-drainer/}" --argjson restarts "${5:-[]}" --arg start "${6:-}" '
	def secs: (.[0:19] + "Z" | fromdateiso8601) + ((.[19:] | rtrimstr("Z")) as $f | if $f == "" then 0 else ("0" + $f | tonumber) end);
	. as $all
	| [$all[] | select(((.userAgent // "") | startswith($ua)) and ((.user.username // "") | startswith("system:serviceaccount:") | not))]
	| group_by(.auditID) | map(map(.requestReceivedTimestamp) | min) | sort as $ts
	| if ($ts | length) == 0 then "FAIL rate: no request of \($ua)* in the audit window"
	  else ($ts[0][0:19] + "Z" | fromdateiso8601) as $t0
	  | ([$all[].requestReceivedTimestamp // empty] | unique | map(secs - $t0)) as $every
	  | ([$restarts[] | (secs - $t0) as $r | ([$every[] | select(. > $r)] | min) as $s | select($s != null) | {r: $r, s: $s}]
	     + (if $start == "" then [] else [{r: (($start | secs) - $t0), s: (($ts[0] | secs) - $t0)}] end)) as $win
	  # one token bucket (BURST, QPS) through the requests in order: a held one goes at
	  # the earliest time from its restart on at which the bucket has a token after the
	  # requests before it (never later than it arrived); the others where they arrived
	  | (reduce ($ts | map(secs - $t0))[] as $x ({t: [], tok: $b, last: null, moved: 0};
		([$win[] | select($x >= .s and $x <= .s + 1)] | first) as $w
		| (if .last != null then .last elif $w != null then $w.r else $x end) as $lt
		| (if $w == null then $x
		   else ([$w.r, $lt] | max) as $from
		   | ([$b, .tok + $q * ($from - $lt)] | min) as $tk
		   | ([$x, (if $tk >= 1 then $from else $from + (1 - $tk) / $q end)] | min) end) as $p
		| .moved += (if $p < $x then 1 else 0 end)
		| .tok = ([$b, .tok + $q * ($p - $lt)] | min) - 1
		| .last = $p
		| .t += [$p])) as $adj
	  | ($adj.t | sort) as $t
	  | (reduce range(0; $t | length) as $k ({min: null, mi: 0, worst: null};
		($k - $q * $t[$k]) as $a
		| (if .min == null or $a < .min then .min = $a | .mi = $k else . end)
		| ($a - .min) as $ex
		| if .worst == null or $ex > .worst.ex then .worst = {ex: $ex, i: .mi, j: $k} else . end)).worst as $w
	  | ($w.j - $w.i + 1) as $n | ($t[$w.j] - $t[$w.i]) as $dt | ($b + $q * $dt + 1) as $allowed
	  | def at: . + $t0 | (floor | todate | .[0:19]) + ((. - floor) * 1e6 | round | tostring | ("000000" + .)[-6:] | "." + .) + "Z";
	  "\(if $n <= $allowed + 1e-9 then "ok" else "FAIL" end) rate: \($t | length) requests of \($ua)*; worst window \($n) requests in \($dt * 1000 | round / 1000) s from \($t[$w.i] | at) (allowed \($b) + \($q) * \($dt * 1000 | round / 1000) + 1 = \($allowed * 1000 | round / 1000)) at --kube-api-qps \($q) --kube-api-burst \($b)\(if ($win | length) > 0 then "; \($adj.moved) requests held by \([if ($restarts | length) > 0 then "\($restarts | length) restarted server(s)" else empty end, if $start != "" then "the first connection" else empty end] | join(" and ")) placed back" else "" end)"
	  end' "$1"
}

# Node watch: one compact JSON line per observed version of the node (state,
# unschedulable, drain taint, was-unschedulable, started-at) appended to FILE.
node_watch_jq='{rv: .metadata.resourceVersion, state: (.metadata.annotations["drainer.io/state"] // ""),
	unsched: (.spec.unschedulable // false), taint: ([.spec.taints // [] | .[] | select(.key == "drainer.io/draining")] | length > 0),
	was: (.metadata.annotations["drainer.io/was-unschedulable"] // null), started: (.metadata.annotations["drainer.io/started-at"] // null),
	msg: (.metadata.annotations["drainer.io/message"] // "")}'
node_watch_start() { # NODE FILE
	: >"$2"
	rm -f "$2.failed"
	"$KUBECTL" get node "$1" -w -o json --output-watch-events=false --request-timeout=600s \
		> >(jq --unbuffered -c "$node_watch_jq" >>"$2" 2>/dev/null) 2>/dev/null &
	nw_pid=$! nw_file=$2
	track_pid "$nw_pid"
	e2e_cleanup_hooks+=("reap_pid $nw_pid")
	wait_until 10 test -s "$2" || recorder_failed "$2" "the watch of node $1 showed no version of it in 10 s"
}
node_watch_stop() {
	recorder_alive "${nw_pid:-}" "${nw_file:-}" "the watch"
	reap_pid "$nw_pid"
	sleep 0.2
}
# Recorders (the watches here, wl_start in test-apiserver-restart) that did not start,
# or ended before they were stopped, say so: a failed check now, and FILE.failed, which
# makes every later checker of FILE fail too (jq_checks looks for it).
recorder_failed() { # FILE REASON
	echo "$2" >"$1.failed"
	fail "recorder of ${1##*/}: $2: the checks on it have nothing (or not everything) to check"
}
recorder_alive() { # PID FILE WHAT: fails the recording if PID (still tracked) has ended
	[ -n "$1" ] && [ -n "${e2e_pids[$1]:-}" ] || return 0
	kill -0 "$1" 2>/dev/null || recorder_failed "$2" "$3 ended before it was stopped"
}
# check_node_invariants FILE WAS: on every observed version of the node, while a
# drain phase is recorded the node is cordoned, tainted and remembers
# was-unschedulable=WAS and its start time; in restore-drivers/uncordon it is
# still cordoned.
# A watch that saw no version in any of those phases has nothing to check: a failure.
check_node_invariants() {
	jq_checks -s --arg was "$2" '
	[.[] | select(.state | IN("cordon", "evict-claim-holders", "evict-rest", "wait-released", "stop-drivers", "drained"))] as $d
	| [.[] | select(.state | IN("restore-drivers", "uncordon"))] as $u
	| ([$d[] | select((.unsched and .taint and .was == $was and .started != null) | not)] | length) as $bad
	| (if ($d | length) + ($u | length) == 0 then "FAIL node invariants: none of the \(length) observed versions is in a drain or restore phase: nothing to check"
	   elif ($d | length) == 0 then empty
	   elif $bad == 0 then "ok on all \($d | length) observed versions in a drain phase the node was cordoned, tainted, was-unschedulable=\($was)"
	   else "FAIL \($bad) observed versions in a drain phase without cordon/taint/was-unschedulable=\($was): \([$d[] | select((.unsched and .taint and .was == $was and .started != null) | not)] | .[0:3] | tostring)" end),
	  (if ($u | length) == 0 then empty
	   elif ([$u[] | select(.unsched | not)] | length) == 0 then "ok while restoring drivers the node stayed cordoned (\($u | length) versions)"
	   else "FAIL the node was uncordoned while drainer.io/state was still \([$u[] | select(.unsched | not) | .state] | unique | join(","))" end),
	  ([.[] | .started // empty] | unique) as $starts
	  | (if ($starts | length) <= 1 then "ok drainer.io/started-at never changed (\($starts | join("")))"
	     else "FAIL drainer.io/started-at changed: \($starts | join(" -> "))" end)' "$1"
}
# phases_seen FILE: the distinct drainer.io/state values of a node watch, in order.
phases_seen() {
	jq -rs '[.[].state | select(. != "")] | reduce .[] as $s ([]; if (.[-1] // "") == $s then . else . + [$s] end) | join(" ")' "$1"
}

# phases_entered FILE: like phases_seen, without the state the node was in when
# the watch started (the first line).
# message_writes FILE: versions in a node watch file whose drainer.io/message changed
# while drainer.io/state did not (progress written on its own).
message_writes() {
	jq -s '[range(1; length) as $i | select(.[$i].state == .[$i - 1].state and .[$i].msg != .[$i - 1].msg)] | length' "$1"
}
phases_entered() {
	jq -rs '(.[0].state // "") as $init | [.[].state] | reduce .[] as $s ([]; if (.[-1] // "") == $s then . else . + [$s] end)
		| (if (.[0] // "") == $init then .[1:] else . end) | map(select(. != "")) | join(" ")' "$1"
}

# kill_at_phase PID FILE PHASE SECONDS [SIGNAL]: SIGKILLs (or SIGNAL) PID as soon as the
# node watch in FILE shows drainer.io/state=PHASE. Fails if PID ends first or time runs
# out. With STOP the process is left stopped (not waited for).
kill_at_phase() { # PID WATCH PHASE SECONDS [SIGNAL (default KILL)]
	local end=$((SECONDS + $4))
	while kill -0 "$1" 2>/dev/null; do
		if grep -q "\"state\":\"$3\"" "$2"; then
			kill -"${5:-KILL}" "$1" 2>/dev/null
			# (a stopped process is not waited for: wait would block until it ends)
			[ "${5:-KILL}" = STOP ] && return 0
			wait "$1" 2>/dev/null
			killed_rc=$? # (its exit status: 137 for KILL)
			return 0
		fi
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.02
	done
	return 1
}

# reset_node NODE [cordon]: puts NODE back as tests/cluster/up made it, without
# drainer (a safety net for cleanup hooks): no drainer.io/ annotations, no drain
# taint, the simulator's switches off, the driver label back, uncordoned (or
# cordoned with "cordon"); waits until its driver runs and its slice is published.
reset_node() {
	local keys
	keys=$(kubectl get node "$1" -o json | jq -r '.metadata.annotations // {} | keys[] | select(startswith("drainer.io/") or startswith("sim.drainer.io/")) | . + "-"')
	# shellcheck disable=SC2086
	[ -z "$keys" ] || kubectl annotate node "$1" $keys >/dev/null
	kubectl taint node "$1" drainer.io/draining:NoSchedule- >/dev/null 2>&1
	kubectl label node "$1" gpu.example.com/present=true --overwrite >/dev/null
	if [ "${2:-}" = cordon ]; then kubectl cordon "$1" >/dev/null; else kubectl uncordon "$1" >/dev/null; fi
	# A cluster without a DRA API (DRAINER_CLUSTER_DRA_API=off) has no slices.
	e2e_no_driver && return 0
	wait_until 60 driver_running "$1" && { [ "$e2e_dra_api" = off ] || wait_until 60 slice_published "$1"; }
}
# mkkc TOKEN FILE: a kubeconfig (mode 0600) with the test cluster's server and CA and only
# this token (a ServiceAccount's: bound to a pod or a Node, or to nothing).
mkkc() {
	local server ca
	server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
	ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
	(umask 077 && cat >"$2" <<EOF
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
    token: $1
contexts:
- name: drainer
  context: {cluster: c, user: drainer}
current-context: drainer
EOF
	)
}
# rule_prefix NODE: the start of the names of drainer's DeviceTaintRules for NODE,
# drainer-LEN-NODE- (LEN: the length of NODE; drainer/dra/taintrule.c).
rule_prefix() { printf 'drainer-%s-%s-' "${#1}" "$1"; }
# delete_node_events NODE: removes the Events about NODE in namespace default.
delete_node_events() {
	kubectl -n default delete events --field-selector "involvedObject.kind=Node,involvedObject.name=$1" >/dev/null 2>&1
}
# node_events NODE FILE: the Events about NODE (namespace default) as
# [{reason, message, count, type}] in FILE.
node_events() {
	kubectl -n default get events --field-selector "involvedObject.kind=Node,involvedObject.name=$1" -o json |
		jq -c '[.items[] | {reason, message: (.message // .note // ""), count: (.count // (.series.count // 1)), type,
			component: (.reportingComponent // .source.component // ""), uid: .involvedObject.uid, t: (.lastTimestamp // .eventTime // .metadata.creationTimestamp)}] | sort_by(.t)' >"$2"
}

# ---------------------------------------------------------------------------
# Helpers of the serve tests (test-serve*.sh).

# The fault-injecting proxy (tests/cluster/faultproxy) in front of the API server:
# FAULTPROXY_PORT (default API port + 57; its admin port + 1) moves it. Its request
# log (one JSON line per request: t, method, uri, ua, fault, ...) is $fp_log.
fp_port=${FAULTPROXY_PORT:-$((DRAINER_CLUSTER_API_PORT + 57))}
fp_admin=$((fp_port + 1))
fp_log=$e2e_tmp/proxy.log
fp_pid=
# fp_rules JSON: replaces the proxy's rules (and resets their counters).
fp_rules() {
	curl -fsS -X PUT --data-binary "$1" "http://127.0.0.1:$fp_admin/rules" >/dev/null
}
# fp_start KUBECONFIG: builds (cached) and starts the proxy, and writes KUBECONFIG,
# the cluster's with the proxy as server. Stopped by a cleanup hook.
fp_start() {
	local bin
	if ! bin=$("$e2e_root/tests/cluster/faultproxy/build" 2>"$e2e_tmp/fp-build.err"); then
		fail "faultproxy does not build: $(tail -n 5 "$e2e_tmp/fp-build.err")"
		finish
		exit 1
	fi
	"$bin" -listen "127.0.0.1:$fp_port" -admin "127.0.0.1:$fp_admin" \
		-upstream "https://127.0.0.1:$DRAINER_CLUSTER_API_PORT" \
		-ca "$DRAINER_CLUSTER_DIR/pki/ca.crt" -ca-key "$DRAINER_CLUSTER_DIR/pki/ca.key" \
		-log "$fp_log" >"$e2e_tmp/proxy.out" 2>&1 &
	fp_pid=$!
	track_pid "$fp_pid"
	e2e_cleanup_hooks+=("reap_pid $fp_pid TERM")
	if ! wait_until 10 curl -fsS "http://127.0.0.1:$fp_admin/healthz"; then
		fail "faultproxy did not start: $(cat "$e2e_tmp/proxy.out")"
		finish
		exit 1
	fi
	# The same kubeconfig (CA, token) with the proxy as server.
	sed "s#server: https://127.0.0.1:$DRAINER_CLUSTER_API_PORT#server: https://127.0.0.1:$fp_port#" \
		"$DRAINER_CLUSTER_DIR/kubeconfig" >"$1"
	grep -q "127.0.0.1:$fp_port" "$1" || { fail "kubeconfig for the proxy"; finish; exit 1; }
}

# serve_start TAG ARGS...: starts `drainer -vv ARGS...` (normally `serve ...`) in
# the background, its output in $e2e_tmp/TAG.log; sets serve_pid (and
# serve_pids[TAG]). A cleanup hook SIGKILLs it if the script ends first. Extra
# environment: put VAR=VALUE words in serve_env (an array) before the call;
# WATCHDOG_PID=self becomes the daemon's own pid (as systemd sets it).
declare -A serve_pids=()
serve_env=()
serve_start() {
	local tag=$1
	shift
	echo "  \$ ${serve_env[*]:+${serve_env[*]} }drainer -vv $*  &"
	# (env, then bash, exec in turn: the job's pid is drainer's)
	env "${serve_env[@]}" bash -c '[ "${WATCHDOG_PID:-}" != self ] || export WATCHDOG_PID=$$; exec "$0" "$@"' \
		"$DRAINER" -vv "$@" >"$e2e_tmp/$tag.log" 2>&1 </dev/null &
	serve_pid=$!
	serve_pids[$tag]=$serve_pid
	track_pid "$serve_pid"
	e2e_cleanup_hooks+=("reap_pid $serve_pid KILL")
}
# serve_stop TAG [SIGNAL]: SIGTERM (or SIGNAL) to the daemon of TAG; waits at most
# 15 s (then SIGKILL). Sets serve_rc (its exit status; 137 if it had to be killed).
serve_stop() {
	local pid=${serve_pids[$1]:-} sig=${2:-TERM} end
	serve_rc=
	[ -n "$pid" ] || return 0
	kill -"$sig" "$pid" 2>/dev/null
	end=$((SECONDS + 15))
	while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	serve_rc=$?
	untrack_pid "$pid"
	unset "serve_pids[$1]"
}
# serve_alive TAG: the daemon of TAG still runs.
serve_alive() { [ -n "${serve_pids[$1]:-}" ] && kill -0 "${serve_pids[$1]}" 2>/dev/null; }
# serve_log TAG [LINES] [PATTERN]: the last LINES (40) lines of the daemon's log
# (only those matching the extended regex PATTERN if given), indented, for a
# failure report.
serve_log() {
	local f=$e2e_tmp/$1.log
	[ -f "$f" ] || return 0
	echo "    --- drainer -vv log ($1), last ${2:-40} lines${3:+ matching /$3/}:"
	if [ -n "${3:-}" ]; then grep -E -- "$3" "$f"; else cat "$f"; fi | tail -n "${2:-40}" | sed 's/^/    | /'
}

# node_state NODE: its drainer.io/state ("" when none).
node_state() { node_ann "$1" drainer.io/state; }
state_is() { [ "$(node_state "$1")" = "$2" ]; }
# node_restored NODE: in service as tests/cluster/up made it: no drainer.io/
# annotation, schedulable, no drain taint, driver Running and Ready, slice published.
node_restored() {
	[ "$(node_drainer_anns "$1")" = "{}" ] && [ "$(node_unschedulable "$1")" = false ] &&
		[ "$(node_tainted "$1")" = false ] && driver_running "$1" && slice_published "$1"
}

# nodes_watch_start FILE [NODE]: watch of every Node (or of NODE): one compact JSON
# line per observed version, in the order the API server sent them (one stream, so
# one total order): {t (local receive time, s), name, rv (number), state, request,
# unsched, taint, message, boot (drainer.io/shutdown-boot-id), was, started, oos (the
# out-of-service taint), oosann (drainer.io/out-of-service), ready and readySince (the
# Ready condition's status and lastTransitionTime)} (a
# superset of node_watch_start's lines: phases_seen and check_node_invariants read
# it when it holds one node).
nodes_watch_jq='{t: now, name: .metadata.name, rv: (.metadata.resourceVersion | tonumber? // .metadata.resourceVersion),
	state: (.metadata.annotations["drainer.io/state"] // ""), request: (.metadata.annotations["drainer.io/request"] // ""),
	unsched: (.spec.unschedulable // false), taint: ([.spec.taints // [] | .[] | select(.key == "drainer.io/draining")] | length > 0),
	message: (.metadata.annotations["drainer.io/message"] // ""), boot: (.metadata.annotations["drainer.io/shutdown-boot-id"] // ""),
	was: (.metadata.annotations["drainer.io/was-unschedulable"] // null), started: (.metadata.annotations["drainer.io/started-at"] // null),
	msg: (.metadata.annotations["drainer.io/message"] // ""),
	oos: ([.spec.taints // [] | .[] | select(.key == "node.kubernetes.io/out-of-service")] | length > 0),
	oosann: (.metadata.annotations["drainer.io/out-of-service"] // null),
	ready: ([.status.conditions // [] | .[] | select(.type == "Ready")][0].status // ""),
	readySince: ([.status.conditions // [] | .[] | select(.type == "Ready")][0].lastTransitionTime // "")}'
nodes_watch_start() { # FILE [NODE]
	: >"$1"
	rm -f "$1.failed"
	"$KUBECTL" get nodes ${2:+"$2"} -w -o json --output-watch-events=false --request-timeout=900s \
		> >(jq --unbuffered -c "$nodes_watch_jq" >>"$1" 2>/dev/null) 2>/dev/null &
	nws_pid=$! nws_file=$1
	track_pid "$nws_pid"
	e2e_cleanup_hooks+=("reap_pid $nws_pid")
	wait_until 10 test -s "$1" || recorder_failed "$1" "the watch of ${2:-every Node} showed no version in 10 s"
}
nodes_watch_stop() {
	recorder_alive "${nws_pid:-}" "${nws_file:-}" "the watch"
	reap_pid "$nws_pid"
	sleep 0.2
}
# Watch of the Leases of namespace NS: {name, rv, holder, acquire, renew, transitions}.
# It may record nothing for a while (no Lease yet): it counts as started once the API
# server has seen its watch request (the audit log).
leases_watch_start() { # NS FILE
	local from
	from=$(audit_lines)
	: >"$2"
	rm -f "$2.failed"
	"$KUBECTL" -n "$1" get leases -w -o json --output-watch-events --request-timeout=900s \
		> >(jq --unbuffered -c '{type, name: .object.metadata.name, rv: (.object.metadata.resourceVersion | tonumber? // .object.metadata.resourceVersion),
			holder: (.object.spec.holderIdentity // ""), acquire: (.object.spec.acquireTime // ""),
			renew: (.object.spec.renewTime // ""), transitions: (.object.spec.leaseTransitions // 0)}' >>"$2" 2>/dev/null) 2>/dev/null &
	lw_pid=$! lw_file=$2
	track_pid "$lw_pid"
	e2e_cleanup_hooks+=("reap_pid $lw_pid")
	wait_until 10 kubectl_watch_started "$from" leases "$1" ||
		recorder_failed "$2" "the API server saw no watch of leases in $1 within 10 s"
}
leases_watch_stop() {
	recorder_alive "${lw_pid:-}" "${lw_file:-}" "the watch"
	reap_pid "$lw_pid"
	sleep 0.2
}
# kubectl_watch_started FROM_LINE RESOURCE [NAMESPACE]: the audit log shows a watch of
# RESOURCE (in NAMESPACE) by kubectl, answered, after line FROM_LINE.
kubectl_watch_started() {
	tail -n +"$(($1 + 1))" "$AUDIT" | grep '"userAgent":"kubectl' |
		jq -se --arg r "$2" --arg ns "${3:-}" 'any(.[]; .stage == "ResponseStarted" and .verb == "watch" and .objectRef.resource == $r
			and ($ns == "" or .objectRef.namespace == $ns) and .responseStatus.code == 200)' >/dev/null
}

# wait_watch FILE SECONDS JQ-FILTER: waits until a line of a watch file matches the
# jq boolean filter (polls every 20 ms).
wait_watch() {
	local end=$((SECONDS + $2))
	until jq -e -s "any(.[]; $3)" "$1" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.02
	done
}

# audit_since FROM_LINE FILE: every audit event after line FROM_LINE (both the
# ResponseStarted line of a watch and the ResponseComplete lines), one JSON array
# sorted by requestReceivedTimestamp.
audit_since() {
	audit_log_present || return 0
	tail -n +"$(($1 + 1))" "$AUDIT" | jq -c 'select(.stage == "ResponseComplete" or .stage == "ResponseStarted" or .stage == "Panic")' |
		jq -s 'sort_by(.requestReceivedTimestamp)' >"$2"
}
# drainer_request_table FILE: drainer's requests (each counted once: a watch by its
# ResponseStarted line, or its ResponseComplete line when it failed before
# starting) of an audit_since file, as "COUNT VERB URI" lines (resourceVersion and
# timeoutSeconds values replaced by N), most frequent first.
drainer_request_table() {
	jq -r '[.[] | select(.userAgent | startswith("drainer/"))] | group_by(.auditID) | map(.[0]) | .[]
		| "\(.verb) \(.requestURI | gsub("resourceVersion=[0-9]+"; "resourceVersion=N") | gsub("timeoutSeconds=[0-9]+"; "timeoutSeconds=N"))"' "$1" |
		sort | uniq -c | sort -rn
}
# now_rfc3339: the local time as the audit log writes it (UTC, microseconds).
now_rfc3339() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }
# watch_opened FROM_LINE SELECTOR: drainer has opened a watch whose URI contains
# SELECTOR (after audit line FROM_LINE), e.g. metadata.name%3Dnode-1: it serves.
watch_opened() {
	tail -n +"$(($1 + 1))" "$AUDIT" | grep '"userAgent":"drainer/' |
		jq -se --arg s "$2" 'any(.[]; .stage == "ResponseStarted" and .verb == "watch" and (.requestURI | contains($s)))' >/dev/null
}
# jq_true JQ-ARGS...: jq -e, quiet: for `check "..." jq_true FILTER FILE`.
jq_true() { jq -e "$@" >/dev/null 2>&1; }

# drainer's image for the real nodes: the archive DRAINER_E2E_IMAGE names, or one
# deploy/image/build makes now, served by the nodes' runtime as localhost/drainer:VERSION
# (the cluster's images/drainer.oci.tar points at it for this script; the link is put
# back by a cleanup hook). Sets image_manifest to the digest of VERSION's linux/amd64
# manifest in the archive (empty, and a failed check, when there is none).
serve_drainer_image() { # VERSION
	local version=$1 archive=${DRAINER_E2E_IMAGE:-} link old_link t0
	image_manifest=
	if [ -z "$archive" ]; then
		t0=$SECONDS
		if "$e2e_root/deploy/image/build" >"$e2e_tmp/image.log" 2>&1; then
			archive=$e2e_root/build/drainer-image.oci.tar
			pass "deploy/image/build ($((SECONDS - t0)) s)"
		else
			fail "deploy/image/build"
			tail -n 20 "$e2e_tmp/image.log" | sed 's/^/    /'
		fi
	fi
	archive=$(realpath "$archive" 2>/dev/null)
	link=$DRAINER_CLUSTER_DIR/images/drainer.oci.tar
	if [ -f "$archive" ] && [ "$(readlink -f "$link")" != "$archive" ]; then
		old_link=$(readlink "$link")
		ln -sfn "$archive" "$link"
		e2e_cleanup_hooks+=("ln -sfn '$old_link' '$link'")
	fi
	image_manifest=$(tar -xOf "$archive" ./index.json 2>/dev/null | jq -r --arg v "$version" \
		'.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $v) | .digest')
	# VERSION names an index (linux/amd64 and linux/arm64): the nodes' runtime runs, and
	# reports as the containers' imageID, its linux/amd64 manifest.
	if [ -n "$image_manifest" ] && tar -xOf "$archive" "./blobs/sha256/${image_manifest#sha256:}" 2>/dev/null |
		jq -e '.mediaType == "application/vnd.oci.image.index.v1+json" or (.manifests | type) == "array"' >/dev/null 2>&1; then
		image_manifest=$(tar -xOf "$archive" "./blobs/sha256/${image_manifest#sha256:}" | jq -r \
			'[.manifests[] | select(.platform.os == "linux" and .platform.architecture == "amd64") | .digest] | first // empty')
	fi
	check "the cluster's runtime serves localhost/drainer:$version from $archive (manifest ${image_manifest:-none})" test -n "$image_manifest"
}

# ---------------------------------------------------------------------------
# Helpers of the fleet tests (kwok nodes, tests/cluster DRAINER_CLUSTER_NODES=kwok).

# nodes_annotate_parallel KEY VALUE NODE...: one merge PATCH of each Node setting its
# annotation KEY to VALUE ("null": removed), all at once (curl --parallel, as the
# kubeconfig's user), not one after another at kubectl's 5 requests/s. Fails unless
# every answer is 200.
nodes_annotate_parallel() {
	local key=$1 value=$2 n server args=() codes
	shift 2
	server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
	(umask 077 && kubectl config view --raw --minify -o jsonpath='{.users[0].user.token}' |
		sed 's/^/Authorization: Bearer /' >"$e2e_tmp/auth.hdr")
	for n in "$@"; do args+=("$server/api/v1/nodes/$n" -o /dev/null); done
	codes=$(curl -sS --no-progress-meter --parallel --parallel-max 64 --cacert "$DRAINER_CLUSTER_DIR/pki/ca.crt" -H "@$e2e_tmp/auth.hdr" \
		-X PATCH -H 'Content-Type: application/merge-patch+json' -w '%{http_code}\n' \
		--data "$(jq -nc --arg k "$key" --arg v "$value" '{metadata: {annotations: {($k): (if $v == "null" then null else $v end)}}}')" \
		"${args[@]}")
	[ "$(grep -c '^200$' <<<"$codes")" = "$#" ]
}
