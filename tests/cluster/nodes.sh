# Real nodes of tests/cluster (sourced by up, after lib.sh): node-i's folder
# $cluster_dir/nodes/node-i, its container runtime drainer-cri in a mount namespace
# of its own, and its kubelet in that namespace. See README.md, "Real nodes".
#
# Host safety (a kubelet once removed a host's /bin, see the README):
#  - drainer-cri starts under `unshare --mount --propagation private` and refuses
#    to run in its parent's or pid 1's mount namespace; it binds the node's
#    var-lib/ and var-log/ over /var/lib and /var/log (so the kubelet's hard-coded
#    /var/lib/kubelet, /var/log/pods and /var/log/containers, and the DaemonSets'
#    hostPaths under them, are the node's) and a copy of each sysctl the kubelet
#    writes over /proc/sys/... there;
#  - the kubelet joins that namespace (nsenter) with an empty working directory of
#    its own; drainer-cri always reports a real log path;
#  - nothing is created outside $cluster_dir: the bind targets exist on every host,
#    and all mounts live in the nodes' namespaces, gone with their processes.

node_dir() { echo "$cluster_dir/nodes/node-$1"; }

# host_mounts_under DIR: this namespace has a mount at or below DIR.
host_mounts_under() {
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo
}

write_kubelet_config() { # i
	local nd ip
	nd=$(node_dir "$1")
	ip=$DRAINER_CLUSTER_IP_PREFIX.0.$1
	cat >"$nd/kubelet-config.yaml" <<EOF
# node-$1's kubelet, written by tests/cluster/up.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$nd/cri.sock
imageServiceEndpoint: unix://$nd/cri.sock
# No cgroups are touched: cgroup v1 allowed, no QoS or allocatable cgroups.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
# No iptables rules on the host.
makeIPTablesUtilChains: false
# Sets the sysctls it wants: the node's own copies (bound over /proc/sys in its namespace).
protectKernelDefaults: false
address: $ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: $kubelet_healthz_port
tlsCertFile: $pki/kubelet-node-$1.crt
tlsPrivateKeyFile: $pki/kubelet-node-$1.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
staticPodPath: $nd/manifests
fileCheckFrequency: 5s
resolvConf: ""
# Never evict for the host's state: three kubelets share one machine.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%", imagefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 10s
# A pod whose sync failed without an error the pod worker backs off on (a claim the DRA
# driver cannot prepare yet: "driver ... is not registered" while the driver pod restarts)
# is synced again only at this interval (1m by default, +-50%): the tests restart drivers
# under bound claim holders often, and would wait up to 90 s each time.
syncFrequency: 10s
nodeStatusReportFrequency: 1m
EOF
	# With Cluster API (capi.sh) each Node has the provider ID its infrastructure object
	# names, with Karpenter (karpenter.sh) the one its NodeClaim is bound to: the kubelet
	# sets it when it registers the Node (also after the peer deleted it);
	# spec.providerID cannot change once set.
	case " $DRAINER_CLUSTER_PEERS " in
	*" capi "* | *" karpenter "*) echo "providerID: drainer-test://node-$1" >>"$nd/kubelet-config.yaml" ;;
	esac
	# up's kubelet_gates: 1.33 with DRA on (the kubelet's DRA manager is behind its gate),
	# NodeLifecycleConditions from 1.37. "A=true,B=true" -> "{A: true, B: true}".
	if [ -n "${kubelet_gates:-}" ]; then
		local g=${kubelet_gates//=/: }
		echo "featureGates: {${g//,/, }}" >>"$nd/kubelet-config.yaml"
	fi
}

# start_real_nodes: each node's runtime, then (once its socket is there) its kubelet.
start_real_nodes() {
	local i nd ip f binds name cri_pid
	mkdir -p "$cluster_dir/images"
	ln -sfn "$(readlink -f "$bin/drainer-dra-plugin")" "$cluster_dir/images/dra-plugin"
	# The image deploy/image/build makes, as the image deploy/ names (localhost/drainer:VERSION):
	# this symlink is read at each pull, so a test can point it at another archive.
	ln -sfn "${DRAINER_IMAGE_ARCHIVE:-$(cd "$cluster_here/../.." && pwd)/build/drainer-image.oci.tar}" "$cluster_dir/images/drainer.oci.tar"
	# (unpacked by the runtimes at their first pull, once per digest: afresh after each up)
	rm -rf --one-file-system "$cluster_dir/images/oci"
	for i in $(seq 1 "$node_count"); do
		nd=$(node_dir "$i")
		if host_mounts_under "$nd"; then
			fail "cri-node-$i" "$nd has mounts in this (the host's) mount namespace: refusing to touch it"
		fi
		rm -rf --one-file-system "$nd"
		mkdir -p "$nd/var-lib" "$nd/var-log" "$nd/sysctl" "$nd/kubelet-cwd" "$nd/manifests"
		write_kubelet_config "$i"
		start_runtime "$i"
	done
	for i in $(seq 1 "$node_count"); do
		nd=$(node_dir "$i")
		wait_for "cri-node-$i" "its socket $nd/cri.sock" test -S "$nd/cri.sock"
		start_kubelet "$i"
	done
	for i in $(seq 1 "$node_count"); do
		wait_for "kubelet-node-$i" "it to run in node-$i's mount namespace" in_node_namespace "$i"
	done
}

# start_runtime i: node-i's runtime (drainer-cri) in a mount namespace of its own, with
# the node's /var/lib, /var/log and the kubelet's sysctls bound into it (the node's
# folder must exist; also tests/cluster/kubelet's power-on, after a power-off). Needs
# $bin and $pki.
start_runtime() {
	local nd f name binds
	nd=$(node_dir "$1")
	binds=(--bind "$nd/var-lib=/var/lib" --bind "$nd/var-log=/var/log")
	for f in "${kubelet_sysctls[@]}"; do
		name=${f//\//.}
		cat "/proc/sys/$f" >"$nd/sysctl/$name"
		binds+=(--bind "$nd/sysctl/$name=/proc/sys/$f")
	done
	# shellcheck disable=SC2086
	start_as "cri-node-$1" "$(command -v unshare)" --mount --propagation private -- "$bin/drainer-cri" \
		--listen "$nd/cri.sock" --node-name "node-$1" --node-dir "$nd" \
		--ip-prefix "$DRAINER_CLUSTER_IP_PREFIX.$1" \
		--pinned-ip "$DRAINER_CLUSTER_IP_PREFIX.$1.1" --pinned-pods dra-system/app.kubernetes.io/component=kubeletplugin \
		--image "drainer.test/drainer:dev=$cluster_dir/guard-drainer" \
		--image "drainer.test/dra-plugin:dev=$cluster_dir/images/dra-plugin" \
		--image "drainer.test/sleep:dev=$(command -v sleep)" \
		--oci-archive "localhost/drainer=$cluster_dir/images/drainer.oci.tar" --oci-dir "$cluster_dir/images/oci" \
		--sanitizer-env "$cluster_dir/sanitizer.env" \
		"${binds[@]}" --api-port "$DRAINER_CLUSTER_API_PORT" \
		--kubelet-url "https://$DRAINER_CLUSTER_IP_PREFIX.0.$1:$kubelet_port" \
		--kubelet-client-cert "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key" \
		--ca "$pki/ca.crt" ${DRAINER_CRI_ARGS:-}
}

# start_kubelet i: node-i's kubelet, in its runtime's mount namespace (nsenter) with
# the node's empty working directory (also tests/cluster/kubelet's restart). Needs
# $bin and $pki.
start_kubelet() {
	local nd cri_pid
	nd=$(node_dir "$1")
	cri_pid=$(component_pid "cri-node-$1") || return 1
	# shellcheck disable=SC2086
	start_as "kubelet-node-$1" "$(command -v nsenter)" --target "$cri_pid" --mount --wdns="$nd/kubelet-cwd" -- \
		"$bin/kubelet" --config "$nd/kubelet-config.yaml" --kubeconfig "$pki/node-$1.kubeconfig" \
		--hostname-override "node-$1" --node-labels "$DRAINER_NODE_LABELS" --cloud-provider external \
		--v "$DRAINER_KUBELET_V" ${DRAINER_KUBELET_ARGS:-}
}

# in_node_namespace i: the kubelet runs in its runtime's mount namespace, not the host's.
in_node_namespace() {
	local k c
	k=$(readlink "/proc/$(component_pid "kubelet-node-$1")/ns/mnt") || return 1
	c=$(readlink "/proc/$(component_pid "cri-node-$1")/ns/mnt") || return 1
	[ "$k" = "$c" ] && [ "$k" != "$(readlink /proc/self/ns/mnt)" ]
}

# init_real_nodes does for each registered Node what a cloud provider's node
# controller does: the kubelet runs with --cloud-provider=external because it
# refuses a loopback --node-ip, so it registers with the taint
# node.cloudprovider.kubernetes.io/uninitialized and only a Hostname address, and
# keeps addresses someone else set. Here that is InternalIP P.0.i; then the taint
# goes. Fails (to be retried) until every node is registered and initialized.
init_real_nodes() {
	local i node ip out addrs taints
	for i in $(seq 1 "$node_count"); do
		node=node-$i
		ip=$DRAINER_CLUSTER_IP_PREFIX.0.$i
		out=$(kubectl get node "$node" -o go-template='{{range .status.addresses}}{{.type}}={{.address}} {{end}}|{{range .spec.taints}}{{.key}} {{end}}' 2>/dev/null) || return 1
		addrs=" ${out%%|*}" taints=" ${out#*|}"
		case $addrs in
		*" InternalIP=$ip "*) ;;
		*)
			kubectl patch node "$node" --subresource=status --type=merge -p \
				"{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"$ip\"},{\"type\":\"Hostname\",\"address\":\"$node\"}]}}" >/dev/null || return 1
			;;
		esac
		case $taints in
		*" node.cloudprovider.kubernetes.io/uninitialized "*)
			kubectl taint node "$node" node.cloudprovider.kubernetes.io/uninitialized- >/dev/null || return 1
			;;
		esac
	done
}
