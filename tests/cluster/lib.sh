# Shared settings and helpers of tests/cluster/{up,down,demo,env.sh}. Sourced, not run.
# Every setting can be overridden from the environment; see README.md.

cluster_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

: "${DRAINER_CLUSTER_DIR:=/tmp/drainer-cluster}"
: "${DRAINER_CLUSTER_API_PORT:=16443}"
: "${DRAINER_CLUSTER_ETCD_PORT:=12379}"
: "${DRAINER_CLUSTER_ETCD_PEER_PORT:=12380}"
: "${DRAINER_CLUSTER_CM_PORT:=16257}"
: "${DRAINER_CLUSTER_SCHEDULER_PORT:=16259}"
: "${DRAINER_CLUSTER_IP_PREFIX:=127.1}"
: "${DRAINER_CLUSTER_TIMEOUT:=120}"
: "${DRAINER_SIM_NODES:=3}"
: "${DRAINER_SIM_TERMINATE_DELAY:=2s}"
: "${DRAINER_SIM_SLICE_WIPE_DELAY:=30s}"
: "${DRAINER_SIM_HEALTH_PORT:=51515}"
# real: node-1 .. node-N are real kubelets (N = DRAINER_REAL_NODES), each with its
# container runtime drainer-cri; sim: the nodes are drainer-sim's (DRAINER_SIM_NODES);
# kwok: N Node objects (N = DRAINER_CLUSTER_NODE_COUNT) that one kwok process keeps
# Ready and whose pods it runs as fake pods (stages), for fleets.
: "${DRAINER_CLUSTER_NODES:=real}"
: "${DRAINER_CLUSTER_NODE_COUNT:=1000}"
# kwok: how long a deleted pod stays (its pod-delete stage's delay; the pod's annotation
# pod-delete.stage.kwok.x-k8s.io/delay overrides it).
: "${DRAINER_CLUSTER_KWOK_POD_DELETE_DELAY:=2s}"
: "${DRAINER_REAL_NODES:=3}"
: "${DRAINER_KUBELET_V:=2}"
: "${DRAINER_NODE_LABELS:=gpu.example.com/present=true}"
# The real nodes (numbers, "1 2") that run the second test driver nic.example.com.
: "${DRAINER_CLUSTER_NIC_NODES:=}"
# Peers started after the control plane and the nodes: "capi" (Cluster API's core
# manager, capi.sh), "karpenter" (Karpenter's controllers, karpenter.sh); real nodes
# only. Empty: none.
: "${DRAINER_CLUSTER_PEERS:=}"
# Cluster API's manager: its webhook server's port (on every address: the manager has no
# flag for the host) and its health probe's (127.0.0.1).
: "${DRAINER_CLUSTER_CAPI_WEBHOOK_PORT:=$((DRAINER_CLUSTER_API_PORT + 10))}"
: "${DRAINER_CLUSTER_CAPI_HEALTH_PORT:=$((DRAINER_CLUSTER_API_PORT + 11))}"
# Karpenter's controller: its metrics and health probe ports (both on every address:
# Karpenter's options have no host).
: "${DRAINER_CLUSTER_KARPENTER_METRICS_PORT:=$((DRAINER_CLUSTER_API_PORT + 12))}"
: "${DRAINER_CLUSTER_KARPENTER_HEALTH_PORT:=$((DRAINER_CLUSTER_API_PORT + 13))}"
# The Kubernetes release (control plane, kubelets, and our Go built against its
# k8s.io modules): go.mod's (the default) or one of versions/go-VERSION.mod.
cluster_default_kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$cluster_here/go.mod")
: "${DRAINER_CLUSTER_KUBE_VERSION:=${cluster_default_kube_version#v}}"
DRAINER_CLUSTER_KUBE_VERSION=${DRAINER_CLUSTER_KUBE_VERSION#v}
export DRAINER_CLUSTER_KUBE_VERSION
case $DRAINER_CLUSTER_KUBE_VERSION in
1.[1-9][0-9].[0-9]*) kube_minor=${DRAINER_CLUSTER_KUBE_VERSION#1.} kube_minor=${kube_minor%%.*} ;;
*)
	echo "DRAINER_CLUSTER_KUBE_VERSION=$DRAINER_CLUSTER_KUBE_VERSION: want 1.MINOR.PATCH (e.g. 1.37.2)" >&2
	exit 2
	;;
esac
# The DRA API (resource.k8s.io) the API server serves: v1 (the default from 1.34 on,
# where it is GA), v1beta2 or v1beta1 (that version only), off (none: no DRA at all).
if [ "$kube_minor" -ge 34 ]; then
	: "${DRAINER_CLUSTER_DRA_API:=v1}"
else
	: "${DRAINER_CLUSTER_DRA_API:=v1beta2}"
fi
case $DRAINER_CLUSTER_DRA_API in
v1 | v1beta2 | v1beta1 | off) ;;
*)
	echo "DRAINER_CLUSTER_DRA_API=$DRAINER_CLUSTER_DRA_API: want v1, v1beta2, v1beta1 or off" >&2
	exit 2
	;;
esac
# DeviceTaintRule (KEP-5055): 1.36 serves it as resource.k8s.io/v1beta2 only with the
# DRADeviceTaintRules gate (beta, off by default: pkg/features/kube_features.go) and
# --runtime-config resource.k8s.io/v1beta2/devicetaintrules=true; 1.37 serves v1 and
# has the gate on. 1 turns both on (gate on every component that reads rules), 0 leaves
# the release's defaults.
: "${DRAINER_CLUSTER_DEVICE_TAINTS:=0}"
case $DRAINER_CLUSTER_DEVICE_TAINTS in
0 | 1) ;;
*)
	echo "DRAINER_CLUSTER_DEVICE_TAINTS=$DRAINER_CLUSTER_DEVICE_TAINTS: want 0 or 1" >&2
	exit 2
	;;
esac
# Feature profile: "" (the release's defaults) or "next": the alpha and beta APIs of
# 1.37 that are off by default and change what "a claim on the node" is (up: "the
# feature profile").
: "${DRAINER_CLUSTER_FEATURES:=}"
case $DRAINER_CLUSTER_FEATURES in
'' | next) ;;
*)
	echo "DRAINER_CLUSTER_FEATURES=$DRAINER_CLUSTER_FEATURES: want next or nothing" >&2
	exit 2
	;;
esac
# Each real kubelet listens on its node's own IP (P.0.i), so all use the same ports.
kubelet_port=10250
kubelet_healthz_port=10248
# The sysctls the kubelet sets (pkg/kubelet/cm/container_manager_linux.go,
# setupKernelTunables): each real node binds its own copies over them.
kubelet_sysctls=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

cluster_dir=$DRAINER_CLUSTER_DIR
# kubectl's discovery cache in the cluster's folder, emptied by every up: a cluster
# restarted on the same port with another release or DRA API serves other versions,
# and kubectl would ask for the old ones from a cache of $HOME for hours.
export KUBECACHEDIR=$cluster_dir/kube-cache
pid_dir=$cluster_dir/pids
case $DRAINER_CLUSTER_NODES in
real)
	node_count=$DRAINER_REAL_NODES
	case $node_count in
	[1-9] | [1-9][0-9]) ;;
	*)
		echo "DRAINER_REAL_NODES=$node_count: want 1..99" >&2
		exit 2
		;;
	esac
	;;
sim) node_count=$DRAINER_SIM_NODES ;;
kwok)
	node_count=$DRAINER_CLUSTER_NODE_COUNT
	# (node-i's InternalIP is P.(i/250).(i%250+1), below P.128.0.0/17, the pods' range)
	if ! [[ $node_count =~ ^[1-9][0-9]{0,4}$ ]] || [ "$node_count" -gt 20000 ]; then
		echo "DRAINER_CLUSTER_NODE_COUNT=$node_count: want 1..20000" >&2
		exit 2
	fi
	if ! [[ $DRAINER_CLUSTER_KWOK_POD_DELETE_DELAY =~ ^[0-9]+(ms|s|m)$ ]]; then
		echo "DRAINER_CLUSTER_KWOK_POD_DELETE_DELAY=$DRAINER_CLUSTER_KWOK_POD_DELETE_DELAY: want a duration such as 2s, 500ms or 1m" >&2
		exit 2
	fi
	;;
*)
	echo "DRAINER_CLUSTER_NODES=$DRAINER_CLUSTER_NODES: want real, sim or kwok" >&2
	exit 2
	;;
esac
# Start order. down stops whatever has a pid file: nodes first, then clients,
# then the API server, then etcd (kwok among the clients).
components=(etcd kube-apiserver kube-controller-manager kube-scheduler)
if [ "$DRAINER_CLUSTER_NODES" = sim ]; then
	components+=(drainer-sim)
elif [ "$DRAINER_CLUSTER_NODES" = kwok ]; then
	components+=(kwok)
else
	for i in $(seq 1 "$node_count"); do
		components+=("cri-node-$i" "kubelet-node-$i")
	done
fi
case " $DRAINER_CLUSTER_PEERS " in
*" capi "*) components+=(capi-manager) ;;
esac
case " $DRAINER_CLUSTER_PEERS " in
*" karpenter "*) components+=(karpenter) ;;
esac

# starttime PID: field 22 of /proc/PID/stat (clock ticks since boot), so that a
# recycled pid is never mistaken for one of ours. Fails for a zombie.
starttime() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	[ "$1" != Z ] || return 1
	echo "${20}"
}

# component_pid NAME: prints the pid if NAME was started by up and is still alive.
component_pid() {
	local f=$pid_dir/$1.pid pid st
	[ -f "$f" ] || return 1
	read -r pid st <"$f" || return 1
	[ -n "$pid" ] && [ "$(starttime "$pid" 2>/dev/null)" = "$st" ] || return 1
	echo "$pid"
}

# start_as NAME COMMAND ARGS...: starts a component in a session of its own, output
# appended to NAME.log (up removes the logs before a fresh start), its pid and start
# time in pids/NAME.pid; the command's pid is the component's.
started=()
start_as() {
	local name=$1
	shift
	setsid "$@" >>"$cluster_dir/$name.log" 2>&1 </dev/null &
	local pid=$!
	echo "$pid $(starttime "$pid")" >"$pid_dir/$name.pid"
	started+=("$name")
}

# tail_log NAME: the last lines of a component's log, indented.
tail_log() {
	local log=$cluster_dir/$1.log
	if [ -s "$log" ]; then
		echo "---- last lines of $log ----" >&2
		tail -n "${2:-25}" "$log" | sed 's/^/    /' >&2
		echo "----" >&2
	else
		echo "(no log at $log)" >&2
	fi
}

admin_token() { sed -n 's/^\([^,]*\),admin,.*/\1/p' "$cluster_dir/pki/tokens.csv"; }

# api_get PATH: GET on the API server as admin; body on stdout.
api_get() {
	curl -sS --max-time 5 --cacert "$cluster_dir/pki/ca.crt" \
		-H "Authorization: Bearer $(admin_token)" "https://127.0.0.1:$DRAINER_CLUSTER_API_PORT$1"
}
