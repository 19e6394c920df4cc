#!/usr/bin/env bash
# The checkers and recorders of lib.sh against made-up inputs (no cluster needed, a
# few seconds): each one fails on an empty input, a missing one, one whose recorder
# did not start or ended early, and on made-up inputs that break its rule, and
# passes on a made-up input that keeps it (so the failures are not a checker that
# always fails). The scripts' own checkers have self-tests of their own
# (test-faults.sh, test-apiserver-restart.sh, test-crash-random.sh).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
t=$e2e_tmp
# Nothing here talks to a cluster or writes outside $t: the audit log and kubectl that
# lib.sh would use are made-up ones in $t (the real audit log is never opened).
AUDIT=$t/audit.log
KUBECTL=$t/kubectl-broken
printf '#!/bin/sh\nexit 1\n' >"$KUBECTL" && chmod +x "$KUBECTL"

# outcome CMD...: "PASSED FAILED" checks that CMD records, run in a subshell with
# fresh counters (its output goes to $t/outcome.log).
outcome() {
	(
		e2e_checks=0 e2e_failed=0
		"$@" >"$t/outcome.log" 2>&1
		echo "$((e2e_checks - e2e_failed)) $e2e_failed"
	)
}
expect_fail() { # DESCRIPTION CMD...: CMD records at least one failed check
	local what=$1 r
	shift
	r=$(outcome "$@")
	if [ "${r#* }" -gt 0 ]; then
		pass "$what: fails ($(grep -m1 'FAIL' "$t/outcome.log" | sed 's/^ *FAIL: //' | cut -c1-110))"
	else
		fail "$what: passed ($r): $(head -c 300 "$t/outcome.log")"
	fi
}
expect_pass() { # DESCRIPTION CMD...: CMD records checks, none failed
	local what=$1 r
	shift
	r=$(outcome "$@")
	if [ "${r#* }" = 0 ] && [ "${r% *}" -gt 0 ]; then
		pass "$what: passes (${r% *} checks)"
	else
		fail "$what: expected to pass, got $r: $(grep -m3 FAIL "$t/outcome.log")"
	fi
}

# ---- jq_checks -----------------------------------------------------------------------
echo '[{"a": 1}]' >"$t/one.json"
: >"$t/empty.json"
echo '[]' >"$t/nothing.json"
expect_pass "jq_checks: a verdict on an input" jq_checks '"ok \(length) item"' "$t/one.json"
expect_fail "jq_checks: an empty input file" jq_checks '"ok \(length) items"' "$t/empty.json"
expect_fail "jq_checks: a missing input file" jq_checks '"ok \(length) items"' "$t/missing.json"
expect_fail "jq_checks: an input of []" jq_checks '"ok \(length) items"' "$t/nothing.json"
expect_fail "jq_checks -s: an empty input file" jq_checks -s '"ok \(length) items"' "$t/empty.json"
expect_fail "jq_checks: an empty --slurpfile" jq_checks -n --slurpfile x "$t/empty.json" '"ok \($x | length)"'
expect_fail "jq_checks: a program that prints no verdict" jq_checks '.[] | select(.a == 2) | "ok found"' "$t/one.json"
expect_fail "jq_checks: a jq error" jq_checks '.[] | .a.b' "$t/one.json"
expect_pass "jq_checks: an input from a pipe" jq_checks '"ok \(length) item"' <(echo '[{"a": 1}]')
expect_fail "jq_checks: an empty pipe" jq_checks '"ok \(length) items"' <(true)
cp "$t/one.json" "$t/dead.json" && echo "the watch did not start" >"$t/dead.json.failed"
expect_fail "jq_checks: an input whose recorder failed" jq_checks '"ok \(length) item"' "$t/dead.json"

# ---- the node watch recorders and check_node_invariants --------------------------------
ts() { printf '2026-01-01T00:00:%02d.000000Z' "$1"; }
version() { # RV STATE UNSCHED TAINT [WAS]: one node_watch_jq line
	jq -nc --arg rv "$1" --arg s "$2" --argjson u "$3" --argjson tn "$4" --arg was "${5:-false}" \
		'{rv: $rv, state: $s, unsched: $u, taint: $tn, was: (if $s == "" then null else $was end),
		  started: (if $s == "" then null else "2026-01-01T00:00:00Z" end)}'
}
{
	version 1 "" false false
	for p in cordon evict-claim-holders evict-rest wait-released stop-drivers drained; do version 2 "$p" true true; done
	version 3 restore-drivers true false
	version 4 uncordon true false
	version 5 "" false false
} >"$t/good.watch"
expect_pass "check_node_invariants: a drain and its undo" check_node_invariants "$t/good.watch" false
expect_fail "check_node_invariants: an empty watch" check_node_invariants "$t/empty.json" false
expect_fail "check_node_invariants: a missing watch" check_node_invariants "$t/missing.watch" false
{ version 1 "" false false; version 2 "" false false; } >"$t/idle.watch"
expect_fail "check_node_invariants: a watch that saw no drain phase" check_node_invariants "$t/idle.watch" false
{ version 1 "" false false; version 2 cordon true true; version 3 evict-rest true false; } >"$t/untainted.watch"
expect_fail "check_node_invariants: a drain phase without the taint" check_node_invariants "$t/untainted.watch" false
{ version 1 drained true true; version 2 restore-drivers false false; } >"$t/uncordoned.watch"
expect_fail "check_node_invariants: uncordoned while restoring" check_node_invariants "$t/uncordoned.watch" false
expect_fail "check_node_invariants: was-unschedulable other than expected" check_node_invariants "$t/good.watch" true
cp "$t/good.watch" "$t/gooddead.watch" && echo "ended early" >"$t/gooddead.watch.failed"
expect_fail "check_node_invariants: a watch whose recorder failed" check_node_invariants "$t/gooddead.watch" false

# A kubectl that cannot watch (the recorder does not start), and one that prints the
# node once and exits (the recorder ends before it is stopped).
printf '#!/bin/sh\necho %s\n' "'{\"metadata\":{\"name\":\"node-1\",\"resourceVersion\":\"1\"}}'" >"$t/kubectl-once" && chmod +x "$t/kubectl-once"
no_start() { # START STOP FILE ARGS...
	local start=$1 stop=$2 file=$3
	shift 3
	KUBECTL=$t/kubectl-broken
	wait_until() { return 1; } # (do not wait the 10 s: the watch prints nothing)
	"$start" "$@"
	"$stop"
	check_node_invariants "$file" false
}
ends_early() { # START STOP FILE ARGS...
	local start=$1 stop=$2 file=$3
	shift 3
	KUBECTL=$t/kubectl-once
	"$start" "$@"
	sleep 0.5
	"$stop"
}
expect_fail "node_watch_start: a watch that does not start, and check_node_invariants on it" no_start node_watch_start node_watch_stop "$t/nw1.watch" node-1 "$t/nw1.watch"
check "... it left $t/nw1.watch.failed" test -e "$t/nw1.watch.failed"
expect_fail "node_watch_stop: a watch that ended before it was stopped" ends_early node_watch_start node_watch_stop "$t/nw2.watch" node-1 "$t/nw2.watch"
expect_fail "nodes_watch_start: a watch that does not start" no_start nodes_watch_start nodes_watch_stop "$t/nw3.watch" "$t/nw3.watch" node-1
expect_fail "nodes_watch_stop: a watch that ended before it was stopped" ends_early nodes_watch_start nodes_watch_stop "$t/nw4.watch" "$t/nw4.watch" node-1
# (the lease watch counts as started when the audit log shows its watch request)
leases_no_start() {
	KUBECTL=$t/kubectl-broken
	: >"$AUDIT"
	wait_until() { "$@"; }
	leases_watch_start drainer-test "$t/lw.watch"
	leases_watch_stop
}
expect_fail "leases_watch_start: a watch the API server never saw" leases_no_start

# ---- the audit-log helpers -------------------------------------------------------------
line() { # TIME USER-AGENT VERB RESOURCE [SUBRESOURCE] [NS/NAME] [CODE] [USER] [EXTRA-JSON]
	local extra=${9:-}
	jq -nc --arg t "$1" --arg ua "$2" --arg v "$3" --arg r "$4" --arg sub "${5:-}" --arg nn "${6:-/}" --argjson c "${7:-200}" \
		--arg u "${8:-admin}" --argjson x "${extra:-null}" '{auditID: "\($t)-\($v)-\($nn)", stage: "ResponseComplete", userAgent: $ua,
		user: {username: $u}, verb: $v, requestReceivedTimestamp: $t, stageTimestamp: $t, responseStatus: {code: $c},
		objectRef: ({resource: $r, namespace: ($nn | split("/")[0]), name: ($nn | split("/")[1])} + (if $sub == "" then {} else {subresource: $sub} end))} + ($x // {})'
}
no_audit_log() { # FUNCTION
	AUDIT=$t/no-such-audit.log
	"$1" 0 "$t/w.json"
}
expect_fail "audit_window: no audit log" no_audit_log audit_window
expect_fail "audit_since: no audit log" no_audit_log audit_since
# An empty window (nothing happened) is no failure by itself; the checkers over it fail.
empty_window() {
	line "$(ts 1)" kubectl/x get nodes >"$AUDIT"
	audit_window 1 "$t/w.json"
	check_eq "the window is empty" "[]" "$(jq -c . "$t/w.json")"
}
expect_pass "audit_window: an empty window is just empty" empty_window
expect_fail "jq_checks: an empty window" jq_checks '"ok \(length) events"' "$t/w.json"
# drainer_writes: a window without drainer is not "no write".
line "$(ts 1)" kubectl/x patch nodes "" /node-1 | jq -s . >"$t/nodrainer.json"
line "$(ts 1)" drainer/x get nodes "" /node-1 | jq -s . >"$t/readonly.json"
check_eq "drainer_writes: a read-only run of drainer wrote nothing" "" "$(drainer_writes "$t/readonly.json")"
check "drainer_writes: a window without any request of drainer is not \"no write\"" [ -n "$(drainer_writes "$t/nodrainer.json")" ]

# ---- check_order and check_grace ---------------------------------------------------------
# node-1 holds a claim holder demo/h (claim demo/c), a pod without claims demo/r, and the
# driver dra-system/d. In order: h evicted, h gone, c released, r evicted, r gone, d evicted.
jq -nc '[{ns: "demo", name: "h", uid: "u-h", cls: "holder"}, {ns: "demo", name: "r", uid: "u-r", cls: "rest"},
	{ns: "dra-system", name: "d", uid: "u-d", cls: "driver"}]' >"$t/pods.json"
jq -nc '[{ns: "demo", name: "c", uid: "u-c"}]' >"$t/claims.json"
evict() { # TIME NS/NAME [EXTRA-JSON]: drainer's eviction (the pod's own grace period unless EXTRA says)
	line "$(ts "$1")" drainer/x create pods eviction "$2" 201 admin "${3:-"{\"requestObject\":{\"deleteOptions\":{}}}"}"
}
gone() { line "$(ts "$1")" sim/x delete pods "" "$2" 200 drainer-sim; }
release() { line "$(ts "$1")" kcm/x update resourceclaims status "$2" 200 system:kube-controller-manager; }
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; evict 2 demo/h; gone 3 demo/h; release 4 demo/c
  evict 5 demo/r; gone 6 demo/r; evict 7 dra-system/d; } | jq -s . >"$t/good.audit"
expect_pass "check_order: claim holder, release, the rest, then the driver" check_order "$t/good.audit" "$t/pods.json" "$t/claims.json" node-1
expect_pass "check_grace: the claim holder evicted with its own grace period" check_grace "$t/good.audit" "$t/pods.json"
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; evict 2 demo/h; evict 3 dra-system/d; gone 4 demo/h; release 5 demo/c
  evict 6 demo/r; gone 7 demo/r; } | jq -s . >"$t/early-driver.audit"
expect_fail "check_order: the driver evicted before the claim holder was gone" check_order "$t/early-driver.audit" "$t/pods.json" "$t/claims.json" node-1
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; evict 2 demo/r; gone 3 demo/r; evict 4 demo/h; gone 5 demo/h; release 6 demo/c
  evict 7 dra-system/d; } | jq -s . >"$t/rest-first.audit"
expect_fail "check_order: a pod without claims evicted before the claim holder" check_order "$t/rest-first.audit" "$t/pods.json" "$t/claims.json" node-1
# After an API server restart: the first eviction of h and the kubelet's DELETE are not
# in the log (in flight when it was killed); drainer's resent eviction was answered 404
# (h gone): the driver may go after that answer, not before it.
notfound() { line "$(ts "$1")" drainer/x create pods eviction "$2" 404 admin '{"requestObject":{"deleteOptions":{}}}'; }
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; notfound 3 demo/h; release 4 demo/c
  evict 5 demo/r; gone 6 demo/r; evict 7 dra-system/d; } | jq -s . >"$t/notfound.audit"
expect_pass "check_order: a claim holder's resent eviction answered 404 (gone) before the driver's" check_order "$t/notfound.audit" "$t/pods.json" "$t/claims.json" node-1
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; evict 2 demo/h; gone 3 demo/h; release 4 demo/c; evict 5 dra-system/d
  notfound 6 demo/r; } | jq -s . >"$t/notfound-late.audit"
expect_fail "check_order: the driver evicted before the 404 that shows a pod gone" check_order "$t/notfound-late.audit" "$t/pods.json" "$t/claims.json" node-1
check "... on the driver rule" grep -q 'FAIL: the driver was evicted before these pods were gone: demo/r' "$t/outcome.log"
jq 'map(if .responseStatus.code == 404 then .responseStatus.code = 429 else . end)' "$t/notfound.audit" >"$t/refused.audit"
expect_fail "check_order: a claim holder's only eviction refused (429), never seen gone" check_order "$t/refused.audit" "$t/pods.json" "$t/claims.json" node-1
expect_fail "check_order: an empty audit window" check_order "$t/nothing.json" "$t/pods.json" "$t/claims.json" node-1
expect_fail "check_order: no pods before the drain" check_order "$t/good.audit" "$t/nothing.json" "$t/claims.json" node-1
expect_fail "check_order: no claim on the node before the drain" check_order "$t/good.audit" "$t/pods.json" "$t/nothing.json" node-1
expect_fail "check_order: a missing pods file" check_order "$t/good.audit" "$t/missing.json" "$t/claims.json" node-1
jq 'map(select(.userAgent | startswith("drainer/") | not))' "$t/good.audit" >"$t/nodrainer.audit"
expect_fail "check_order: a window without drainer's requests" check_order "$t/nodrainer.audit" "$t/pods.json" "$t/claims.json" node-1
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; evict 2 demo/h '{"requestObject":{"deleteOptions":{"gracePeriodSeconds":0}}}'
  gone 3 demo/h; } | jq -s . >"$t/grace0.audit"
expect_fail "check_grace: a claim holder evicted with grace period 0" check_grace "$t/grace0.audit" "$t/pods.json"
{ line "$(ts 1)" drainer/x patch nodes "" /node-1; evict 2 demo/h; } | jq -s . >"$t/notgone.audit"
expect_fail "check_grace: a claim holder the kubelet never deleted (removed at once?)" check_grace "$t/notgone.audit" "$t/pods.json"
expect_fail "check_grace: an empty audit window" check_grace "$t/nothing.json" "$t/pods.json"
jq 'map(select(.cls != "holder"))' "$t/pods.json" >"$t/noholder.json"
expect_fail "check_grace: no claim holder before the drain" check_grace "$t/good.audit" "$t/noholder.json"

# ---- check_rate ----------------------------------------------------------------------
for i in $(seq 0 7); do line "2026-01-01T00:00:01.0${i}0000Z" drainer/x get nodes; done | jq -s . >"$t/burst.audit"
for i in $(seq 0 5); do line "2026-01-01T00:00:0$((i + 1)).000000Z" drainer/x get nodes; done | jq -s . >"$t/slow.audit"
expect_fail "check_rate: 8 requests in 70 ms at qps 10 burst 5" check_rate "$t/burst.audit" 10 5
expect_pass "check_rate: 6 requests 1 s apart" check_rate "$t/slow.audit" 10 5
expect_fail "check_rate: an empty window" check_rate "$t/nothing.json" 10 5
expect_fail "check_rate: a window without drainer's requests" check_rate "$t/nodrainer.json" 10 5
# After a restart (R = 00:00:10, the server's first answer S at 00:00:12), at qps 5 burst 2:
# requests held in the kernel (5 at S), a relist stamped late and bunched (3 within 20 ms),
# then one per 0.2 s: what a conforming client sends, placed back from R. The same with
# 20 requests at S, or a burst of 4 two seconds later, breaks the rule.
at() { printf '2026-01-01T00:00:%09.6fZ' "$1"; }
restart='["2026-01-01T00:00:10.000000Z"]'
{ line "$(at 12.0)" kubelet/x get pods "" / 200 system:node:node-2
  for x in 12.000 12.001 12.002 12.003 12.004 12.240 12.241 12.260 12.4 12.6 12.8 13.0 13.2 13.4; do line "$(at "$x")" drainer/x get nodes; done; } |
	jq -s . >"$t/restart.audit"
expect_pass "check_rate: held requests and a late relist after a restart, then one per 1/qps" check_rate "$t/restart.audit" 5 2 drainer/ "$restart"
expect_fail "check_rate: the same without the restart (a burst of 5 at burst 2)" check_rate "$t/restart.audit" 5 2 drainer/
{ line "$(at 12.0)" kubelet/x get pods "" / 200 system:node:node-2
  for i in $(seq 0 19); do line "$(at "12.0$(printf '%02d' "$i")")" drainer/x get nodes; done; } | jq -s . >"$t/restart-flood.audit"
expect_fail "check_rate: 20 requests at once after a restart 2 s before (qps 5 burst 2)" check_rate "$t/restart-flood.audit" 5 2 drainer/ "$restart"
{ cat "$t/restart.audit" | jq -c '.[]'; for x in 15.000 15.001 15.002 15.003; do line "$(at "$x")" drainer/x get nodes; done; } |
	jq -s . >"$t/restart-late.audit"
expect_fail "check_rate: a burst of 4 (burst 2) 3 s after the restarted server's first answer" check_rate "$t/restart-late.audit" 5 2 drainer/ "$restart"
# The first connection (START = 00:00:20, launch): a client at qps 5 burst 2 sends at
# 20.05 (2), 20.25, 20.45, ...; a 240 ms handshake makes the first three arrive together
# at 20.29: 8 requests in 0.96 s, one token too many for the window unless placed back
# from START. 6 at once at 20.29 are too many from START on too.
start=2026-01-01T00:00:20.000000Z
for x in 20.290 20.291 20.292 20.45 20.65 20.85 21.05 21.25; do line "$(at "$x")" drainer/x get nodes; done | jq -s . >"$t/conn.audit"
expect_pass "check_rate: the burst and the next request held by the first connection's handshake, placed back from the launch" check_rate "$t/conn.audit" 5 2 drainer/ '[]' "$start"
expect_fail "check_rate: the same without the launch time (8 requests in 0.96 s at qps 5 burst 2)" check_rate "$t/conn.audit" 5 2 drainer/
for i in 0 1 2 3 4 5; do line "$(at "20.29$i")" drainer/x get nodes; done | jq -s . >"$t/conn-flood.audit"
expect_fail "check_rate: 6 requests at once 0.29 s after the launch (qps 5 burst 2)" check_rate "$t/conn-flood.audit" 5 2 drainer/ '[]' "$start"
check "the made-up audit log and kubectl were the only ones used ($AUDIT, $KUBECTL)" \
	test "${AUDIT#"$t"/}" != "$AUDIT" -a "${KUBECTL#"$t"/}" != "$KUBECTL"
finish
