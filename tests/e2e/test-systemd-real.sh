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
#     (a watch at the API server), its command ran, Events, Result=success; its sandbox
#     as its command sees it, against the same probe outside the unit (no core dumps,
#     seccomp filters beyond the container's, /root read-only, its own /tmp, no packet
#     sockets);
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
# Each podman exec costs 1-2 s on a loaded host: the checks run a few shell scripts in the
# container, each printing several facts ("@KEY=value" lines) and the journal excerpts
# ("=== FILE": what follows goes to $e2e_tmp/FILE), polling inside the container.
in_ctr() { pm exec "$ctr" "$@"; }
ctr_lib='us() { systemctl show -p ActiveState,SubState "$1" 2>/dev/null | cut -d= -f2 | paste -sd/; }
pr() { systemctl show -P "$2" "$1" 2>/dev/null; }
waitc() { _e=$(($(date +%s) + $1)); until eval "$2" >/dev/null 2>&1; do [ "$(date +%s)" -lt "$_e" ] || return 1; sleep 0.2; done; }
uw() { waitc "$1" "[ \"\$(us $2)\" = $3 ]"; }
cursor() { journalctl --show-cursor -n 0 -q | sed -n "s/^-- cursor: //p"; }
jr() { journalctl --no-pager -o short-monotonic "$@" 2>/dev/null; }
'
# in_run NAME [-i] SCRIPT [ARG...]: SCRIPT (with ctr_lib) in the container, its @KEY=value
# lines to $e2e_tmp/NAME.facts, its "=== FILE" sections to $e2e_tmp/FILE.
in_run() {
	local name=$1 i=
	shift
	[ "$1" = -i ] && { i=-i; shift; }
	local script=$1
	shift
	: >"$e2e_tmp/$name.facts"
	pm exec $i "$ctr" sh -c "$ctr_lib$script" sh "$@" 2>/dev/null |
		awk -v d="$e2e_tmp" -v n="$name" '/^@/ { print substr($0, 2) >> (d "/" n ".facts"); next }
			/^=== / { if (f != "") close(f); f = d "/" $2; printf "" > f; next } f != "" { print > f }'
}
fact() { sed -n "s/^$2=//p" "$e2e_tmp/$1.facts" | head -n 1; } # NAME KEY

in_run boot 'waitc 30 "test -S /run/dbus/system_bus_socket"
	echo "@sys=$(systemctl is-system-running --wait 2>&1 | tail -n 1)"
	busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager ListSessions >/dev/null 2>&1
	echo "@active=$(systemctl is-active dbus systemd-logind | paste -sd" ")"
	echo "=== failed.txt"; systemctl --failed --no-legend'
sys_state=$(fact boot sys)
check_eq "systemd booted in the container: is-system-running" running "$sys_state"
[ "$sys_state" = running ] || sed 's/^/    /' "$e2e_tmp/failed.txt"
check_eq "dbus and systemd-logind active" "active active" "$(fact boot active)"

# --- install the package, configure node-2 -----------------------------------------------
in_run install -i 'cat >/tmp/drainer.deb; dpkg -i /tmp/drainer.deb >/tmp/dpkg.log 2>&1; echo "@rc=$?"
	echo "@last=$(tail -n 1 /tmp/dpkg.log)"
	# (WatchdogUSec shows the effective value: infinity until the service runs)
	echo "@shipped=$(pr drainer.service LoadState) $(us drainer.service) $(systemctl cat drainer.service | grep "^WatchdogSec=")"
	echo "=== dpkg.log"; cat /tmp/dpkg.log' <"$deb"
check_eq "dpkg -i drainer.deb in the container (exit; $(fact install last))" 0 "$(fact install rc)"
check_eq "as shipped: drainer.service loaded and skipped (no kubeconfig yet), WatchdogSec=30s" "loaded inactive/dead WatchdogSec=30s" "$(fact install shipped)"

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

# NODE_NAME, --on-shutdown; no metrics listener (network=host: not the host's
# 127.0.0.1:9464); logind-drainer.conf; the test's drop-in (watchdog 3 s, RestartSec 1 s);
# systemd's debug log (the notifications in the journal).
in_run config 'printf "NODE_NAME=%s\nDRAINER_ARGS=--on-shutdown\n" "$1" >>/etc/default/drainer
	echo "metrics-addr: \"\"" >>/etc/drainer/drainer.yaml
	mkdir -p /etc/systemd/logind.conf.d && cp /usr/share/doc/drainer/examples/logind-drainer.conf /etc/systemd/logind.conf.d/50-drainer.conf && systemctl restart systemd-logind
	mkdir -p /etc/systemd/system/drainer.service.d && printf "[Service]\nWatchdogSec=3s\nRestartSec=1s\n" >/etc/systemd/system/drainer.service.d/test.conf && systemctl daemon-reload
	systemd-analyze log-level debug; echo "@done=$?"' "$node"
[ "$(fact config done)" = 0 ] || fail "configuring the container (drop-ins, logind, log level) failed"

# --- 1. readiness -----------------------------------------------------------------------
echo "1. readiness (Type=notify)"
fp_rules '[{"method":"GET","path":"^/api/v1/nodes","watch":false,"first":1,"action":"stall","delay":"10s"}]'
n0=$(audit_lines)
# The documented way: the kubeconfig appears, drainer.path starts drainer.service.
in_run ready -i 'j0=$(cursor)
	umask 077; cat >/etc/drainer/kubeconfig; chmod 600 /etc/drainer/kubeconfig
	uw 5 drainer.service activating/start; echo "@activating=$?"
	uw 30 drainer.service active/running; echo "@running=$?"
	echo "@pid=$(pr drainer.service MainPID)"
	echo "=== j-ready.log"; jr --after-cursor "$j0" -u drainer.service -u init.scope
	echo "=== j-ready-unix.log"; journalctl --no-pager -o short-unix --after-cursor "$j0" -u drainer.service -u init.scope 2>/dev/null
	echo "@pid_again=$(pr drainer.service MainPID)"' <"$e2e_tmp/kubeconfig"
check_eq "drainer.path started drainer.service: activating/start" 0 "$(fact ready activating)"
check_eq "after the proxy let the list through: active/running (<= 30 s)" 0 "$(fact ready running)"
pid=$(fact ready pid)
# When: systemd's journal (wall clock) against the proxy's log of the stalled list.
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
check_eq "the same process: MainPID" "$pid" "$(fact ready pid_again)"
seen=$(tail -n +"$((n0 + 1))" "$AUDIT" | jq -r 'select(.stage == "ResponseComplete" and (.userAgent | startswith("drainer/")) and .objectRef.resource == "nodes") | "\(.user.username) \(.verb) \(.objectRef.name // "") \(.responseStatus.code)"' | sort -u | paste -sd';')
check "the API server saw the unit's drainer read $node with the node-bound token: $seen" \
	grep -q "system:serviceaccount:drainer-system:drainer [a-z]* $node 200" <<<"$seen"

# --- 2. watchdog ------------------------------------------------------------------------
echo "2. watchdog"
in_run watchdog 'echo "@wd=$(pr drainer.service WatchdogUSec)"
	j1=$(cursor)
	sleep 7
	echo "@after7=$(us drainer.service) $(pr drainer.service NRestarts) $(pr drainer.service MainPID)"
	echo "=== j-watchdog-7s.log"; jr --after-cursor "$j1" -u init.scope -u drainer.service
	systemctl kill --kill-whom=main --signal=SIGSTOP drainer.service
	waitc 15 "[ \"\$(pr drainer.service NRestarts)\" = 1 ]"; echo "@restarted=$?"
	uw 20 drainer.service active/running; echo "@running=$?"
	echo "@pid2=$(pr drainer.service MainPID)"
	echo "=== j-watchdog.log"; jr --after-cursor "$j1" -u drainer.service -u init.scope'
check_eq "WatchdogUSec with the test's drop-in" 3s "$(fact watchdog wd)"
check_eq "7 s later (> 2 x 3 s): active/running, NRestarts 0, same MainPID" "active/running 0 $pid" "$(fact watchdog after7)"
pings=$(grep -c "Got notification message from PID $pid.*WATCHDOG=1" "$e2e_tmp/j-watchdog-7s.log")
check "systemd got WATCHDOG=1 from PID $pid in those 7 s: $pings times (>= 3)" test "$pings" -ge 3
check_eq "SIGSTOP of PID $pid: systemd restarts the service (NRestarts 1, <= 15 s)" 0 "$(fact watchdog restarted)"
check_eq "... active/running again with a new main process (<= 20 s)" 0 "$(fact watchdog running)"
pid2=$(fact watchdog pid2)
check "... MainPID $pid2 is not $pid" test "$pid2" != "$pid"
check "systemd's journal: watchdog timeout of drainer.service, \"Failed with result 'watchdog'\"" \
	bash -c "grep -q 'drainer.service: Watchdog timeout' '$e2e_tmp/j-watchdog.log' && grep -q \"drainer.service: Failed with result 'watchdog'\" '$e2e_tmp/j-watchdog.log'"
pid=$pid2

# --- 3. a bad config: exit 2, no restart loop -------------------------------------------------
echo "3. an unknown key in /etc/drainer/drainer.yaml"
in_run badconf 'cp /etc/drainer/drainer.yaml /etc/drainer/drainer.yaml.good
	echo "no-such-key: 1" >>/etc/drainer/drainer.yaml
	j3=$(cursor)
	systemctl restart drainer.service >/dev/null 2>&1
	uw 20 drainer.service failed/failed; echo "@failed=$?"
	echo "@r0=$(pr drainer.service NRestarts)"
	sleep 5 # RestartSec=1s (drop-in): a restart loop would show by now
	echo "@after5=$(us drainer.service) $(pr drainer.service ExecMainStatus) $(pr drainer.service Result) $(pr drainer.service NRestarts)"
	echo "=== j-badconf.log"; jr --after-cursor "$j3" -u drainer.service -u init.scope
	mv /etc/drainer/drainer.yaml.good /etc/drainer/drainer.yaml
	systemctl reset-failed drainer.service
	systemctl start drainer.service
	uw 20 drainer.service active/running; echo "@repaired=$?"
	echo "@pid=$(pr drainer.service MainPID)"'
check_eq "systemctl restart: the unit fails (<= 20 s)" 0 "$(fact badconf failed)"
r0=$(fact badconf r0)
check_eq "5 s later: failed/failed, ExecMainStatus 2, Result exit-code, NRestarts still $r0" "failed/failed 2 exit-code $r0" "$(fact badconf after5)"
# (a start by anything else, drainer.path included, does not count in NRestarts: the journal does)
starts=$(grep -c 'drainer.service: Main process exited, code=exited, status=2/' "$e2e_tmp/j-badconf.log")
check_eq "systemd's journal: drainer exited with status 2 once, no other start (drainer.path, Restart=)" 1 "$starts"
check_eq "the config repaired: active/running again (<= 20 s)" 0 "$(fact badconf repaired)"
pid=$(fact badconf pid)

# --- 6. the sandbox ----------------------------------------------------------------------------
echo "6. the sandbox"
# (its mount table, as the kernel shows it: a write there would get EROFS; nsenter into it
# needs CAP_SYS_ADMIN, which podman does not give the container)
in_run sandbox 'echo "@exposure=$(systemd-analyze security drainer.service 2>&1 | sed -n "s/.*Overall exposure level for drainer.service: \([0-9.]*\).*/\1/p")"
	echo "@uid=$(id -u drainer)"
	[ $(readlink /proc/$1/ns/mnt) != $(readlink /proc/1/ns/mnt) ] && [ $(readlink /proc/$1/ns/user) != $(readlink /proc/1/ns/user) ]; echo "@ns=$?"
	echo "@root1=$(awk "\$5 == \"/\" { split(\$6, o, \",\"); r = o[1] } END { print r }" /proc/1/mountinfo)"
	echo "=== status.txt"; cat /proc/$1/status
	echo "=== mountinfo.txt"; cat /proc/$1/mountinfo
	echo "=== j-boot.log"; jr -b' "$pid"
exposure=$(fact sandbox exposure)
check "systemd-analyze security drainer.service (real PID 1): exposure ${exposure:-?} <= 1.5" \
	awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 1.5) }'
uid=$(fact sandbox uid)
check_eq "/proc/$pid/status: CapEff, CapBnd, NoNewPrivs, Seccomp (2: filter), Uid (drainer's)" "0000000000000000 0000000000000000 1 2 $uid" \
	"$(awk '$1 == "NoNewPrivs:" || $1 == "CapEff:" || $1 == "CapBnd:" || $1 == "Seccomp:" { printf "%s ", $2 } $1 == "Uid:" { u = $3 } END { print u }' "$e2e_tmp/status.txt")"
check "systemd set up drainer.service's namespaces (no \"assuming containerized execution and ignoring\" for it in the journal)" \
	bash -c "! grep -E 'drainer.service: .*(assuming containerized execution|Failed to set up)' '$e2e_tmp/j-boot.log'"
check_eq "its own user and mount namespaces (PrivateUsers=, ProtectSystem=...): not PID 1's" 0 "$(fact sandbox ns)"
ro_of() { awk -v m="$1" '$5 == m { split($6, o, ","); r = o[1] } END { print r }' "$e2e_tmp/mountinfo.txt"; }
check_eq "drainer's mounts: / /usr /etc read-only (ProtectSystem=strict; /usr, /etc: their own mount, else /'s), /proc/sys read-only" "ro ro ro ro" \
	"$(ro_of /) $(ro_of /usr | sed 's/^$/ro/') $(ro_of /etc | sed 's/^$/ro/') $(ro_of /proc/sys)"
check_eq "... and PID 1's / is read-write (the read-only mounts are the sandbox's)" rw "$(fact sandbox root1)"

# --- 5. drainer-maintain@node-2.service --------------------------------------------------------
echo "5. drainer-maintain@$node.service"
# (drainer.service stopped first: its warning, drainer.path may start it again, is about a write only)
# The command is a probe of the unit's sandbox, from inside it (the command runs in the
# unit, as root): what it prints goes to the unit's journal as "maint-probe: KEY=VALUE".
in_run mprep 'systemctl stop drainer.service 2>/dev/null
	cat >/usr/local/bin/maint-probe <<"PROBE"
#!/bin/sh
echo "drainer-maintain-test: the command ran on $1"
echo "maint-probe: core=$(ulimit -c)/$(ulimit -Hc)"
echo "maint-probe: filters=$(awk "\$1 == \"Seccomp_filters:\" { print \$2 }" /proc/self/status)"
echo "maint-probe: capbnd=$(awk "\$1 == \"CapBnd:\" { print \$2 }" /proc/self/status)"
echo "maint-probe: home=$(touch /root/.maint-probe 2>&1 && echo written)"
echo "maint-probe: tmp=$(readlink /proc/self/ns/mnt) $(echo x >/tmp/maint-probe-file && echo written)"
echo "maint-probe: packet=$(perl -e "socket(my \$s, 17, 2, 0) ? print q(opened) : print qq(\$!)" 2>&1)"
PROBE
	chmod 755 /usr/local/bin/maint-probe
	rm -f /tmp/maint-probe-file /root/.maint-probe
	printf "MAINTAIN_COMMAND=/usr/local/bin/maint-probe %s\nMAINTAIN_ARGS=--timeout 90s\n" "$1" >"/etc/default/drainer-maintain-$1"' "$node"
delete_node_events "$node"
nodes_watch_start "$e2e_tmp/maint.watch" "$node"
t0=$SECONDS
in_run maint 'timeout 120 systemctl start "drainer-maintain@$1.service"; echo "@rc=$?"
	u="drainer-maintain@$1.service"
	echo "@after=$(pr "$u" Result) $(pr "$u" ExecMainStatus) $(us "$u")"
	journalctl --sync 2>/dev/null
	echo "=== j-maint.log"; jr -u "$u"' "$node"
nodes_watch_stop
check_eq "systemctl start drainer-maintain@$node.service returns 0 ($((SECONDS - t0)) s); Result, ExecMainStatus, state" "0 success 0 inactive/dead" \
	"$(fact maint rc) $(fact maint after)"
seq=$(jq -r '.unsched' "$e2e_tmp/maint.watch" | uniq | paste -sd' ')
check_eq "the API server's watch of $node: schedulable, cordoned, schedulable again" "false true false" "$seq"
check "... and $node is back in service (no drainer.io/ annotation, no taint, driver running)" wait_until 30 node_restored "$node"
check "the unit's journal holds the command's output" grep -q "drainer-maintain-test: the command ran on $node" "$e2e_tmp/j-maint.log"

# The maintain unit's sandbox, as its command saw it, against the same probe outside any
# unit (a root shell of the container: PID 1's limits, filters and mounts). Only what no
# maintenance command needs is restricted there (the unit's comment), so only that is
# checked: no core dumps, systemd's seccomp filters (SystemCallFilter=,
# RestrictAddressFamilies=, ...) on top of the container's, no packet sockets (the
# address-family filter says EAFNOSUPPORT where the container alone says EPERM: no
# CAP_NET_RAW), and, where systemd could give the unit a mount namespace, /root read-only
# and a /tmp of its own. In this container it cannot (no CAP_SYS_ADMIN, and the unit has
# no PrivateUsers=: see the podman run above); then the command runs in PID 1's mount
# namespace, and a "cannot check" line says so. That is judged from the namespace the probe
# saw, not from systemd's journal line on it ("assuming containerized execution"): the line
# comes from the unit's executor process and has been missing from the journal read here.
mp() { sed -n "s/.*maint-probe: $1=//p" "$e2e_tmp/j-maint.log" | tail -n 1; }
in_run mtmp 'echo "@f=$(test -e /tmp/maint-probe-file && echo present || echo absent)"
	echo "@mnt1=$(readlink /proc/1/ns/mnt)"'
in_run mout 'sh /usr/local/bin/maint-probe x | sed -n "s/^maint-probe: \([a-z]*\)=/@\1=/p"
	rm -f /tmp/maint-probe-file /root/.maint-probe'
echo "  maint-probe in the unit: core=$(mp core) filters=$(mp filters) capbnd=$(mp capbnd) packet=$(mp packet); outside: core=$(fact mout core) filters=$(fact mout filters) capbnd=$(fact mout capbnd) packet=$(fact mout packet)"
check_eq "maintain unit: no core dumps, soft and hard limit (LimitCORE=0; systemd's default is 0:infinity)" 0/0 "$(mp core)"
check "maintain unit: more seccomp filters than the container's own ($(mp filters) > $(fact mout filters))" \
	awk -v a="$(mp filters)" -v b="$(fact mout filters)" 'BEGIN { exit !(a != "" && b != "" && a + 0 > b + 0) }'
unit_mnt=$(mp tmp | awk '{ print $1 }')
check "maintain unit: the probe said which mount namespace it ran in ($unit_mnt; PID 1's: $(fact mtmp mnt1))" \
	test -n "$unit_mnt" -a -n "$(fact mtmp mnt1)"
if [ -n "$unit_mnt" ] && [ "$unit_mnt" = "$(fact mtmp mnt1)" ]; then
	said=$(grep -o "drainer-maintain@$node.service: .*assuming containerized execution[^.]*" "$e2e_tmp/j-maint.log" | head -n 1)
	echo "  cannot check here: ProtectHome=read-only and PrivateTmp= of the maintain unit (systemd gave it no mount namespace in this container: it ran in PID 1's, $unit_mnt; the journal: ${said:-no line on it}; the probe saw home=$(mp home), tmp=$(mp tmp))"
elif [ -n "$unit_mnt" ]; then
	check "maintain unit: /root read-only (ProtectHome=read-only): $(mp home)" bash -c "grep -q 'maint-probe: home=.*Read-only file system' '$e2e_tmp/j-maint.log'"
	check_eq "maintain unit: its /tmp file is not in the container's /tmp (PrivateTmp=yes)" "written absent" \
		"$(mp tmp | awk '{ print $2 }') $(fact mtmp f)"
fi
check "maintain unit: a packet socket refused by the address-family filter ($(mp packet)), not only by a missing capability ($(fact mout packet))" \
	bash -c "grep -q 'maint-probe: packet=Address family not supported' '$e2e_tmp/j-maint.log'"
node_events "$node" "$e2e_tmp/maint-events.json"
reasons=$(jq -r '[.[] | select(.component | test("drainer")) | .reason] | unique | join(" ")' "$e2e_tmp/maint-events.json")
check "Events about $node from drainer: $reasons" test -n "$reasons"

# --- 4. the logind shutdown inhibitor ------------------------------------------------------------
echo "4. --on-shutdown: a reboot held until $node is drained"
# The journal to the end (the container's): what systemd and logind did, with wall-clock
# times (-o short-unix: the container shares the host's clock). Started before drainer.service:
# the lines looked for below appear only at the reboot.
pm exec "$ctr" journalctl -f -n 0 -o short-unix --no-pager >"$e2e_tmp/j-reboot.log" 2>&1 &
jf_pid=$!
track_pid "$jf_pid"
e2e_cleanup_hooks+=("reap_pid $jf_pid")
in_run shutdown 'systemctl start drainer.service
	uw 20 drainer.service active/running; echo "@running=$?"
	waitc 10 "systemd-inhibit --list --no-pager 2>/dev/null | grep -qE \"^ *drainer .*shutdown.* delay\""; echo "@inh=$?"
	echo "@lock=$(systemd-inhibit --list --no-pager 2>/dev/null | grep -E "^ *drainer .*shutdown.* delay" | tr -s " ")"
	echo "@delaymax=$(busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec | awk "{ printf \"%dmin\", \$2 / 60000000 }")"'
check_eq "drainer.service active/running again (<= 20 s)" 0 "$(fact shutdown running)"
check_eq "systemd-inhibit --list: drainer's shutdown delay lock ($(fact shutdown lock))" 0 "$(fact shutdown inh)"
check_eq "logind's InhibitDelayMaxUSec (logind-drainer.conf)" 5min "$(fact shutdown delaymax)"
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
# the watch showed drained), by the time the API server received it: its ResponseComplete
# stamp is taken after the answer is written, and drainer (which lets go of the lock on
# that answer) and logind can act on it first (seen: logind 10 ms before that stamp).
jt() { awk -v p="$1" 'index($0, p) { sub(/ .*/, ""); print; exit }' "$e2e_tmp/j-reboot.log"; }
t_go=$(jt 'System is rebooting.')
t_req=$(jt 'The system will reboot now')
t_patch=$(grep '"userAgent":"drainer/' "$AUDIT" | jq -rs --arg n "$node" --argjson dr "${t_dr:-0}" '
	def secs: capture("^(?<s>[^.]+)\\.(?<f>[0-9]+)Z$") as $c | ($c.s + "Z" | fromdateiso8601) + ("0." + $c.f | tonumber);
	[.[] | select(.stage == "ResponseComplete" and .verb == "patch" and .objectRef.resource == "nodes" and .objectRef.name == $n
		and (.requestReceivedTimestamp | secs) < $dr) | .requestReceivedTimestamp | secs] | max // empty')
rel() { awk -v a="$1" -v b="$t_reboot" 'BEGIN { if (a == "") print "?"; else printf "+%.2f", a - b }'; }
echo "    systemctl reboot at 0; logind \"will reboot now\" $(rel "$t_req") s; drainer's last PATCH of $node (drained) received $(rel "$t_patch") s; logind \"System is rebooting.\" $(rel "$t_go") s"
# The follower runs in the container, and the shutdown may kill it before logind's last
# line reaches it (the container keeps its journal in /run only; a copy of
# /var/log/journal and a follower on the host through /proc/PID/root found nothing):
# then the order cannot be judged from logind's side, and that is said.
if [ -n "$t_req" ] && [ -z "$t_go" ]; then
	echo "  cannot check here: logind held the reboot until the drain was done (its \"System is rebooting.\" line never reached the journal follower, killed by the shutdown first)"
else
	check "logind held the reboot until the drain was done: \"will reboot now\" < drainer's drained PATCH at the API server < \"System is rebooting.\"" \
		awk -v a="${t_req:-9e18}" -v b="${t_patch:-9e18}" -v c="${t_go:-0}" 'BEGIN { exit !(a < b && b < c) }'
fi
check_eq "drainer.io/shutdown-boot-id names this boot" "$(cat /proc/sys/kernel/random/boot_id)" "$(node_ann "$node" drainer.io/shutdown-boot-id)"

echo "  (whole run: $((SECONDS - t_start)) s)"
finish
