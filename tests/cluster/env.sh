#!/usr/bin/env bash
# Points a shell at the test cluster (KUBECONFIG, PATH with its kubectl, and the
# cluster's DRAINER_* settings). Either source it:
#     . tests/cluster/env.sh
# or evaluate what it prints:
#     eval "$(tests/cluster/env.sh)"
# Honors $DRAINER_CLUSTER_DIR (default /tmp/drainer-cluster).
_drainer_cluster_env() {
	local dir=${DRAINER_CLUSTER_DIR:-/tmp/drainer-cluster} line
	echo "export KUBECONFIG=$dir/kubeconfig KUBECACHEDIR=$dir/kube-cache"
	case ":$PATH:" in
	*":$dir/bin:"*) ;;
	*) echo "export PATH=$dir/bin:\$PATH" ;;
	esac
	if [ -f "$dir/cluster.env" ]; then
		while IFS= read -r line; do
			[ -n "$line" ] && echo "export $line"
		done <"$dir/cluster.env"
	fi
}
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
	eval "$(_drainer_cluster_env)"
	unset -f _drainer_cluster_env
else
	_drainer_cluster_env
fi
