#!/usr/bin/env bash
# Crash and resume: SIGKILL drainer at CRASH_KILLS (30) random
# moments across `drain`, `uncordon`, `maintain` and `serve`, restart the same verb
# (for serve: a new daemon) and require that it ends in the right state:
#  - drain: exit 0, drainer.io/state=drained, no ResourceClaim on node-1, no driver
#    pod, node cordoned and tainted (serve: the same, the request kept);
#  - uncordon / maintain: exit 0, driver Running and Ready, slice published, node
#    schedulable (it was before), no drainer.io/ annotation, no drain taint.
# The moments are not phase-aligned: each kill sleeps a random delay drawn from the
# verb's run time measured once at the start (maintain: a random part, drain /
# command / undo, then a random moment in it; serve: from the annotation), so kills
# land mid-request, between patches, while evictions go out, during restore, before
# drainer did anything (state at kill = none), sometimes after it was done. Now and
# then the restarted run is killed too. Across each kill+resume the safety rules are
# checked from the audit log (check_order: claim holders first, the driver only after
# no claim remains; check_grace: never grace 0 for a claim holder; uncordon evicts
# nothing) and the node invariants from a node watch (cordoned, tainted and
# was-unschedulable=false in every drain phase; still cordoned while restoring).
# The demo workload is re-created before each drain. Ends with a table: kill#, verb,
# delay, state at kill, outcome. CRASH_SEED replays the same sequence of verbs,
# delays (as fractions of the measured times) and double kills. Runtime for 30 kills:
# about 4.5 minutes, plus up to 2.5 minutes per resume held by a budget (above).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_drainer
node=node-1
kills_target=${CRASH_KILLS:-30}
seed=${CRASH_SEED:-$((($(date +%s%N) / 1000 + $$) % 32768))}
RANDOM=$seed
echo "seed $seed (replay: CRASH_SEED=$seed CRASH_KILLS=$kills_target $0)"
t_start=$SECONDS
dargs=(--grace-period 1 --timeout 60s)
# A resumed run may take up to ~2.5 minutes: an eviction cut off by the kill after
# kube-apiserver updated the PodDisruptionBudget (with a context that outlives the
# request) but before it deleted the pod (with the request's, cancelled, context)
# leaves that running pod in the budget's status.disruptedPods until the disruption
# controller drops it after 2 minutes; the budget refuses its eviction until then.
# drainer cannot avoid that (see engine.c, busy_pdbs); the right end state is still
# reached, later, and the table notes such resumes ("resumed in N s").
resume_timeout=150s
slow_note=
export DRAINER_RUN_TIMEOUT=170
sargs=(serve --node "$node" --max-parallel 0 --grace-period 1 --metrics-addr "")
CMD_SECS=2

cleanup_crash_random() {
	local t
	[ -z "${bg_pid:-}" ] || kill -KILL "$bg_pid" 2>/dev/null
	for t in "${!serve_pids[@]}"; do serve_stop "$t" KILL; done
	reset_node "$node"
	demo
}
e2e_cleanup_hooks+=(cleanup_crash_random)

# ---- small helpers -------------------------------------------------------------
now() { date +%s.%N; }
secs_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }
# pick_delay LO HI: sets delay to a uniform random number of seconds in [LO, HI)
# and frac to the draw (0..9999). RANDOM is read here, in this shell, never in a
# command substitution (a subshell would not advance the sequence).
pick_delay() {
	frac=$((RANDOM % 10000))
	delay=$(awk -v a="$1" -v b="$2" -v r="$frac" 'BEGIN { d = a + (b - a) * r / 10000; if (d < 0) d = 0; printf "%.3f", d }')
}
# serve_end TAG [SIGNAL] / watch_end: serve_stop / nodes_watch_stop (lib.sh's exit
# hooks signal only pids still tracked, so ended daemons and watches are left alone).
serve_end() { serve_stop "$@"; }
watch_end() { nodes_watch_stop; }
# check_or_log TAG DESCRIPTION COMMAND...: check, showing the daemon's log on failure.
check_or_log() {
	local tag=$1 what=$2
	shift 2
	if "$@"; then pass "$what"; else
		fail "$what"
		serve_log "$tag" 20
	fi
}
# num X DEFAULT: X if it is a number, else DEFAULT.
num() { if [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then echo "$1"; else echo "$2"; fi; }
# coin PERCENT: true with that probability.
coin() { [ $((RANDOM % 100)) -lt "$1" ]; }

# The table.
row_verb=() row_delay=() row_state=() row_outcome=()
kills=0
pair_rows=()
add_row() { # VERB DELAY STATE
	row_verb[kills]=$1
	row_delay[kills]=$2
	row_state[kills]=$3
	row_outcome[kills]="?"
	pair_rows+=("$kills")
	kills=$((kills + 1))
}
# pair_begin / pair_end: the rows added in between get the outcome of the checks made
# in between ("ok (N checks)" or "FAIL: first failed check").
pair_begin() {
	pair_rows=()
	pair_failed0=$e2e_failed
	pair_checks0=$e2e_checks
	pair_first_fail=
}
fail() {
	e2e_checks=$((e2e_checks + 1))
	e2e_failed=$((e2e_failed + 1))
	echo "  FAIL: $*"
	fail_record "$*"
	[ -n "${pair_first_fail:-}" ] || pair_first_fail=$*
}
pair_end() { # [NOTE]
	local i out note=${1:-}
	[ -z "$slow_note" ] || note="${note:+$note; }$slow_note"
	slow_note=
	if [ "$e2e_failed" = "$pair_failed0" ]; then
		out="ok ($((e2e_checks - pair_checks0)) checks)${note:+; $note}"
	else
		out="FAIL ($((e2e_failed - pair_failed0))): ${pair_first_fail:0:90}"
	fi
	for i in "${pair_rows[@]}"; do row_outcome[i]=$out; done
}

# read_kill_state: kill_state = the Node's drainer.io/state now; "none" is told
# apart by the node watch ($cur_watch) since the run started ($run_t0): "none
# (nothing done yet)" when no phase showed, "none (undone)" after one did.
read_kill_state() {
	kill_state=$(node_state "$node")
	if [ -z "$kill_state" ]; then
		sleep 0.1 # the watch line of the last patch
		if jq -se --argjson t "$run_t0" 'any(.[]; .t >= $t and .state != "")' "$cur_watch" >/dev/null 2>&1; then
			kill_state="none (undone)"
		else
			kill_state="none (nothing done yet)"
		fi
	fi
}
# kill_after PID DELAY TAG: sleeps DELAY s, then SIGKILLs PID and any child of it
# (maintain's command). Sets kill_landed (1: killed, 0: it had exited on its own,
# kill_rc its status) and kill_state (the Node's drainer.io/state right after,
# "none" when there is none).
kill_after() {
	local kids
	sleep "$2"
	kids=$(pgrep -P "$1" 2>/dev/null | tr '\n' ' ')
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	kill_rc=$?
	# shellcheck disable=SC2086
	[ -z "${kids// /}" ] || kill -KILL $kids 2>/dev/null
	bg_pid=
	if [ "$kill_rc" = 137 ]; then kill_landed=1; else kill_landed=0; fi
	read_kill_state
	[ "$kill_landed" = 1 ] || kill_state="$kill_state (exited $kill_rc before the kill)"
	echo "  kill #$((kills + 1)) $3 after ${2}s: state at kill: $kill_state"
}
# resume TAG ARGS...: after the kills of a run, the same command again, to exit 0;
# unless the last kill came after the run had ended by itself: then that run's own
# status is the outcome (running maintain again would start a new maintenance).
resume() {
	local tag=$1
	shift
	if [ "$kill_landed" = 0 ]; then
		check_eq "$tag: the run the kill missed had exited 0 by itself" 0 "$kill_rc"
		return
	fi
	local a prev= args=()
	for a in "$@"; do
		[ "$prev" != --timeout ] || a=$resume_timeout
		args+=("$a")
		prev=$a
	done
	drainer_run "$tag.rerun" "${args[@]}"
	[ "${run_secs%.*}" -lt 30 ] || slow_note="resumed in ${run_secs}s"
	check_rc "$tag: the same command run again finishes" 0 "$tag.rerun"
}
# bg_drainer TAG ARGS...: starts drainer in the background; bg_pid.
kill_landed=1
bg_drainer() {
	local tag=$1
	shift
	run_t0=$(now)
	"$DRAINER" "$@" >"$e2e_tmp/$tag.out" 2>"$e2e_tmp/$tag.err" </dev/null &
	bg_pid=$!
}

# What is wrong with the node for each end state ("" when nothing).
drained_problems() {
	local j p=()
	j=$(node_json "$node")
	[ "$(jq -r '.metadata.annotations["drainer.io/state"] // ""' <<<"$j")" = drained ] ||
		p+=("state=$(jq -r '.metadata.annotations["drainer.io/state"] // "none"' <<<"$j")")
	[ "$(jq -r '.spec.unschedulable // false' <<<"$j")" = true ] || p+=("schedulable")
	[ "$(jq -r '[.spec.taints // [] | .[] | select(.key == "drainer.io/draining")] | length' <<<"$j")" = 1 ] || p+=("no drain taint")
	[ "$(claims_on_node "$node")" = "[]" ] || p+=("claims on node: $(claims_on_node "$node" | jq -r 'map(.name) | join(",")')")
	no_driver_pod "$node" || p+=("driver pod present")
	local IFS=';'
	echo "${p[*]}"
}
restored_problems() {
	local j p=()
	j=$(node_json "$node")
	[ "$(jq -c '.metadata.annotations // {} | with_entries(select(.key | startswith("drainer.io/")))' <<<"$j")" = "{}" ] ||
		p+=("annotations left: $(jq -c '.metadata.annotations // {} | with_entries(select(.key | startswith("drainer.io/"))) | keys' <<<"$j")")
	[ "$(jq -r '.spec.unschedulable // false' <<<"$j")" = false ] || p+=("unschedulable")
	[ "$(jq -r '[.spec.taints // [] | .[] | select(.key == "drainer.io/draining")] | length' <<<"$j")" = 0 ] || p+=("drain taint left")
	driver_running "$node" || p+=("driver not Running+Ready")
	slice_published "$node" || p+=("no slice")
	local IFS=';'
	echo "${p[*]}"
}

# check_invariants WATCH: check_node_invariants per drain episode of a node watch
# (an episode ends when drainer.io/state goes from a phase to none: a maintain killed
# after it had finished and then run again starts a new drain with a new started-at).
check_invariants() {
	local f=$1 k=0 n
	awk -v base="$f.ep" 'BEGIN { k = 0; prev = "" }
		{ s = $0; sub(/.*"state":"/, "", s); sub(/".*/, "", s)
		  if (s == "" && prev != "") { print > (base k); close(base k); k++; prev = s; next }
		  print > (base k); prev = s }' "$f"
	for n in "$f".ep*; do
		[ -s "$n" ] || continue
		grep -q '"state":"[a-z]' "$n" || continue
		check_node_invariants "$n" false
		k=$((k + 1))
	done
	rm -f "$f".ep*
	[ "$k" -le 1 ] || echo "  ($k drain episodes in this watch)"
	[ "$k" -ge 1 ] || fail "check_invariants: no drain episode in ${f##*/} ($(wc -l <"$f") versions): nothing to check"
}

# snapshot TAG: the pods and claims of node-1 before a drain, for check_order/grace.
snapshot() {
	pods_on_node "$node" "$e2e_tmp/$1.pods.json"
	classify_pods "$e2e_tmp/$1.pods.json" >"$e2e_tmp/$1.classes.json"
	claims_on_node "$node" >"$e2e_tmp/$1.claims.json"
}
# safety_drain TAG FROM_LINE WATCH: rules 1 and 5 over the audit window since
# FROM_LINE, up to the end of the first drain episode of the node watch WATCH (a
# maintain killed after it had finished and run again is a new drain of pods that
# came back: the snapshot taken before the first does not describe it).
safety_drain() {
	local cut
	audit_window "$2" "$e2e_tmp/$1.audit"
	# the first version without a phase after one with a phase, if a phase follows it
	cut=$(jq -rs '[foreach .[] as $v ({prev: "", hit: null}; {prev: $v.state, hit: (if .prev != "" and $v.state == "" then $v.t else null end)}; .hit // empty)] as $ends
		| if ($ends | length) > 0 and any(.[]; .state != "" and .t > $ends[0]) then $ends[0]
		  | (floor | todate | rtrimstr("Z")) + "." + ((. - floor) * 1000000 | floor | tostring | ("000000" + .)[-6:]) + "Z"
		  else empty end' "$3")
	if [ -n "$cut" ]; then
		echo "  (a second drain followed the end of the first at $cut: rules 1 and 5 checked over the first)"
		jq --arg c "$cut" 'map(select(.requestReceivedTimestamp < $c))' "$e2e_tmp/$1.audit" >"$e2e_tmp/$1.audit.cut"
		mv "$e2e_tmp/$1.audit.cut" "$e2e_tmp/$1.audit"
	fi
	check_order "$e2e_tmp/$1.audit" "$e2e_tmp/$1.classes.json" "$e2e_tmp/$1.claims.json" "$node"
	check_grace "$e2e_tmp/$1.audit" "$e2e_tmp/$1.classes.json"
}
# safety_undo TAG FROM_LINE: an undo evicts and deletes nothing.
safety_undo() {
	audit_window "$2" "$e2e_tmp/$1.audit"
	check "$1: drainer's requests of the undo are in the audit log" [ "$(drainer_requests "$e2e_tmp/$1.audit")" -gt 0 ]
	check_eq "$1: the undo evicted or deleted no pod" "" "$(drainer_writes "$e2e_tmp/$1.audit" | grep -E ' pods(/eviction)? ' || true)"
}

# fresh: node-1 in service with the demo workload on it.
fresh() {
	local p
	p=$(restored_problems)
	if [ -n "$p" ]; then
		fail "node-1 not in service before the next round ($p): resetting it"
		reset_node "$node"
	fi
	demo || fail "demo workload"
}

# maintain's command: records when it started (one line per run), then sleeps.
cmd_marker=$e2e_tmp/cmd.runs
mcmd=(sh -c "date +%s.%N >>'$cmd_marker'; exec sleep $CMD_SECS")
cmd_runs() { if [ -f "$cmd_marker" ]; then wc -l <"$cmd_marker"; else echo 0; fi; }

# ---- 0. self-test: the watch checker fails on a watch that holds no drain ---------
selftest_invariants() { # FILE EXPECT(ok|FAIL) WHAT
	local out
	out=$(pair_begin && check_invariants "$1")
	if [ "$2" = FAIL ] && grep -q 'FAIL' <<<"$out"; then
		pass "self-test: check_invariants fails $3"
	elif [ "$2" = ok ] && grep -q '  ok' <<<"$out" && ! grep -q FAIL <<<"$out"; then
		pass "self-test: check_invariants passes $3"
	else
		fail "self-test: check_invariants on $3: $out"
	fi
}
: >"$e2e_tmp/st-empty.watch"
selftest_invariants "$e2e_tmp/st-empty.watch" FAIL "an empty watch"
printf '%s\n' '{"t":1,"state":"","unsched":false,"taint":false,"was":null,"started":null}' \
	'{"t":2,"state":"","unsched":true,"taint":false,"was":null,"started":null}' >"$e2e_tmp/st-idle.watch"
selftest_invariants "$e2e_tmp/st-idle.watch" FAIL "a watch without a drain phase"
printf '%s\n' '{"t":1,"state":"","unsched":false,"taint":false,"was":null,"started":null}' \
	'{"t":2,"state":"cordon","unsched":true,"taint":true,"was":"false","started":"x"}' \
	'{"t":3,"state":"drained","unsched":true,"taint":true,"was":"false","started":"x"}' >"$e2e_tmp/st-good.watch"
selftest_invariants "$e2e_tmp/st-good.watch" ok "a drain episode"
printf '%s\n' '{"t":1,"state":"","unsched":false,"taint":false,"was":null,"started":null}' \
	'{"t":2,"state":"cordon","unsched":true,"taint":false,"was":"false","started":"x"}' >"$e2e_tmp/st-bad.watch"
selftest_invariants "$e2e_tmp/st-bad.watch" FAIL "a drain phase without the taint"

# ---- 1. measure each verb once (and check that it works uninterrupted) ------------
echo "--- measuring the verbs (uninterrupted runs)"
fresh
drainer_run m.drain drain "$node" "${dargs[@]}"
check_rc "measure: drain" 0 m.drain
T_drain=$run_secs
check_eq "measure: drained" "" "$(drained_problems)"
drainer_run m.uncordon uncordon "$node" --timeout 60s
check_rc "measure: uncordon" 0 m.uncordon
T_uncordon=$run_secs
check_eq "measure: restored" "" "$(restored_problems)"
fresh
rm -f "$cmd_marker"
t0=$(now)
drainer_run m.maintain maintain "$node" "${dargs[@]}" -- "${mcmd[@]}"
check_rc "measure: maintain" 0 m.maintain
T_maintain=$run_secs
T_m_cmd=$(awk -v a="$t0" -v b="$(head -n 1 "$cmd_marker" 2>/dev/null || echo "$t0")" 'BEGIN { printf "%.3f", b - a }')
check_eq "measure: maintain restored" "" "$(restored_problems)"
fresh
serve_start m.serve "${sargs[@]}"
nodes_watch_start "$e2e_tmp/m.serve.watch" "$node"
t0=$(now)
kubectl annotate node "$node" drainer.io/request=drain >/dev/null
check "measure: serve drains on request" wait_watch "$e2e_tmp/m.serve.watch" 60 '.state == "drained"'
T_serve_drain=$(jq -rs --arg t0 "$t0" '[.[] | select(.state == "drained") | .t] | min | . - ($t0 | tonumber) | . * 1000 | round / 1000' "$e2e_tmp/m.serve.watch")
t0=$(now)
kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
check "measure: serve uncordons on request" wait_watch "$e2e_tmp/m.serve.watch" 60 "(.t > $t0) and .state == \"\" and .request == \"\" and (.unsched | not)"
T_serve_uncordon=$(jq -rs --arg t0 "$t0" '[.[] | select(.t > ($t0 | tonumber) and .state == "" and .request == "" and (.unsched | not)) | .t] | min | . - ($t0 | tonumber) | . * 1000 | round / 1000' "$e2e_tmp/m.serve.watch")
watch_end
check "measure: serve restored the node" wait_until 30 node_restored "$node"
serve_end m.serve
T_serve_drain=$(num "$T_serve_drain" 5)
T_serve_uncordon=$(num "$T_serve_uncordon" 1)
T_m_cmd=$(num "$T_m_cmd" 4)
echo "  run times (s): drain $T_drain, uncordon $T_uncordon, maintain $T_maintain (command starts at $T_m_cmd, runs ${CMD_SECS}s)," \
	"serve drain $T_serve_drain, serve uncordon $T_serve_uncordon"
T_m_undo_end=$T_maintain
T_m_cmd_end=$(awk -v a="$T_m_cmd" -v c="$CMD_SECS" 'BEGIN { printf "%.3f", a + c }')

# ---- 2. the kills ------------------------------------------------------------------
budget() { echo $((kills_target - kills)); }
# how many kills for this run of a verb: 1, sometimes 2 (the restarted run killed too)
nkills() { if [ "$(budget)" -ge 2 ] && coin 25; then n_k=2; else n_k=1; fi; }

round_drain_uncordon() {
	local r=$1 i first tag
	echo "--- round $r: drain, then uncordon"
	fresh
	snapshot "r$r"
	pair_begin
	first=$(audit_lines)
	nodes_watch_start "$e2e_tmp/r$r.watch" "$node"
	cur_watch="$e2e_tmp/r$r.watch"
	nkills
	for ((i = 1; i <= n_k; i++)); do
		tag=r$r.drain.k$i
		pick_delay 0 "$T_drain"
		bg_drainer "$tag" drain "$node" "${dargs[@]}"
		kill_after "$bg_pid" "$delay" "drain$([ "$i" = 1 ] || echo ' (restarted run)')"
		add_row "drain$([ "$i" = 1 ] || echo ' 2nd')" "$delay" "$kill_state"
		[ "$kill_landed" = 1 ] || break
	done
	resume "round $r: drain" drain "$node" "${dargs[@]}"
	check_eq "round $r: drained (state, cordon, taint, no claim, no driver pod)" "" "$(drained_problems)"
	sleep 0.3
	watch_end
	echo "  phases seen: $(phases_seen "$e2e_tmp/r$r.watch")"
	safety_drain "r$r" "$first" "$e2e_tmp/r$r.watch"
	check_invariants "$e2e_tmp/r$r.watch"
	pair_end

	pair_begin
	first=$(audit_lines)
	nodes_watch_start "$e2e_tmp/r$r.u.watch" "$node"
	cur_watch="$e2e_tmp/r$r.u.watch"
	kill_landed=1
	if [ "$(budget)" -ge 1 ]; then nkills; else n_k=0; fi
	for ((i = 1; i <= n_k; i++)); do
		tag=r$r.uncordon.k$i
		pick_delay 0 "$T_uncordon"
		bg_drainer "$tag" uncordon "$node" --timeout 60s
		kill_after "$bg_pid" "$delay" "uncordon$([ "$i" = 1 ] || echo ' (restarted run)')"
		add_row "uncordon$([ "$i" = 1 ] || echo ' 2nd')" "$delay" "$kill_state"
		[ "$kill_landed" = 1 ] || break
	done
	resume "round $r: uncordon" uncordon "$node" --timeout 60s
	check_eq "round $r: restored (driver Ready, slice, schedulable, no annotation, no taint)" "" "$(restored_problems)"
	sleep 0.3
	watch_end
	echo "  phases seen: $(phases_seen "$e2e_tmp/r$r.u.watch")"
	safety_undo "r$r.u" "$first"
	check_invariants "$e2e_tmp/r$r.u.watch"
	pair_end
}

round_maintain() {
	local r=$1 i first tag part lo hi runs0
	echo "--- round $r: maintain -- ${mcmd[*]:0:2} ..."
	fresh
	snapshot "r$r"
	pair_begin
	first=$(audit_lines)
	runs0=$(cmd_runs)
	nodes_watch_start "$e2e_tmp/r$r.watch" "$node"
	cur_watch="$e2e_tmp/r$r.watch"
	nkills
	for ((i = 1; i <= n_k; i++)); do
		tag=r$r.maintain.k$i
		case $((RANDOM % 3)) in
		0) part=drain lo=0 hi=$T_m_cmd ;;
		1) part=command lo=$T_m_cmd hi=$T_m_cmd_end ;;
		2) part=undo lo=$T_m_cmd_end hi=$T_m_undo_end ;;
		esac
		pick_delay "$lo" "$hi"
		bg_drainer "$tag" maintain "$node" "${dargs[@]}" -- "${mcmd[@]}"
		kill_after "$bg_pid" "$delay" "maintain ($part)"
		add_row "maintain:$part$([ "$i" = 1 ] || echo ' 2nd')" "$delay" "$kill_state"
		[ "$kill_landed" = 1 ] || break
	done
	resume "round $r: maintain" maintain "$node" "${dargs[@]}" -- "${mcmd[@]}"
	check_eq "round $r: restored (driver Ready, slice, schedulable, no annotation, no taint)" "" "$(restored_problems)"
	sleep 0.3
	watch_end
	echo "  phases seen: $(phases_seen "$e2e_tmp/r$r.watch")"
	safety_drain "r$r" "$first" "$e2e_tmp/r$r.watch"
	check_invariants "$e2e_tmp/r$r.watch"
	pair_end "command ran $(($(cmd_runs) - runs0))x"
}

round_serve() {
	local r=$1 i first tag n=0
	echo "--- round $r: serve, drain then uncordon on request"
	fresh
	snapshot "r$r"
	pair_begin
	first=$(audit_lines)
	nodes_watch_start "$e2e_tmp/r$r.watch" "$node"
	cur_watch="$e2e_tmp/r$r.watch"
	nkills
	for ((i = 1; i <= n_k; i++)); do
		tag=r$r.s$((n += 1))
		serve_start "$tag" "${sargs[@]}"
		# the first daemon is killed a random moment after the request; a restarted
		# one a random moment after it started
		[ "$i" != 1 ] || kubectl annotate node "$node" drainer.io/request=drain >/dev/null
		run_t0=$(now)
		pick_delay 0 "$T_serve_drain"
		sleep "$delay"
		serve_end "$tag" KILL
		read_kill_state
		echo "  kill #$((kills + 1)) serve (request=drain) after ${delay}s: state at kill: $kill_state"
		add_row "serve:drain$([ "$i" = 1 ] || echo ' 2nd')" "$delay" "$kill_state"
	done
	tag=r$r.s$((n += 1))
	serve_start "$tag" "${sargs[@]}"
	w0=$SECONDS
	check_or_log "$tag" "round $r: a new serve finishes the drain (<= 150 s)" wait_until 150 state_is "$node" drained
	[ $((SECONDS - w0)) -lt 30 ] || slow_note="resumed in $((SECONDS - w0))s"
	check_eq "round $r: drained (state, cordon, taint, no claim, no driver pod)" "" "$(drained_problems)"
	check_eq "round $r: the request stays" drain "$(node_ann "$node" drainer.io/request)"
	sleep 0.3
	watch_end
	echo "  phases seen: $(phases_seen "$e2e_tmp/r$r.watch")"
	safety_drain "r$r" "$first" "$e2e_tmp/r$r.watch"
	check_invariants "$e2e_tmp/r$r.watch"
	pair_end

	pair_begin
	first=$(audit_lines)
	nodes_watch_start "$e2e_tmp/r$r.u.watch" "$node"
	cur_watch="$e2e_tmp/r$r.u.watch"
	kubectl annotate --overwrite node "$node" drainer.io/request=uncordon >/dev/null
	run_t0=$(now)
	if [ "$(budget)" -ge 1 ]; then nkills; else n_k=0; fi
	for ((i = 1; i <= n_k; i++)); do
		[ "$i" = 1 ] || {
			tag=r$r.s$((n += 1))
			serve_start "$tag" "${sargs[@]}"
			run_t0=$(now)
		}
		pick_delay 0 "$T_serve_uncordon"
		sleep "$delay"
		serve_end "$tag" KILL
		read_kill_state
		echo "  kill #$((kills + 1)) serve (request=uncordon) after ${delay}s: state at kill: $kill_state"
		add_row "serve:uncordon$([ "$i" = 1 ] || echo ' 2nd')" "$delay" "$kill_state"
	done
	[ "$n_k" = 0 ] || {
		tag=r$r.s$((n += 1))
		serve_start "$tag" "${sargs[@]}"
	}
	w0=$SECONDS
	check_or_log "$tag" "round $r: serve brings the node back (<= 150 s)" wait_until 150 node_restored "$node"
	[ $((SECONDS - w0)) -lt 30 ] || slow_note="resumed in $((SECONDS - w0))s"
	check_eq "round $r: restored (driver Ready, slice, schedulable, no annotation, no taint)" "" "$(restored_problems)"
	sleep 0.3
	watch_end
	echo "  phases seen: $(phases_seen "$e2e_tmp/r$r.u.watch")"
	safety_undo "r$r.u" "$first"
	check_invariants "$e2e_tmp/r$r.u.watch"
	serve_end "$tag"
	check_eq "round $r: the last daemon exits 0 on SIGTERM" 0 "$serve_rc"
	pair_end
}

round=0
while [ "$kills" -lt "$kills_target" ]; do
	# each cycle: drain+uncordon, maintain twice, serve, in a random order
	cycle=(du m s m)
	for ((i = ${#cycle[@]} - 1; i > 0; i--)); do
		j=$((RANDOM % (i + 1)))
		x=${cycle[i]} cycle[i]=${cycle[j]} cycle[j]=$x
	done
	for c in "${cycle[@]}"; do
		[ "$kills" -lt "$kills_target" ] || break
		round=$((round + 1))
		case $c in
		du) round_drain_uncordon "$round" ;;
		m) round_maintain "$round" ;;
		s) round_serve "$round" ;;
		esac
	done
done

# ---- 3. the table ------------------------------------------------------------------
echo
echo "seed $seed: $kills kills in $round rounds, $((SECONDS - t_start)) s"
printf '%-5s %-20s %-8s %-40s %s\n' "kill#" verb "delay s" "state at kill" outcome
for ((i = 0; i < kills; i++)); do
	printf '%-5s %-20s %-8s %-40s %s\n' "$((i + 1))" "${row_verb[i]}" "${row_delay[i]}" "${row_state[i]}" "${row_outcome[i]}"
done
echo "states at kill: $(for ((i = 0; i < kills; i++)); do echo "${row_state[i]%% *}"; done | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')"
finish
