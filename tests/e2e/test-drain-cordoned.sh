#!/usr/bin/env bash
# A node that was cordoned before drainer touched it is still
# cordoned after `drainer uncordon` and after `drainer maintain` (also when the
# command fails, with --restore-on-failure), while a node drainer cordoned
# itself is uncordoned again. Also maintain's contract: CMD runs while the node
# is drained (checked from inside CMD against the API server); if CMD fails the
# node stays drained and maintain exits 1.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-2
other=node-3

cleanup_cordoned() {
	reset_node "$node"
	reset_node "$other"
	demo
}
e2e_cleanup_hooks+=(cleanup_cordoned)

check "$node starts clean" reset_node "$node"
check "$other starts clean" reset_node "$other"
kubectl cordon "$node" >/dev/null

# drain + uncordon
drainer_run drain drain "$node" --timeout 90s
check_rc "drain of the cordoned $node" 0 drain
check_eq "drainer.io/was-unschedulable=true recorded" true "$(node_ann "$node" drainer.io/was-unschedulable)"
check_eq "drainer.io/state=drained" drained "$(node_ann "$node" drainer.io/state)"
check "driver stopped on $node" no_driver_pod "$node"
drainer_run uncordon uncordon "$node"
check_rc "uncordon $node" 0 uncordon
check_eq "$node is still cordoned after uncordon" true "$(node_unschedulable "$node")"
check_eq "drain taint removed" false "$(node_tainted "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
check "driver back, Running and Ready" driver_running "$node"
check "slice of $node published" slice_published "$node"

# maintain -- true, with CMD looking at the node from inside.
cmd_out=$e2e_tmp/inside
drainer_run maintain maintain "$node" --timeout 90s -- sh -c "'$KUBECTL' get node $node -o json >'$cmd_out.node'; '$KUBECTL' -n dra-system get pods --field-selector spec.nodeName=$node -o json >'$cmd_out.drivers'"
check_rc "maintain $node -- (kubectl get node ...)" 0 maintain
check_eq "CMD saw the node drained (state=drained)" drained "$(jq -r '.metadata.annotations["drainer.io/state"] // ""' "$cmd_out.node" 2>/dev/null)"
check_eq "CMD saw the node cordoned" true "$(jq -r '.spec.unschedulable // false' "$cmd_out.node" 2>/dev/null)"
check_eq "CMD saw no driver pod on the node" 0 "$(jq '.items | length' "$cmd_out.drivers" 2>/dev/null)"
check_eq "$node is still cordoned after maintain" true "$(node_unschedulable "$node")"
check_eq "drain taint removed" false "$(node_tainted "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
check "driver back" driver_running "$node"

# maintain -- false: the node stays drained, exit 1.
drainer_run maintainf maintain "$node" --timeout 90s -- false
check_rc "maintain $node -- false" 1 maintainf
check_eq "the node stays drained (state=drained)" drained "$(node_ann "$node" drainer.io/state)"
check_eq "still tainted" true "$(node_tainted "$node")"
check "driver still stopped" no_driver_pod "$node"
drainer_run uncordon2 uncordon "$node"
check_rc "uncordon after the failed maintain" 0 uncordon2
check_eq "$node is still cordoned" true "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"

# maintain --restore-on-failure -- false: restored, still cordoned, exit 1.
drainer_run maintainr maintain "$node" --restore-on-failure --timeout 90s -- false
check_rc "maintain --restore-on-failure $node -- false" 1 maintainr
check_eq "$node is still cordoned" true "$(node_unschedulable "$node")"
check_eq "drain taint removed" false "$(node_tainted "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"
check "driver back" driver_running "$node"

# --force-uncordon uncordons a node someone else had cordoned.
drainer_run drain3 drain "$node" --timeout 90s
check_rc "drain $node again" 0 drain3
drainer_run uncordon3 uncordon "$node" --force-uncordon
check_rc "uncordon --force-uncordon" 0 uncordon3
check_eq "--force-uncordon made $node schedulable" false "$(node_unschedulable "$node")"
check_eq "no drainer.io annotations left" "{}" "$(node_drainer_anns "$node")"

# A node drainer cordoned itself is uncordoned by maintain.
drainer_run maintain3 maintain "$other" --timeout 90s -- true
check_rc "maintain $other -- true" 0 maintain3
check_eq "$other (schedulable before) is schedulable again" false "$(node_unschedulable "$other")"
check_eq "no drainer.io annotations left on $other" "{}" "$(node_drainer_anns "$other")"
check "driver back on $other" driver_running "$other"
finish
