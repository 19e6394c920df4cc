#!/usr/bin/env bash
# drainer.service and drainer-maintain@.service under a REAL systemd (PID 1 of a podman
# container booted from a Debian rootfs), the Debian package installed with dpkg -i,
# against the test cluster; node-2 is "this host" (NODE_NAME in /etc/default/drainer, a
# node-bound token of deploy/'s ServiceAccount in /etc/drainer/kubeconfig). Judged from
# systemd (systemctl show, its debug journal, systemd-inhibit, /proc of the main PID) and
# from the API server (the Node, its Events, the audit log), never from drainer's log:
#  1. readiness (Type=notify): while the proxy in front of the API server stalls the
#     first list of node-2, the unit stays activating/start with its process running;
#     active/running only after systemd got READY=1 (its debug journal: the
#     notification precedes "Started");
#  2. watchdog: WatchdogUSec is 30 s as shipped; with a drop-in of 3 s the service runs
#     past 2x that without a restart (WATCHDOG=1 notifications in the journal); a
#     SIGSTOPped main process is killed by systemd for the watchdog ("Failed with result
#     'watchdog'") and restarted (NRestarts 1, a new MainPID, active again);
#  3. an unknown key in /etc/drainer/drainer.yaml: exit status 2, failed, and NOT
#     restarted (RestartPreventExitStatus=2): NRestarts does not grow;
#  6. the sandbox: systemd-analyze security's exposure, /proc/MAINPID/status (NoNewPrivs
#     1, no capabilities, seccomp filter, user drainer), a write to /usr or /etc in the
#     service's mount namespace refused (read-only file system);
#  5. drainer-maintain@node-2.service: runs once, the Node is cordoned then uncordoned
#     (a watch at the API server), its command ran, Events, Result=success;
#  4. --on-shutdown: systemd-inhibit --list shows drainer's delay lock; `systemctl
#     reboot` is held by logind (PreparingForShutdown, the system still running) until
#     node-2 is drained at the API server; the container ends after that.
# The rootfs (mmdebstrap minbase + systemd, dbus, logind, polkitd and the package's
# Depends) is cached as ~/.cache/drainer-systemd/<hash>.tar; podman keeps all its state
# under build/systemd-real/podman (deploy/image/lib.sh's podman_setup); the container
# is removed at the end. The .deb: $DRAINER_DEB, else build/drainer_*.deb when its
# version is this tree's (tests/install/test-deb.sh leaves it there), else
# deploy/packaging/deb/build makes it.
# Without podman, runc, mmdebstrap or the cluster: one "cannot run: ..." line, failed.
# (lib.sh needs the cluster's settings: without them, say so in lib.sh's format)
if [ ! -f "${DRAINER_CLUSTER_DIR:-/tmp/drainer-cluster}/cluster.env" ]; then
	echo "  FAIL: cannot run: no test cluster at ${DRAINER_CLUSTER_DIR:-/tmp/drainer-cluster} (tests/cluster/up)"
	echo "0 passed, 1 failed"
	exit 1
fi
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$e2e_root" || exit 1
. deploy/image/lib.sh
node=node-2

cannot_run() { fail "cannot run: $*"; finish; exit 1; }
for t in podman runc mmdebstrap dpkg-deb jq; do
	command -v "$t" >/dev/null || cannot_run "$t is not installed (Debian packages podman runc mmdebstrap dpkg-dev jq)"
done
[ "$(id -u)" = 0 ] || cannot_run "needs root (podman with runc and cgroupfs, as deploy/image/build)"
kubectl get node "$node" >/dev/null 2>&1 || cannot_run "no test cluster with $node at $DRAINER_CLUSTER_DIR (tests/cluster/up)"
t_start=$SECONDS

# --- the package -----------------------------------------------------------------------
# (reused when its changelog names this tree's revision, as deploy/packaging/version-info
# prints it: a dirty tree never matches a clean build)
want_rev=$(deploy/packaging/version-info "$e2e_root" 2>/dev/null | awk -F'"' '$3 ~ /, 0$/ { print $2 }')
deb_rev() { dpkg-deb --fsys-tarfile "$1" | tar -xO ./usr/share/doc/drainer/changelog.gz 2>/dev/null | zcat | sed -n 's/.*built from revision \([^ ]*\)\.$/\1/p' | head -n 1; }
deb=${DRAINER_DEB:-}
if [ -z "$deb" ]; then
	for f in build/drainer_*.deb; do
		[ -f "$f" ] && [ -n "$want_rev" ] && [ "$(deb_rev "$f")" = "$want_rev" ] && deb=$f
	done
fi
if [ -z "$deb" ]; then
	out=$(deploy/packaging/deb/build 2>&1) || cannot_run "deploy/packaging/deb/build failed: $(tail -n 5 <<<"$out")"
	deb=$(sed -n '1s/:.*//p' <<<"$out")
	echo "  (built $deb)"
else
	echo "  (reusing $deb)"
fi
[ -f "$deb" ] || cannot_run "no .deb ($deb)"

# --- the rootfs, cached ----------------------------------------------------------------
depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/[[:space:]]//g' | grep . | sort -u | paste -sd, -)
pkgs="systemd,systemd-sysv,dbus,libpam-systemd,polkitd,$depends"
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mm_args=(--quiet --variant=minbase --include="$pkgs" --aptopt='Apt::Install-Recommends "false"')
key=$(printf 'systemd-real 1 %s %s\n' "$suite" "${mm_args[*]}" | sha256sum | cut -c1-16)
cache=${DRAINER_SYSTEMD_CACHE:-${HOME:-/root}/.cache/drainer-systemd}
tarball=$cache/$key.tar
if [ ! -f "$tarball" ]; then
	mkdir -p "$cache"
	t0=$SECONDS
	mmdebstrap "${mm_args[@]}" "$suite" "$tarball.tmp.tar" "$(image_sources)" >"$e2e_tmp/mmdebstrap.log" 2>&1 ||
		{ rm -f "$tarball.tmp.tar"; cannot_run "mmdebstrap failed: $(tail -n 5 "$e2e_tmp/mmdebstrap.log" | tr '\n' ' ')"; }
	mv "$tarball.tmp.tar" "$tarball"
	echo "  (rootfs made in $((SECONDS - t0)) s: $tarball)"
fi

# --- podman: the image and the container ------------------------------------------------
podman_setup "$e2e_root/build/systemd-real/podman"
# runc's own state (default /run/runc, a tmpfs of each podman_ call) under PODMAN_DIR too:
# the container outlives one podman call.
mkdir -p "$PODMAN_DIR/runc"
pm() { podman_ --runtime-flag "root=$PODMAN_DIR/runc" "$@"; }
image=localhost/drainer-systemd-real:$key
ctr=drainer-systemd-real-$$
e2e_cleanup_hooks+=("pm rm -f -t 0 $ctr >/dev/null 2>&1; podman_cleanup")
if ! pm image exists "$image"; then
	pm import --change CMD=/sbin/init "$tarball" "$image" >"$e2e_tmp/import.log" 2>&1 ||
		cannot_run "podman import: $(tail -n 3 "$e2e_tmp/import.log")"
fi
nofile=$(ulimit -Hn)
# podman's default capabilities (no CAP_SYS_ADMIN): systemd sets up drainer.service's
# mount namespace inside its own user namespace (PrivateUsers=yes); a unit without
# PrivateUsers= (drainer-maintain@) gets none ("assuming containerized execution and
# ignoring" in the journal). With --cap-add SYS_ADMIN, systemd 252 fails PrivateUsers=
# here ("Failed to set up user namespacing: No such file or directory") and
# drainer.service cannot start: a container artifact, not what a host does.
pm run -d --name "$ctr" --systemd=always --network=host --hostname "$node" \
	--ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 "$image" /sbin/init >"$e2e_tmp/run.log" 2>&1 ||
	cannot_run "podman run: $(tail -n 3 "$e2e_tmp/run.log")"
in_ctr() { pm exec "$ctr" "$@"; }
show() { in_ctr systemctl show -P "$2" "$1" 2>/dev/null; } # UNIT PROPERTY
state_of() { in_ctr systemctl show -p ActiveState,SubState "$1" 2>/dev/null | cut -d= -f2 | paste -sd/; }
bus_up() { in_ctr test -S /run/dbus/system_bus_socket; }
wait_until 30 bus_up
sys_state=$(in_ctr systemctl is-system-running --wait 2>&1)
check_eq "systemd booted in the container: is-system-running" running "$sys_state"
[ "$sys_state" = running ] || in_ctr systemctl --failed --no-legend | sed 's/^/    /'
in_ctr busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager ListSessions >/dev/null 2>&1
check_eq "dbus and systemd-logind active" "active active" "$(in_ctr systemctl is-active dbus systemd-logind | paste -sd' ')"

# --- install the package, configure node-2 -----------------------------------------------
pm cp "$deb" "$ctr:/tmp/drainer.deb"
in_ctr dpkg -i /tmp/drainer.deb >"$e2e_tmp/dpkg.log" 2>&1
check_eq "dpkg -i drainer.deb in the container (exit; $(tail -n 1 "$e2e_tmp/dpkg.log"))" 0 $?
# (WatchdogUSec shows the effective value: infinity until the service runs)
check_eq "as shipped: drainer.service loaded and skipped (no kubeconfig yet), WatchdogSec=30s" "loaded inactive/dead WatchdogSec=30s" \
	"$(show drainer.service LoadState) $(state_of drainer.service) $(in_ctr systemctl cat drainer.service | grep '^WatchdogSec=')"

# deploy/ without its DaemonSet: the namespace, ServiceAccount drainer, RBAC, node policy.
kubectl kustomize deploy/ | "$KUBECTL" create --dry-run=client -o json -f - |
	jq -c 'if .kind == "List" then .items[] else . end | select(.kind != "DaemonSet")' >"$e2e_tmp/deploy.json"
kubectl apply -f "$e2e_tmp/deploy.json" >"$e2e_tmp/apply.log" 2>&1 || cannot_run "kubectl apply of deploy/: $(tail -n 3 "$e2e_tmp/apply.log")"
e2e_cleanup_hooks+=("kubectl delete -f '$e2e_tmp/deploy.json' --ignore-not-found --wait=false >/dev/null 2>&1")
e2e_cleanup_hooks+=("reset_node $node")
reset_node "$node"
token=$(kubectl -n drainer-system create token drainer --bound-object-kind Node --bound-object-name "$node" --duration 1h)

# The proxy in front of the API server (readiness: it stalls the first list of node-2).
fp_start "$e2e_tmp/fp-admin.kubeconfig"
mkkc "$token" "$e2e_tmp/kubeconfig"
sed -i "s#server: https://.*#server: https://127.0.0.1:$fp_port#" "$e2e_tmp/kubeconfig"

pm exec -i "$ctr" sh -c "cat >>/etc/default/drainer" <<EOF
NODE_NAME=$node
DRAINER_ARGS=--on-shutdown
EOF
# (network=host: no metrics listener on the host's 127.0.0.1:9464)
in_ctr sh -c 'echo "metrics-addr: \"\"" >>/etc/drainer/drainer.yaml'
in_ctr sh -c 'mkdir -p /etc/systemd/logind.conf.d && cp /usr/share/doc/drainer/examples/logind-drainer.conf /etc/systemd/logind.conf.d/50-drainer.conf && systemctl restart systemd-logind'
in_ctr sh -c 'mkdir -p /etc/systemd/system/drainer.service.d && printf "[Service]\nWatchdogSec=3s\nRestartSec=1s\n" >/etc/systemd/system/drainer.service.d/test.conf && systemctl daemon-reload'
in_ctr systemd-analyze log-level debug

# --- 1. readiness -----------------------------------------------------------------------
echo "1. readiness (Type=notify)"
unit_is() { [ "$(state_of "$1")" = "$2" ]; } # UNIT ACTIVE/SUB
main_pid() { show drainer.service MainPID; }
journal() { in_ctr journalctl --no-pager -o short-monotonic "$@" 2>/dev/null; }
fp_rules '[{"method":"GET","path":"^/api/v1/nodes","watch":false,"first":1,"action":"stall","delay":"10s"}]'
n0=$(audit_lines)
j0=$(in_ctr journalctl --show-cursor -n 0 -q | sed -n 's/^-- cursor: //p')
# The documented way: the kubeconfig appears, drainer.path starts drainer.service.
pm cp "$e2e_tmp/kubeconfig" "$ctr:/etc/drainer/kubeconfig"
in_ctr chmod 600 /etc/drainer/kubeconfig
check "drainer.path started drainer.service: activating/start" wait_until 5 unit_is drainer.service activating/start
check "after the proxy let the list through: active/running (<= 30 s)" wait_until 30 unit_is drainer.service active/running
pid=$(main_pid)
journal --after-cursor "$j0" -u drainer.service -u init.scope >"$e2e_tmp/j-ready.log"
# When: systemd's journal (wall clock) against the proxy's log of the stalled list.
in_ctr journalctl --no-pager -o short-unix --after-cursor "$j0" -u drainer.service -u init.scope >"$e2e_tmp/j-ready-unix.log" 2>/dev/null
ju() { awk -v p="$1" 'index($0, p) { sub(/ .*/, ""); print; exit }' "$e2e_tmp/j-ready-unix.log"; }
t_starting=$(ju 'Starting drainer.service') t_readyn=$(ju 'READY=1') t_started=$(ju 'Started drainer.service')
t_release=$(jq -rs 'def secs: capture("^(?<s>[^.]+)\\.(?<f>[0-9]+)Z$") as $c | ($c.s + "Z" | fromdateiso8601) + ("0." + $c.f | tonumber);
	[.[] | select(.fault == "stall") | (.t | secs) + .secs] | first // empty' "$fp_log")
echo "    Starting drainer.service at 0; the proxy answered the stalled list at +$(awk -v a="$t_release" -v b="$t_starting" 'BEGIN{printf "%.2f", a-b}') s; READY=1 +$(awk -v a="$t_readyn" -v b="$t_starting" 'BEGIN{printf "%.2f", a-b}') s; Started +$(awk -v a="$t_started" -v b="$t_starting" 'BEGIN{printf "%.2f", a-b}') s"
check "activating for the whole stall: Starting < the stalled list answered (>= 9 s later) <= READY=1 <= Started" \
	awk -v a="${t_starting:-9e18}" -v r="${t_release:-0}" -v n="${t_readyn:-0}" -v s="${t_started:-0}" 'BEGIN { exit !(r - a >= 9 && r <= n + 0.01 && n <= s) }'
ln_ready=$(grep -n "Got notification message from PID $pid.*READY=1" "$e2e_tmp/j-ready.log" | head -n 1 | cut -d: -f1)
ln_started=$(grep -n 'Started drainer.service' "$e2e_tmp/j-ready.log" | head -n 1 | cut -d: -f1)
check "systemd's journal: READY=1 from PID $pid (line ${ln_ready:-none}) before \"Started drainer.service\" (line ${ln_started:-none})" \
	test "${ln_ready:-999999}" -lt "${ln_started:-0}"
check_eq "the same process: MainPID" "$pid" "$(main_pid)"
seen=$(tail -n +"$((n0 + 1))" "$AUDIT" | jq -r 'select(.stage == "ResponseComplete" and (.userAgent | startswith("drainer/")) and .objectRef.resource == "nodes") | "\(.user.username) \(.verb) \(.objectRef.name // "") \(.responseStatus.code)"' | sort -u | paste -sd';')
check "the API server saw the unit's drainer read $node with the node-bound token: $seen" \
	grep -q "system:serviceaccount:drainer-system:drainer [a-z]* $node 200" <<<"$seen"

# --- 2. watchdog ------------------------------------------------------------------------
echo "2. watchdog"
check_eq "WatchdogUSec with the test's drop-in" 3s "$(show drainer.service WatchdogUSec)"
j1=$(in_ctr journalctl --show-cursor -n 0 -q | sed -n 's/^-- cursor: //p')
sleep 7
check_eq "7 s later (> 2 x 3 s): active/running, NRestarts 0, same MainPID" "active/running 0 $pid" \
	"$(state_of drainer.service) $(show drainer.service NRestarts) $(main_pid)"
pings=$(journal --after-cursor "$j1" -u init.scope -u drainer.service | grep -c "Got notification message from PID $pid.*WATCHDOG=1")
check "systemd got WATCHDOG=1 from PID $pid in those 7 s: $pings times (>= 3)" test "$pings" -ge 3
in_ctr systemctl kill --kill-whom=main --signal=SIGSTOP drainer.service
prop_is() { [ "$(show "$1" "$2")" = "$3" ]; } # UNIT PROPERTY VALUE
check "SIGSTOP of PID $pid: systemd restarts the service (NRestarts 1, <= 15 s)" wait_until 15 prop_is drainer.service NRestarts 1
check "... active/running again with a new main process (<= 20 s)" wait_until 20 unit_is drainer.service active/running
pid2=$(main_pid)
check "... MainPID $pid2 is not $pid" test "$pid2" != "$pid"
journal --after-cursor "$j1" -u drainer.service -u init.scope >"$e2e_tmp/j-watchdog.log"
check "systemd's journal: watchdog timeout of drainer.service, \"Failed with result 'watchdog'\"" \
	bash -c "grep -q 'drainer.service: Watchdog timeout' '$e2e_tmp/j-watchdog.log' && grep -q \"drainer.service: Failed with result 'watchdog'\" '$e2e_tmp/j-watchdog.log'"
pid=$pid2

# --- 3. a bad config: exit 2, no restart loop -------------------------------------------------
echo "3. an unknown key in /etc/drainer/drainer.yaml"
in_ctr cp /etc/drainer/drainer.yaml /etc/drainer/drainer.yaml.good
in_ctr sh -c 'echo "no-such-key: 1" >>/etc/drainer/drainer.yaml'
j3=$(in_ctr journalctl --show-cursor -n 0 -q | sed -n 's/^-- cursor: //p')
in_ctr systemctl restart drainer.service >/dev/null 2>&1
check "systemctl restart: the unit fails (<= 20 s)" wait_until 20 unit_is drainer.service failed/failed
r0=$(show drainer.service NRestarts)
sleep 5 # RestartSec=1s (drop-in): a restart loop would show by now
check_eq "5 s later: failed/failed, ExecMainStatus 2, Result exit-code, NRestarts still $r0" "failed/failed 2 exit-code $r0" \
	"$(state_of drainer.service) $(show drainer.service ExecMainStatus) $(show drainer.service Result) $(show drainer.service NRestarts)"
# (a start by anything else, drainer.path included, does not count in NRestarts: the journal does)
starts=$(journal --after-cursor "$j3" -u drainer.service -u init.scope | grep -c 'drainer.service: Main process exited, code=exited, status=2/')
check_eq "systemd's journal: drainer exited with status 2 once, no other start (drainer.path, Restart=)" 1 "$starts"
in_ctr mv /etc/drainer/drainer.yaml.good /etc/drainer/drainer.yaml
in_ctr systemctl reset-failed drainer.service
in_ctr systemctl start drainer.service
check "the config repaired: active/running again (<= 20 s)" wait_until 20 unit_is drainer.service active/running
pid=$(main_pid)

# --- 6. the sandbox ----------------------------------------------------------------------------
echo "6. the sandbox"
exposure=$(in_ctr systemd-analyze security drainer.service 2>&1 | sed -n 's/.*Overall exposure level for drainer.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security drainer.service (real PID 1): exposure ${exposure:-?} <= 1.5" \
	awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 1.5) }'
status=$(in_ctr cat "/proc/$pid/status")
uid=$(in_ctr id -u drainer)
check_eq "/proc/$pid/status: CapEff, CapBnd, NoNewPrivs, Seccomp (2: filter), Uid (drainer's)" "0000000000000000 0000000000000000 1 2 $uid" \
	"$(awk '$1 == "NoNewPrivs:" || $1 == "CapEff:" || $1 == "CapBnd:" || $1 == "Seccomp:" { printf "%s ", $2 } $1 == "Uid:" { u = $3 } END { print u }' <<<"$status")"
journal -b >"$e2e_tmp/j-boot.log"
check "systemd set up drainer.service's namespaces (no \"assuming containerized execution and ignoring\" for it in the journal)" \
	bash -c "! grep -E 'drainer.service: .*(assuming containerized execution|Failed to set up)' '$e2e_tmp/j-boot.log'"
check "its own user and mount namespaces (PrivateUsers=, ProtectSystem=...): not PID 1's" \
	in_ctr sh -c "[ \$(readlink /proc/$pid/ns/mnt) != \$(readlink /proc/1/ns/mnt) ] && [ \$(readlink /proc/$pid/ns/user) != \$(readlink /proc/1/ns/user) ]"
# (its mount table, as the kernel shows it: a write there would get EROFS; nsenter into it
# needs CAP_SYS_ADMIN, which podman does not give the container)
mi=$(in_ctr cat "/proc/$pid/mountinfo")
ro_of() { awk -v m="$1" '$5 == m { split($6, o, ","); r = o[1] } END { print r }' <<<"$mi"; }
check_eq "drainer's mounts: / /usr /etc read-only (ProtectSystem=strict; /usr, /etc: their own mount, else /'s), /proc/sys read-only" "ro ro ro ro" \
	"$(ro_of /) $(ro_of /usr | sed 's/^$/ro/') $(ro_of /etc | sed 's/^$/ro/') $(ro_of /proc/sys)"
check_eq "... and PID 1's / is read-write (the read-only mounts are the sandbox's)" rw "$(in_ctr awk '$5 == "/" { split($6, o, ","); r = o[1] } END { print r }' /proc/1/mountinfo)"

# --- 5. drainer-maintain@node-2.service --------------------------------------------------------
echo "5. drainer-maintain@$node.service"
in_ctr systemctl stop drainer.service 2>/dev/null # (its warning: drainer.path may start it again: on a write only)
in_ctr sh -c "printf 'MAINTAIN_COMMAND=echo drainer-maintain-test: the command ran on %s\nMAINTAIN_ARGS=--timeout 90s\n' '$node' >/etc/default/drainer-maintain-$node"
delete_node_events "$node"
nodes_watch_start "$e2e_tmp/maint.watch" "$node"
t0=$SECONDS
in_ctr timeout 120 systemctl start "drainer-maintain@$node.service"
rc=$?
nodes_watch_stop
check_eq "systemctl start drainer-maintain@$node.service returns 0 ($((SECONDS - t0)) s); Result, ExecMainStatus, state" "0 success 0 inactive/dead" \
	"$rc $(show "drainer-maintain@$node.service" Result) $(show "drainer-maintain@$node.service" ExecMainStatus) $(state_of "drainer-maintain@$node.service")"
seq=$(jq -r '.unsched' "$e2e_tmp/maint.watch" | uniq | paste -sd' ')
check_eq "the API server's watch of $node: schedulable, cordoned, schedulable again" "false true false" "$seq"
check "... and $node is back in service (no drainer.io/ annotation, no taint, driver running)" wait_until 30 node_restored "$node"
journal -u "drainer-maintain@$node.service" >"$e2e_tmp/j-maint.log"
check "the unit's journal holds the command's output" grep -q "drainer-maintain-test: the command ran on $node" "$e2e_tmp/j-maint.log"
node_events "$node" "$e2e_tmp/maint-events.json"
reasons=$(jq -r '[.[] | select(.component | test("drainer")) | .reason] | unique | join(" ")' "$e2e_tmp/maint-events.json")
check "Events about $node from drainer: $reasons" test -n "$reasons"

# --- 4. the logind shutdown inhibitor ------------------------------------------------------------
echo "4. --on-shutdown: a reboot held until $node is drained"
in_ctr systemctl start drainer.service
check "drainer.service active/running again (<= 20 s)" wait_until 20 unit_is drainer.service active/running
# The journal to the end (the container's): what systemd and logind did, with wall-clock
# times (-o short-unix: the container shares the host's clock).
pm exec "$ctr" journalctl -f -n 0 -o short-unix --no-pager >"$e2e_tmp/j-reboot.log" 2>&1 &
jf_pid=$!
track_pid "$jf_pid"
e2e_cleanup_hooks+=("reap_pid $jf_pid")
sleep 1
inh() { in_ctr systemd-inhibit --list --no-pager 2>/dev/null | grep -E '^ *drainer .*shutdown.* delay'; }
check "systemd-inhibit --list: drainer's shutdown delay lock ($(inh | tr -s ' '))" wait_until 10 inh
check_eq "logind's InhibitDelayMaxUSec (logind-drainer.conf)" 5min "$(in_ctr busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec | awk '{ printf "%dmin", $2 / 60000000 }')"
nodes_watch_start "$e2e_tmp/reboot.watch" "$node"
t_reboot=$(date +%s.%N)
in_ctr systemctl reboot >"$e2e_tmp/reboot.log" 2>&1
check_eq "systemctl reboot (exit)" 0 $?
check "$node drained at the API server (<= 90 s)" wait_until 90 state_is "$node" drained
ctr_ended() { [ "$(pm inspect -f '{{.State.Running}}' "$ctr" 2>/dev/null)" = false ]; }
check "the container ends after that (the reboot went on, <= 60 s)" wait_until 60 ctr_ended
nodes_watch_stop
t_dr=$(jq -rs '[.[] | select(.state == "drained") | .t] | first // empty' "$e2e_tmp/reboot.watch")
t_cord=$(jq -rs '[.[] | select(.unsched) | .t] | first // empty' "$e2e_tmp/reboot.watch")
fin=$(pm inspect -f '{{.State.FinishedAt}}' "$ctr" 2>/dev/null)
t_fin=$(date -d "$(sed 's/ +0000 UTC$//; s/ UTC$//' <<<"$fin")" +%s.%N 2>/dev/null)
echo "    reboot at 0; cordoned seen +$(awk -v a="$t_cord" -v b="$t_reboot" 'BEGIN{printf "%.1f", a-b}') s; drained seen +$(awk -v a="$t_dr" -v b="$t_reboot" 'BEGIN{printf "%.1f", a-b}') s; container ended +$(awk -v a="$t_fin" -v b="$t_reboot" 'BEGIN{printf "%.1f", a-b}') s"
check "the shutdown went on only after $node was drained (drained seen before the container ended)" \
	awk -v d="${t_dr:-9e18}" -v f="${t_fin:-0}" 'BEGIN { exit !(d < f) }'
reap_pid "$jf_pid"
# logind's own lines: "The system will reboot now!" (the request, held by the delay
# lock), "System is rebooting." (it goes on); between them, at the API server, drainer's
# PATCH of node-2 that made it drained (the audit log: the last patch received before
# the watch showed drained).
jt() { awk -v p="$1" 'index($0, p) { sub(/ .*/, ""); print; exit }' "$e2e_tmp/j-reboot.log"; }
t_go=$(jt 'System is rebooting.')
t_req=$(jt 'The system will reboot now')
t_patch=$(grep '"userAgent":"drainer/' "$AUDIT" | jq -rs --arg n "$node" --argjson dr "${t_dr:-0}" '
	def secs: capture("^(?<s>[^.]+)\\.(?<f>[0-9]+)Z$") as $c | ($c.s + "Z" | fromdateiso8601) + ("0." + $c.f | tonumber);
	[.[] | select(.stage == "ResponseComplete" and .verb == "patch" and .objectRef.resource == "nodes" and .objectRef.name == $n
		and (.requestReceivedTimestamp | secs) < $dr) | .stageTimestamp | secs] | max // empty')
rel() { awk -v a="$1" -v b="$t_reboot" 'BEGIN { if (a == "") print "?"; else printf "+%.2f", a - b }'; }
echo "    systemctl reboot at 0; logind \"will reboot now\" $(rel "$t_req") s; drainer's last PATCH of $node (drained) answered $(rel "$t_patch") s; logind \"System is rebooting.\" $(rel "$t_go") s"
check "logind held the reboot until the drain was done: \"will reboot now\" < drainer's drained PATCH at the API server < \"System is rebooting.\"" \
	awk -v a="${t_req:-9e18}" -v b="${t_patch:-9e18}" -v c="${t_go:-0}" 'BEGIN { exit !(a < b && b < c) }'
check_eq "drainer.io/shutdown-boot-id names this boot" "$(cat /proc/sys/kernel/random/boot_id)" "$(node_ann "$node" drainer.io/shutdown-boot-id)"

echo "  (whole run: $((SECONDS - t_start)) s)"
finish
