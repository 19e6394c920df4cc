#!/usr/bin/env bash
# drainer serve under systemd, against the real control plane. There is no
# systemd as PID 1 here, so drainer gets a real NOTIFY_SOCKET (a python3 listener
# recording every datagram with its sender's pid) and a private dbus-daemon as its
# system bus ($DBUS_SYSTEM_BUS_ADDRESS) with fake-systemd (tests/unit/fakes), the
# stand-in for org.freedesktop.login1 and org.freedesktop.systemd1 that test-sysbus
# uses; dbus-monitor records the calls on that bus.
#  1. serve --node node-2 --on-shutdown under Type=notify with WATCHDOG_USEC=2 s:
#     READY=1 once its first list of the Node is answered, STATUS= lines,
#     WATCHDOG=1 every ~1 s for its whole life (also while draining), a logind
#     delay inhibitor ("shutdown", "delay") held; PrepareForShutdown(true) makes it
#     annotate node-2 drainer.io/request=drain + drainer.io/shutdown-boot-id=<this
#     boot>, drain it, and release the lock once drained; SIGTERM: STOPPING=1, exit 0.
#  2. a daemon restarted in the same boot leaves the node drained (and sends no
#     WATCHDOG=1 when WATCHDOG_PID names another process); one started "after the
#     reboot" (the annotation names another boot id) restores the node.
#  3. the drain of node-1 (the demo workload and a claim holder with an 8 s preStop
#     sleep) takes longer than logind's delay:
#     the lock is let go shortly before InhibitDelayMaxUSec (5 s in the stand-in),
#     not later, and the drain goes on.
#  4. drainer drain node-3 --driver-stop systemd:dra-driver.service stops the unit
#     (StopUnit after the node's claims were released; the driver pod is left
#     alone); drainer uncordon without that flag refuses (exit 1, prints the command
#     with the flag, starts nothing), with --config FILE naming the unit it starts it.
#  5. (an annotation is no authority) kubectl annotate node node-3 drainer.io/state=restore-drivers
#     'drainer.io/driver-stop=[{"strategy":"systemd","unit":"reboot.target"}]': no
#     StartUnit(reboot.target) on the bus (the stand-in has that unit and would
#     start it) from uncordon (default flags, another unit, a --config file) nor from
#     serve; each exits 1 / serve keeps running, the Node's message and a
#     DrainerBlocked Event say why; serve reports it once and waits: no second
#     engine run until the annotations change, then it acts.
#  6. a unit whose start job fails (broken.service) is retried with backoff: a
#     handful of StartUnit calls in 8 s, each gap about twice the last.
# Skipped (one SKIP line, counted as passed) when dbus-daemon is not installed.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer

if ! command -v dbus-daemon >/dev/null; then
	pass "SKIP: dbus-daemon is not installed (Debian package dbus-daemon): no system bus stand-in, systemd tests skipped"
	finish
	exit 0
fi
FAKE_SYSTEMD=${FAKE_SYSTEMD:-$(dirname "$DRAINER")/tests/unit/fake-systemd}
for t in python3 dbus-send dbus-monitor; do
	command -v "$t" >/dev/null || { fail "$t is needed"; finish; exit 1; }
done
[ -x "$FAKE_SYSTEMD" ] || { fail "no fake-systemd at $FAKE_SYSTEMD (built with drainer: ninja -C $(dirname "$DRAINER")), or set FAKE_SYSTEMD"; finish; exit 1; }

ns=e2e-serve-systemd
boot_id=$(cat /proc/sys/kernel/random/boot_id)
other_boot=00000000-0000-4000-8000-000000000000
[ "$boot_id" != "$other_boot" ] || other_boot=11111111-1111-4111-8111-111111111111

cleanup_systemd() {
	local t n
	for t in "${!serve_pids[@]}"; do serve_stop "$t" KILL; done
	kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
	for n in node-1 node-2 node-3; do reset_node "$n"; done
	demo
	[ -z "${mon_pid:-}" ] || kill "$mon_pid" 2>/dev/null
	[ -z "${fake_pid:-}" ] || kill "$fake_pid" 2>/dev/null
	[ -z "${notify_pid:-}" ] || kill "$notify_pid" 2>/dev/null
	sleep 0.2
	[ -z "${bus_pid:-}" ] || kill "$bus_pid" 2>/dev/null
	wait 2>/dev/null
}
e2e_cleanup_hooks+=(cleanup_systemd)

# ---- the system bus stand-in ------------------------------------------------------
bus_dir=$e2e_tmp/bus
mkdir -p "$bus_dir"
cat >"$bus_dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$bus_dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
dbus-daemon --config-file="$bus_dir/bus.conf" --nofork --nosyslog --print-address=3 3>"$bus_dir/address" 2>"$bus_dir/daemon.log" &
bus_pid=$!
wait_until 10 test -s "$bus_dir/address" || { fail "dbus-daemon did not start: $(cat "$bus_dir/daemon.log")"; finish; exit 1; }
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$bus_dir/bus
dbus-monitor --address "$DBUS_SYSTEM_BUS_ADDRESS" >"$bus_dir/monitor.log" 2>&1 &
mon_pid=$!
"$FAKE_SYSTEMD" reboot.target=inactive >"$bus_dir/fake.out" 2>&1 &
fake_pid=$!
wait_until 10 grep -qx READY "$bus_dir/fake.out" || { fail "fake-systemd did not start: $(cat "$bus_dir/fake.out")"; finish; exit 1; }
pass "private system bus with the login1/systemd1 stand-in ($DBUS_SYSTEM_BUS_ADDRESS)"

# bus_call DEST PATH IFACE.METHOD [ARGS]: dbus-send --print-reply.
bus_call() { dbus-send --bus="$DBUS_SYSTEM_BUS_ADDRESS" --print-reply --dest="$1" "$2" "${@:3}"; }
# inhibitors: "HELD RELEASED WHAT WHO MODE" as the stand-in counts them.
inhibitors() {
	bus_call org.freedesktop.login1 /org/freedesktop/login1 io.drainer.Test.Inhibitors |
		awk '/^ +(uint32|string)/ { v = $2; gsub(/"/, "", v); printf "%s%s", sep, (v == "" ? "-" : v); sep = " " } END { print "" }'
}
inhibitors_held() { set -- $(inhibitors); echo "$1"; }
inhibitors_released() { set -- $(inhibitors); echo "$2"; }
held_is() { [ "$(inhibitors_held)" = "$1" ]; }
emit_prepare_for_shutdown() { bus_call org.freedesktop.login1 /org/freedesktop/login1 io.drainer.Test.EmitPrepareForShutdown "boolean:$1" >/dev/null; }
# unit_state UNIT: its ActiveState.
unit_state() {
	local path
	path=$(dbus-send --bus="$DBUS_SYSTEM_BUS_ADDRESS" --print-reply=literal --dest=org.freedesktop.systemd1 \
		/org/freedesktop/systemd1 org.freedesktop.systemd1.Manager.GetUnit "string:$1" | tr -d ' ')
	dbus-send --bus="$DBUS_SYSTEM_BUS_ADDRESS" --print-reply=literal --dest=org.freedesktop.systemd1 "$path" \
		org.freedesktop.DBus.Properties.Get string:org.freedesktop.systemd1.Unit string:ActiveState | awk '{ print $NF }'
}
unit_is() { [ "$(unit_state "$1")" = "$2" ]; }
# bus_calls MEMBER UNIT: "TIME" of each method call MEMBER whose first argument is UNIT.
bus_calls() {
	awk -v m="member=$1" -v u="\"$2\"" '
		/^method call / { pending = (index($0, m) > 0 && $0 ~ (m "$")) ? $3 : ""; next }
		pending != "" && /^ +string / { if ($2 == u) { sub(/^time=/, "", pending); print pending }; pending = ""; next }
		{ pending = "" }' "$bus_dir/monitor.log"
}

# ---- NOTIFY_SOCKET ----------------------------------------------------------------
sock=$e2e_tmp/notify.sock
nlog=$e2e_tmp/notify.log
cat >"$e2e_tmp/notify.py" <<'PY'
# A systemd notification socket: one line "TIME PID FIELD" per field of each datagram.
import socket, struct, sys, time
path, out = sys.argv[1], open(sys.argv[2], "a", buffering=1)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind(path)
while True:
    data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(12))
    t, pid = time.time(), 0
    for level, kind, value in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", value[:12])[0]
    for field in data.decode(errors="replace").split("\n"):
        if field:
            out.write("%.6f %d %s\n" % (t, pid, field))
PY
: >"$nlog"
python3 -u "$e2e_tmp/notify.py" "$sock" "$nlog" 2>"$e2e_tmp/notify.err" &
notify_pid=$!
wait_until 30 test -S "$sock" || { fail "notify listener: $(cat "$e2e_tmp/notify.err")"; finish; exit 1; }
# notes PID REGEX: "TIME FIELD" of the datagram fields from PID matching REGEX (ERE).
notes() { awk -v p="$1" -v r="$2" '$2 == p { f = substr($0, index($0, $3)); if (f ~ r) print $1, f }' "$nlog"; }
has_note() { [ -n "$(notes "$1" "$2")" ]; }
now() { date +%s.%N; }
# ep ISO: seconds since the epoch of an RFC 3339 time with a fraction (the audit log's).
ep_jq='def ep: (.[0:19] + "Z" | fromdate) + (.[19:-1] | if . == "" then 0 else tonumber end);'
fle() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; } # a <= b, as floats
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

demo || { fail "demo workload"; finish; exit 1; }
for n in node-1 node-2 node-3; do [ "$(node_drainer_anns "$n")" = "{}" ] || reset_node "$n"; done

# ---- 1. notify, watchdog, inhibitor, PrepareForShutdown ---------------------------
echo "- 1. serve --node node-2 --on-shutdown (NOTIFY_SOCKET, WATCHDOG_USEC=2000000)"
read -r held0 rel0 _ <<<"$(inhibitors)"
nodes_watch_start "$e2e_tmp/n2.watch" node-2
a_line=$(audit_lines)
serve_env=(NOTIFY_SOCKET="$sock" WATCHDOG_USEC=2000000 WATCHDOG_PID=self)
serve_start sd1 serve --node node-2 --max-parallel 0 --on-shutdown --grace-period 1
serve_env=()
pid1=$serve_pid
t_start1=$(now)
if check "READY=1 from the daemon (pid $pid1)" wait_until 20 has_note "$pid1" '^READY=1$'; then
	t_ready=$(notes "$pid1" '^READY=1$' | head -n 1 | cut -d' ' -f1)
	t_sync=$(tail -n +"$((a_line + 1))" "$AUDIT" | grep '"userAgent":"drainer/' |
		jq -rs "$ep_jq"' [.[] | select(.stage == "ResponseComplete" and .verb == "list" and .objectRef.resource == "nodes" and (.requestURI | contains("metadata.name%3Dnode-2")))] | first | .stageTimestamp // empty | ep')
	if [ -n "$t_sync" ]; then
		check "READY=1 came after its first list of node-2 was answered (+$(fsub "$t_ready" "$t_sync") s)" fle "$t_sync" "$t_ready"
	else
		fail "no list of node-2 by drainer in the audit log before READY=1"
	fi
else
	serve_log sd1 20
fi
check "a STATUS= line ($(notes "$pid1" '^STATUS=' | head -n 1 | cut -d' ' -f2-))" has_note "$pid1" '^STATUS=.'
check "the stand-in holds a new inhibitor" wait_until 10 held_is $((held0 + 1))
read -r _ _ what who mode <<<"$(inhibitors)"
check_eq "inhibitor what/who/mode" "shutdown drainer delay" "$what $who $mode"
sleep 2 # a few watchdog pings while idle

echo "- PrepareForShutdown(true)"
t_emit=$(now)
emit_prepare_for_shutdown true
t_rel=
end=$((SECONDS + 30))
while [ "$SECONDS" -lt "$end" ]; do
	if [ "$(inhibitors_released)" -gt "$rel0" ]; then t_rel=$(now); break; fi
	sleep 0.05
done
check "node-2 drained after PrepareForShutdown (<= 30 s)" wait_until 30 state_is node-2 drained
sleep 0.3
t_dr=$(jq -rs '[.[] | select(.state == "drained") | .t] | first // empty' "$e2e_tmp/n2.watch")
check_eq "drainer.io/request=drain set by the daemon" drain "$(node_ann node-2 drainer.io/request)"
check_eq "drainer.io/shutdown-boot-id is this boot's id" "$boot_id" "$(node_ann node-2 drainer.io/shutdown-boot-id)"
check_eq "node-2 unschedulable" true "$(node_unschedulable node-2)"
check "node-2's driver pod is gone" no_driver_pod node-2
if [ -n "$t_rel" ] && [ -n "$t_dr" ]; then
	echo "  drained $(fsub "$t_dr" "$t_emit") s after PrepareForShutdown; lock released after $(fsub "$t_rel" "$t_emit") s"
	check "the lock was released once node-2 was drained, not before (drained seen at +$(fsub "$t_dr" "$t_emit") s, released at +$(fsub "$t_rel" "$t_emit") s)" \
		fle "$(fsub "$t_dr" 0.3)" "$t_rel"
	check "... and promptly (within 2 s of drained)" fle "$t_rel" "$(fsub "$t_dr" -2)"
else
	fail "the inhibitor was never released (stand-in: $(inhibitors)) or node-2 never drained"
	serve_log sd1 30
fi
check_eq "the stand-in: no inhibitor held now" "$held0" "$(inhibitors_held)"
check "STATUS= reported the drain (node-2 ... drained)" has_note "$pid1" '^STATUS=.*node-2.*drained'
echo "  STATUS lines: $(notes "$pid1" '^STATUS=' | cut -d' ' -f2- | uniq | sed 's/^STATUS=//' | paste -sd '|' | sed 's/|/ | /g')"

t_term=$(now)
serve_stop sd1
check_eq "SIGTERM: exit 0" 0 "$serve_rc"
t_stopping=$(notes "$pid1" '^STOPPING=1$' | head -n 1 | cut -d' ' -f1)
check "STOPPING=1 after SIGTERM" bash -c "[ -n '$t_stopping' ] && awk -v a='$t_term' -v b='$t_stopping' 'BEGIN { exit !(a <= b) }'"
# The watchdog over its whole life, idle and draining.
notes "$pid1" '^WATCHDOG=1$' | cut -d' ' -f1 >"$e2e_tmp/wd1"
wd_n=$(wc -l <"$e2e_tmp/wd1")
life=$(fsub "${t_stopping:-$t_term}" "$t_start1")
read -r gmin gmax <<<"$(awk 'NR > 1 { g = $1 - p; if (min == "" || g < min) min = g; if (g > max) max = g } { p = $1 } END { printf "%.2f %.2f", min, max }' "$e2e_tmp/wd1")"
echo "  WATCHDOG=1: $wd_n pings in $life s; gaps $gmin .. $gmax s (expected every 1 s: half of WATCHDOG_USEC)"
check "WATCHDOG=1 about every second for its whole life ($wd_n pings in $life s)" \
	awk -v n="$wd_n" -v l="$life" 'BEGIN { exit !(n >= l - 2 && n <= l + 2) }'
check "no watchdog gap above 1.5 s (max $gmax) nor below 0.5 s (min $gmin)" awk -v a="$gmin" -v b="$gmax" 'BEGIN { exit !(a >= 0.5 && b <= 1.5) }'
check "no WATCHDOG=1 before READY=1" bash -c "[ \"\$(head -n 1 '$e2e_tmp/wd1')\" ] && awk -v a='${t_ready:-0}' -v b=\"\$(head -n 1 '$e2e_tmp/wd1')\" 'BEGIN { exit !(a <= b + 0.001) }'"

# ---- 2. the same boot, then the next boot -----------------------------------------
echo "- 2. serve restarted in the same boot (WATCHDOG_PID names another process)"
serve_env=(NOTIFY_SOCKET="$sock" WATCHDOG_USEC=2000000 WATCHDOG_PID=1)
serve_start sd2 serve --node node-2 --max-parallel 0 --on-shutdown --grace-period 1
serve_env=()
pid2=$serve_pid
check "READY=1 from the restarted daemon" wait_until 20 has_note "$pid2" '^READY=1$'
check "it holds an inhibitor again" wait_until 10 held_is $((held0 + 1))
sleep 3
check_eq "same boot: node-2 stays drained" drained "$(node_state node-2)"
check_eq "same boot: the request stays drain" drain "$(node_ann node-2 drainer.io/request)"
check_eq "no WATCHDOG=1 when WATCHDOG_PID is another process" "" "$(notes "$pid2" '^WATCHDOG=')"
serve_stop sd2
check_eq "SIGTERM: exit 0" 0 "$serve_rc"
check "its inhibitor is let go when it exits" wait_until 10 held_is "$held0"

echo "- after a reboot: drainer.io/shutdown-boot-id=$other_boot (another boot's id)"
kubectl annotate --overwrite node node-2 drainer.io/shutdown-boot-id="$other_boot" >/dev/null
serve_env=(NOTIFY_SOCKET="$sock")
serve_start sd3 serve --node node-2 --max-parallel 0 --on-shutdown --grace-period 1
serve_env=()
if ! check "the daemon of the next boot restores node-2 (driver, slice, schedulable, no drainer.io annotation; <= 60 s)" \
	wait_until 60 node_restored node-2; then
	echo "    annotations: $(node_drainer_anns node-2)"
	serve_log sd3 30
fi
check_eq "no drainer.io/shutdown-boot-id left" "" "$(node_ann node-2 drainer.io/shutdown-boot-id)"
check "it asked for the undo itself (a version with drainer.io/request=uncordon)" jq_true -s 'any(.[]; .request == "uncordon")' "$e2e_tmp/n2.watch"
check "it holds an inhibitor for the next shutdown" wait_until 10 held_is $((held0 + 1))
serve_stop sd3
check_eq "SIGTERM: exit 0" 0 "$serve_rc"
nodes_watch_stop
echo "  node-2 phases: $(phases_seen "$e2e_tmp/n2.watch")"
check_node_invariants "$e2e_tmp/n2.watch" false

# ---- 3. a drain longer than logind's delay ----------------------------------------
echo "- 3. serve --node node-1 --on-shutdown; PrepareForShutdown(true) with the demo workload"
# The demo's holders end within a second of their eviction on a fast machine, and the
# drain with them: a claim holder with an 8 s preStop sleep makes it outlast logind's
# delay whatever the machine.
kubectl create namespace "$ns" >/dev/null
wait_until 30 kubectl -n "$ns" get serviceaccount default
{ claim_template "$ns" one-gpu; cat <<YAML; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: Deployment
metadata: {name: slow-node-1, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: slow-node-1}}
  template:
    metadata: {labels: {app: slow-node-1}}
    spec:
      nodeSelector: {kubernetes.io/hostname: node-1}
      terminationGracePeriodSeconds: 30
      containers:
      - name: c
        image: registry.example.com/trainer:v1
        resources: {claims: [{name: gpu}]}
        lifecycle: {preStop: {sleep: {seconds: 8}}}
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
YAML
slow_running() { [ "$(kubectl -n "$ns" get pods -l app=slow-node-1 -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]; }
check "a claim holder with an 8 s preStop sleep Running on node-1" wait_until 60 slow_running
read -r held0 rel0 _ <<<"$(inhibitors)"
nodes_watch_start "$e2e_tmp/n1.watch" node-1
serve_env=(NOTIFY_SOCKET="$sock")
serve_start sd4 serve --node node-1 --max-parallel 0 --on-shutdown
serve_env=()
check "READY=1" wait_until 20 has_note "$serve_pid" '^READY=1$'
check "inhibitor held" wait_until 10 held_is $((held0 + 1))
t_emit=$(now)
emit_prepare_for_shutdown true
t_rel=
end=$((SECONDS + 15))
while [ "$SECONDS" -lt "$end" ]; do
	if [ "$(inhibitors_released)" -gt "$rel0" ]; then t_rel=$(now); state_at_rel=$(node_state node-1); break; fi
	sleep 0.05
done
if [ -n "$t_rel" ]; then
	d=$(fsub "$t_rel" "$t_emit")
	check "the lock was let go shortly before logind's 5 s (after $d s)" awk -v d="$d" 'BEGIN { exit !(d >= 2 && d < 5) }'
	check "... while the drain was still running (state then: $state_at_rel)" [ "$state_at_rel" != drained ]
else
	fail "the lock was not released within 15 s of PrepareForShutdown (stand-in: $(inhibitors))"
	serve_log sd4 30
fi
check "the drain went on to drained (<= 90 s)" wait_until 90 state_is node-1 drained
kubectl annotate --overwrite node node-1 drainer.io/request=uncordon >/dev/null
in_service() { [ -z "$(node_state "$1")" ] && [ "$(node_unschedulable "$1")" = false ] && [ "$(node_tainted "$1")" = false ] && driver_running "$1" && slice_published "$1"; }
if ! check "node-1 back in service on request=uncordon (schedulable, driver, slice, no drainer.io/state; <= 60 s)" wait_until 60 in_service node-1; then
	serve_log sd4 20
fi
left=$(node_drainer_anns node-1)
if [ "$left" = "{}" ]; then
	pass "uncordon cleared every drainer.io/ annotation of node-1"
else
	fail "uncordon cleared every drainer.io/ annotation of node-1: left $left"
	serve_log sd4 6 'shutdown|uncordon|schedulable'
fi
serve_stop sd4
check_eq "SIGTERM: exit 0" 0 "$serve_rc"
nodes_watch_stop
echo "  node-1 phases: $(phases_seen "$e2e_tmp/n1.watch")"

# ---- 4. --driver-stop systemd:UNIT ------------------------------------------------
echo "- 4. drain/uncordon node-3 with --driver-stop systemd:dra-driver.service"
kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
kubectl create namespace "$ns" >/dev/null
wait_until 30 kubectl -n "$ns" get serviceaccount default
{ claim_template "$ns" one-gpu; cat <<YAML; } | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-node-3, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: gpu-node-3}}
  template:
    metadata: {labels: {app: gpu-node-3}}
    spec:
      nodeSelector: {kubernetes.io/hostname: node-3}
      containers:
      - name: c
        image: registry.example.com/gpu-job:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
YAML
n3_running() { [ "$(kubectl -n "$ns" get pods -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 1 ]; }
check "a claim-holding pod runs on node-3" wait_until 60 n3_running
claims_on_node node-3 >"$e2e_tmp/n3.claims.json"
pods_on_node node-3 "$e2e_tmp/n3.pods.json"
classify_pods "$e2e_tmp/n3.pods.json" >"$e2e_tmp/n3.classes.json"
check "node-3 has a claim ($(jq -c '[.[].name]' "$e2e_tmp/n3.claims.json"))" [ "$(jq length "$e2e_tmp/n3.claims.json")" -ge 1 ]
check_eq "unit dra-driver.service active before" active "$(unit_state dra-driver.service)"
driver3=$(driver_pods_json node-3 | jq -r '.items[0].metadata.uid')
drainer_run sddrain drain node-3 --driver-stop systemd:dra-driver.service --timeout 90s
check_rc "drain node-3 --driver-stop systemd:dra-driver.service" 0 sddrain
audit_window "$run_start" "$e2e_tmp/sd.audit"
check_eq "the unit is inactive after the drain" inactive "$(unit_state dra-driver.service)"
check_eq "drainer.io/state=drained" drained "$(node_state node-3)"
check_eq "no ResourceClaim on node-3" "[]" "$(claims_on_node node-3)"
check "drainer.io/driver-stop records the unit ($(node_ann node-3 drainer.io/driver-stop))" \
	bash -c "grep -q 'systemd' <<<'$(node_ann node-3 drainer.io/driver-stop)' && grep -q 'dra-driver.service' <<<'$(node_ann node-3 drainer.io/driver-stop)'"
check "the driver pod of node-3 still runs (only the unit was stopped)" driver_running node-3
check_eq "... the same pod (uid)" "$driver3" "$(driver_pods_json node-3 | jq -r '.items[0].metadata.uid')"
check_eq "drainer evicted or deleted no pod in dra-system" "" "$(drainer_writes "$e2e_tmp/sd.audit" | grep ' pods' | grep ' dra-system/' || true)"
mapfile -t stops < <(bus_calls StopUnit dra-driver.service)
check_eq "one StopUnit(dra-driver.service) on the bus" 1 "${#stops[@]}"
if [ "${#stops[@]}" -ge 1 ]; then
	t_stop=${stops[0]}
	t_released=$(jq -r --argjson claims "$(cat "$e2e_tmp/n3.claims.json")" "$ep_jq"'
		[.[] | select(.user.username == "system:kube-controller-manager" and .objectRef.resource == "resourceclaims"
			and (.verb | IN("update", "patch", "delete")) and ("\(.objectRef.namespace)/\(.objectRef.name)" as $k | $claims | map("\(.ns)/\(.name)") | index($k)))
		| .stageTimestamp | ep] | max // empty' "$e2e_tmp/sd.audit")
	t_gone=$(jq -r --argjson pods "$(cat "$e2e_tmp/n3.classes.json")" "$ep_jq"'
		[.[] | select((.user.username | test("^(drainer-sim|system:node:.+)$")) and .verb == "delete" and .objectRef.resource == "pods" and .objectRef.subresource == null
			and ("\(.objectRef.namespace)/\(.objectRef.name)" as $k | $pods | map(select(.cls | startswith("holder"))) | map("\(.ns)/\(.name)") | index($k)))
		| .stageTimestamp | ep] | max // empty' "$e2e_tmp/sd.audit")
	if [ -n "$t_released" ] && [ -n "$t_gone" ]; then
		check "StopUnit came after the claim holder was gone (+$(fsub "$t_stop" "$t_gone") s) and its claims released (+$(fsub "$t_stop" "$t_released") s)" \
			bash -c "awk -v s='$t_stop' -v a='$t_released' -v b='$t_gone' 'BEGIN { exit !(s > a && s > b) }'"
	else
		fail "cannot find the claim release (${t_released:-none}) or the holder's deletion (${t_gone:-none}) in the audit log"
	fi
fi
drainer_run sdnoflag uncordon node-3
check_rc "uncordon node-3 without --driver-stop systemd:dra-driver.service: refused" 1 sdnoflag
check "... it prints the command to run with the flag" \
	grep -q -- "run: drainer uncordon node-3 --driver-stop systemd:dra-driver.service" "$e2e_tmp/sdnoflag.err"
sleep 0.3
check_eq "... and started nothing" "" "$(bus_calls StartUnit dra-driver.service)"
check_eq "... node-3 stays drained" drained "$(node_state node-3)"
# The file serve reads (its own keys included: the drain verbs skip them).
cat >"$e2e_tmp/drainer.yaml" <<'YAML'
node: node-3
max-parallel: 1
on-shutdown: false
metrics-addr: ""
driver-selector:
  - app.kubernetes.io/component=kubeletplugin
driver-stop: systemd:dra-driver.service
YAML
drainer_run sduncordon uncordon node-3 --config "$e2e_tmp/drainer.yaml"
check_rc "uncordon node-3 --config FILE (driver-stop: systemd:dra-driver.service)" 0 sduncordon
check_eq "the unit is active again" active "$(unit_state dra-driver.service)"
mapfile -t starts < <(bus_calls StartUnit dra-driver.service)
check_eq "one StartUnit(dra-driver.service) on the bus" 1 "${#starts[@]}"
[ "${#starts[@]}" -lt 1 ] || [ "${#stops[@]}" -lt 1 ] || check "StartUnit after StopUnit" fle "${stops[0]}" "${starts[0]}"
check "node-3 back in service" wait_until 30 node_restored node-3
check_eq "no drainer.io annotation left on node-3" "{}" "$(node_drainer_anns node-3)"

# ---- 5. a recorded unit the configuration does not name ---------------------------
echo "- 5. drainer.io/driver-stop names reboot.target"
kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
check_eq "the stand-in has reboot.target, inactive (StartUnit would start it)" inactive "$(unit_state reboot.target)"
kubectl annotate --overwrite node node-3 drainer.io/state=restore-drivers \
	'drainer.io/driver-stop=[{"strategy":"systemd","unit":"reboot.target"}]' >/dev/null
delete_node_events node-3
# what uncordon could change: all but drainer.io/message
fp_of() { node_fingerprint node-3 | jq -c 'del(.ann["drainer.io/message"])'; }
fp=$(fp_of)
blocked() { node_events node-3 "$e2e_tmp/n3ev.json"; jq '[.[] | select(.reason == "DrainerBlocked") | .count] | add // 0' "$e2e_tmp/n3ev.json"; }
refused_run() { # TAG EXPECTED-RERUN ARGS...
	local tag=$1 rerun=$2 b
	shift 2
	b=$(blocked)
	drainer_run "$tag" uncordon node-3 "$@"
	check_rc "uncordon node-3 $*: refused" 1 "$tag"
	check "... it prints: run: $rerun" grep -qF -- "run: $rerun" "$e2e_tmp/$tag.err"
	audit_window "$run_start" "$e2e_tmp/$tag.audit"
	# (the message once: a run that finds it written already writes only the Event)
	check_eq "... its only writes: one Event and at most the Node's message" "" \
		"$(drainer_writes "$e2e_tmp/$tag.audit" | grep -v '^create events default/' | grep -vx 'patch nodes /node-3')"
	check_eq "... one Event" 1 "$(drainer_writes "$e2e_tmp/$tag.audit" | grep -c '^create events default/')"
	check_eq "... nothing else on node-3 changed" "$fp" "$(fp_of)"
	check_eq "... one more DrainerBlocked Event" $((b + 1)) "$(blocked)"
}
refused_run forged1 "drainer uncordon node-3 --driver-stop systemd:reboot.target"
check "drainer.io/message says why" bash -c "grep -q 'reboot.target' <<<\"\$(kubectl get node node-3 -o json | jq -r '.metadata.annotations[\"drainer.io/message\"]')\""
refused_run forged2 "drainer uncordon node-3 --driver-stop systemd:reboot.target" --driver-stop systemd:dra-driver.service
refused_run forged3 "drainer uncordon node-3 --config $e2e_tmp/drainer.yaml --driver-stop systemd:reboot.target" --config "$e2e_tmp/drainer.yaml"
check_eq "the DrainerBlocked Event says why" 1 "$(jq '[.[] | select(.reason == "DrainerBlocked" and (.message | contains("reboot.target")))] | length | if . > 0 then 1 else 0 end' "$e2e_tmp/n3ev.json")"

echo "- 5. serve --node node-3 with the same annotations"
b=$(blocked)
a5=$(audit_lines)
serve_start sd5 serve --node node-3 --max-parallel 0 --metrics-addr ""
more_blocked() { [ "$(blocked)" -gt "$1" ]; }
check "serve refuses: a DrainerBlocked Event" wait_until 20 more_blocked "$b"
sleep 4
check "serve keeps running" serve_alive sd5
audit_since "$a5" "$e2e_tmp/sd5.audit"
engine_runs() { jq '[.[] | select(.userAgent | startswith("drainer/")) | select(.verb == "list" and .objectRef.resource == "pods")] | length' "$1"; }
check_eq "it reported once and waits: one engine run in 4 s (lists of node-3's pods)" 1 "$(engine_runs "$e2e_tmp/sd5.audit")"
check_eq "... one DrainerBlocked Event" $((b + 1)) "$(blocked)"
check_eq "... nothing else on node-3 changed" "$fp" "$(fp_of)"
echo "  a change of the annotations: the record says taint"
kubectl annotate --overwrite node node-3 'drainer.io/driver-stop=[{"strategy":"taint"}]' >/dev/null
if ! check "serve acts on the change: node-3 back in service (<= 30 s)" wait_until 30 node_restored node-3; then
	serve_log sd5 20
fi
serve_stop sd5
check_eq "SIGTERM: exit 0" 0 "$serve_rc"
sleep 0.3
check_eq "no StartUnit(reboot.target) on the bus, ever" "" "$(bus_calls StartUnit reboot.target)"
check_eq "reboot.target untouched (no StopUnit either)" "" "$(bus_calls StopUnit reboot.target)"
check_eq "reboot.target still inactive" inactive "$(unit_state reboot.target)"

# ---- 6. a unit that fails to start: backoff ---------------------------------------
echo "- 6. a recorded, configured unit whose start job fails: broken.service"
kubectl cordon node-3 >/dev/null
kubectl annotate --overwrite node node-3 drainer.io/state=restore-drivers drainer.io/was-unschedulable=false \
	'drainer.io/driver-stop=[{"strategy":"systemd","unit":"broken.service"}]' >/dev/null
drainer_run broken uncordon node-3 --driver-stop systemd:broken.service --timeout 8s
check_rc "uncordon --driver-stop systemd:broken.service --timeout 8s: timed out" 3 broken
sleep 0.3
mapfile -t starts < <(bus_calls StartUnit broken.service)
gaps=$(printf '%s\n' "${starts[@]}" | awk 'NR > 1 { printf "%s%.2f", sep, $1 - p; sep = " " } { p = $1 }')
echo "  ${#starts[@]} StartUnit(broken.service) calls in 8 s; gaps: $gaps s"
check "retried with backoff: 3 to 6 StartUnit calls in 8 s (${#starts[@]})" bash -c "[ ${#starts[@]} -ge 3 ] && [ ${#starts[@]} -le 6 ]"
check "each gap at least 1.5 times the one before ($gaps)" \
	awk -v g="$gaps" 'BEGIN { n = split(g, a, " "); for (i = 2; i <= n; i++) if (a[i] < 1.5 * a[i - 1]) exit 1; exit !(n >= 2) }'
check "drainer says what fails (starting unit broken.service: failed ...)" grep -q 'unit broken.service: failed' "$e2e_tmp/broken.err"
reset_node node-3
finish
