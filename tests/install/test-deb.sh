#!/usr/bin/env bash
# The Debian package, built by deploy/packaging/deb/build: lintian shows no error;
# then it is installed with dpkg -i, run, and purged inside a throw-away root: an
# overlay (upper layer in this test's folder, in a private mount namespace) over a
# Debian root made once by mmdebstrap with the package's dependencies and cached by
# their hash (~/.cache/drainer-image/deb-root-*). Never the host's own dpkg database.
# Checks: dpkg -i succeeds, drainer runs, the unit is enabled the Debian way (the
# wants symlink and deb-systemd-helper's state), the user exists, the conffiles are
# registered (the polkit rule among them, under /etc, granting no unit as shipped),
# drainer.path is enabled, the man page and completions are in place; purge removes
# the admin's /etc/drainer/kubeconfig and the directory without a warning; an account "drainer" the
# package did not make is refused unless it is a system account, and is never removed
# on purge (one throw-away root per case); after dpkg --purge the
# overlay's upper layer holds nothing but dpkg's own log and bookkeeping (every other
# file changed or added is a leftover), and the host's dpkg database is untouched.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$install_root" || exit 1
. deploy/image/lib.sh
export LC_ALL=C

before_host=$(host_paths_before)
host_status=$(sha256sum /var/lib/dpkg/status)

t0=$SECONDS
if out=$(deploy/packaging/deb/build 2>&1); then
	pass "deploy/packaging/deb/build ($((SECONDS - t0)) s): $(head -n 1 <<<"$out")"
else
	fail "deploy/packaging/deb/build"
	echo "$out" | tail -n 20 | sed 's/^/    /'
	finish
	exit 1
fi
deb=$(sed -n '1s/:.*//p' <<<"$out")
echo "$out" | sed 's/^/    /'

# lintian: the whole output shown; any E: fails. (As nobody: lintian warns that it
# should not run as root.)
t1=$SECONDS
chmod 755 "$t_tmp"
cp "$deb" "$t_tmp/pkg.deb" && chmod 644 "$t_tmp/pkg.deb"
lint=$(cd "$t_tmp" && HOME=$t_tmp setpriv --reuid=65534 --regid=65534 --clear-groups lintian --pedantic --display-info pkg.deb 2>&1)
echo "    lintian --pedantic --display-info ($((SECONDS - t1)) s): ${lint:-no tags}" | head -n 40
if grep -q '^E:' <<<"$lint"; then fail "lintian: errors"; else pass "lintian: no error ($(grep -c '^[WIP]:' <<<"$lint") warnings/info/pedantic tags)"; fi

# --- the throw-away root -------------------------------------------------------------
depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/[[:space:]]//g' | grep . | sort -u | paste -sd, -)
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
key=$(printf 'deb-root 1 %s %s\n' "$suite" "$depends" | sha256sum | cut -c1-16)
base=$(image_cache)/deb-root-$key
t2=$SECONDS
if [ ! -f "$base/.done" ]; then
	rm -rf "$base" "$base.tmp"
	mkdir -p "$(dirname "$base")"
	if mmdebstrap --quiet --variant=minbase --include="$depends" --aptopt='Apt::Install-Recommends "false"' \
		"$suite" "$base.tmp" "$(image_sources)" >"$t_tmp/mmdebstrap.log" 2>&1; then
		touch "$base.tmp/.done" && mv "$base.tmp" "$base"
		pass "Debian root with the package's dependencies made ($((SECONDS - t2)) s): $base"
	else
		fail "mmdebstrap of the test root"
		tail -n 20 "$t_tmp/mmdebstrap.log" | sed 's/^/    /'
		rm -rf "$base.tmp"
		finish
		exit 1
	fi
else
	pass "Debian root with the package's dependencies, cached: $base"
fi

# Everything below runs in a private mount namespace; its output is the checks.
mkdir -p "$t_tmp/upper" "$t_tmp/work" "$t_tmp/root"
cp "$deb" "$t_tmp/drainer.deb"
inside() {
	set -u
	local r=$T/root
	mount --make-rprivate /
	mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$T/upper,workdir=$T/work" "$r" || { echo "FAIL overlay mount"; return; }
	mount -t proc proc "$r/proc"
	mount -t tmpfs tmpfs "$r/run" # as on a booted system (no /run/systemd/system: systemd is not running)
	cp "$T/drainer.deb" "$r/tmp/drainer.deb"
	ch() { chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"; }
	if ch dpkg -i /tmp/drainer.deb >"$T/dpkg-i.log" 2>&1; then echo "ok dpkg -i drainer.deb"; else echo "FAIL dpkg -i: $(tail -n 5 "$T/dpkg-i.log" | tr '\n' ' ')"; fi
	rm -f "$r/tmp/drainer.deb"
	v=$(ch drainer version 2>&1 | head -n 1)
	[ "$v" = "drainer $VERSION" ] && echo "ok drainer version runs in the root: $v" || echo "FAIL drainer version: $v"
	ch drainer plan 2>/dev/null; rc=$?
	[ "$rc" = 2 ] && echo "ok drainer plan without NODE: exit 2 (bad usage)" || echo "FAIL drainer plan without NODE: exit $rc"
	ch sh -c 'kubectl-drainer --help | head -n 1' | grep -q '^drainer ' && echo "ok kubectl-drainer runs drainer" || echo "FAIL kubectl-drainer"
	[ "$(ch dpkg-query -W -f '${Status}' drainer)" = "install ok installed" ] && echo "ok dpkg: install ok installed" || echo "FAIL dpkg status"
	cf=$(ch dpkg-query -W -f '${Conffiles}' drainer | awk '{print $1}' | sort | tr '\n' ' ')
	[ "$cf" = "/etc/default/drainer /etc/drainer/drainer.yaml /etc/polkit-1/rules.d/50-drainer.rules " ] &&
		echo "ok conffiles (the polkit rule under /etc: an admin's unit list survives upgrades): $cf" || echo "FAIL conffiles: $cf"
	grep -q '^    var DRIVER_UNITS = \[\];$' "$r/etc/polkit-1/rules.d/50-drainer.rules" 2>/dev/null && ! grep -q 'example-dra-driver' "$r/etc/polkit-1/rules.d/50-drainer.rules" &&
		echo "ok the polkit rule grants no unit as shipped (DRIVER_UNITS = [])" || echo "FAIL the polkit rule grants units as shipped, or is not under /etc: $(grep -rh 'DRIVER_UNITS =' "$r/etc/polkit-1" "$r/usr/share/polkit-1" 2>/dev/null)"
	[ "$(readlink "$r/etc/systemd/system/multi-user.target.wants/drainer.service")" = /lib/systemd/system/drainer.service ] &&
		echo "ok drainer.service enabled (multi-user.target.wants symlink)" || echo "FAIL drainer.service not enabled: $(ls -la "$r/etc/systemd/system/multi-user.target.wants/" 2>&1 | tr '\n' ' ')"
	[ "$(readlink "$r/etc/systemd/system/paths.target.wants/drainer.path")" = /lib/systemd/system/drainer.path ] &&
		grep -qx 'PathChanged=/etc/drainer/kubeconfig' "$r/lib/systemd/system/drainer.path" &&
		echo "ok drainer.path enabled (paths.target.wants symlink): starts drainer.service when /etc/drainer/kubeconfig is written" ||
		echo "FAIL drainer.path not enabled: $(ls -la "$r/etc/systemd/system/paths.target.wants/" 2>&1 | tr '\n' ' ')"
	ls "$r/var/lib/systemd/deb-systemd-helper-enabled/drainer.service.dsh-also" >/dev/null 2>&1 &&
		echo "ok deb-systemd-helper state recorded" || echo "FAIL no deb-systemd-helper state"
	u=$(ch getent passwd drainer)
	case $u in drainer:x:*:*:"drainer (DRA-aware node drains)"*:/nonexistent:/usr/sbin/nologin) echo "ok system user: $u" ;; *) echo "FAIL system user: $u" ;; esac
	uid=$(echo "$u" | cut -d: -f3)
	[ -n "$uid" ] && [ "$uid" -lt 1000 ] && echo "ok uid $uid is a system uid" || echo "FAIL uid $uid"
	for f in /usr/share/man/man1/drainer.1.gz /usr/share/bash-completion/completions/drainer /usr/share/zsh/vendor-completions/_drainer \
		/usr/lib/sysusers.d/drainer.conf /etc/polkit-1/rules.d/50-drainer.rules /lib/systemd/system/drainer-maintain@.service; do
		[ -f "$r$f" ] || echo "FAIL missing $f"
	done
	echo "ok man page, completions, sysusers, polkit rule, maintain unit installed"
	grep -q '^ExecStart=/usr/bin/drainer serve' "$r/lib/systemd/system/drainer.service" && echo "ok the unit runs /usr/bin/drainer" || echo "FAIL ExecStart"
	# The admin's credentials, as the README says to install them; then remove, then purge.
	(umask 077 && echo 'apiVersion: v1' >"$r/etc/drainer/kubeconfig")
	if ch dpkg --purge drainer >"$T/dpkg-purge.log" 2>&1; then echo "ok dpkg --purge drainer"; else echo "FAIL dpkg --purge: $(tail -n 5 "$T/dpkg-purge.log" | tr '\n' ' ')"; fi
	[ ! -e "$r/etc/drainer" ] && echo "ok purge removed /etc/drainer/kubeconfig (a live token) and /etc/drainer" ||
		echo "FAIL after purge /etc/drainer holds: $(ls -A "$r/etc/drainer" | tr '\n' ' ')"
	grep -qi 'warning' "$T/dpkg-purge.log" && echo "FAIL dpkg --purge warns: $(grep -i warning "$T/dpkg-purge.log" | head -n 2 | tr '\n' ' ')" ||
		echo "ok dpkg --purge prints no warning"
	[ -z "$(ch dpkg-query -W -f '${Status}' drainer 2>/dev/null)" ] && echo "ok dpkg knows no drainer any more" || echo "FAIL dpkg still lists drainer"
	ch getent passwd drainer >/dev/null && echo "FAIL user drainer left" || echo "ok user drainer removed"
	umount "$r/run"
	umount "$r/proc"
	umount "$r"
}
T=$t_tmp BASE=$base VERSION=$(dpkg-deb -f "$deb" Version) \
	unshare --mount bash -c "$(declare -f inside); inside" >"$t_tmp/inside.out" 2>&1
while read -r line; do
	case $line in
	ok*) pass "${line#ok }" ;;
	*) fail "$line" ;;
	esac
done <"$t_tmp/inside.out"

# An account "drainer" the package did not make: each case in a fresh overlay of its
# own. One that is not a system account (a uid above SYS_UID_MAX, or a login shell),
# or a group "drainer" without a user drainer (system group or not), makes the install
# fail before anything is unpacked (so the polkit rule, which grants the user drainer
# rights, never lands) with a message saying why; a system account an admin made is
# used and left in place, with its group, on purge.
accounts() {
	set -u
	local c=$1 setup=$2 want=$3 r=$T/root-$1
	mkdir -p "$T/upper-$c" "$T/work-$c" "$r"
	mount --make-rprivate /
	mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$T/upper-$c,workdir=$T/work-$c" "$r" || { echo "FAIL $c: overlay mount"; return; }
	mount -t proc proc "$r/proc"
	mount -t tmpfs tmpfs "$r/run"
	ch() { chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C "$@"; }
	ch sh -c "$setup" >/dev/null 2>&1 || echo "FAIL $c: setup: $setup"
	local pw gr
	pw=$(ch getent passwd drainer) gr=$(ch getent group drainer)
	cp "$T/drainer.deb" "$r/tmp/drainer.deb"
	ch dpkg -i /tmp/drainer.deb >"$T/dpkg-i-$c.log" 2>&1
	local rc=$?
	rm -f "$r/tmp/drainer.deb"
	if [ "$want" = refuse ]; then
		[ "$rc" != 0 ] && grep -q 'refusing to install' "$T/dpkg-i-$c.log" &&
			echo "ok $c: dpkg -i refused: $(grep -o 'refusing to install[^(]*' "$T/dpkg-i-$c.log" | head -n 1)" ||
			echo "FAIL $c: dpkg -i exit $rc: $(tail -n 3 "$T/dpkg-i-$c.log" | tr '\n' ' ')"
		[ ! -e "$r/etc/polkit-1/rules.d/50-drainer.rules" ] && echo "ok $c: nothing unpacked (no polkit rule)" ||
			echo "FAIL $c: the polkit rule was unpacked"
	else
		[ "$rc" = 0 ] && echo "ok $c: dpkg -i succeeds" || echo "FAIL $c: dpkg -i exit $rc: $(tail -n 3 "$T/dpkg-i-$c.log" | tr '\n' ' ')"
	fi
	ch dpkg --purge drainer >"$T/dpkg-purge-$c.log" 2>&1 || echo "FAIL $c: dpkg --purge: $(tail -n 3 "$T/dpkg-purge-$c.log" | tr '\n' ' ')"
	[ "$(ch getent passwd drainer)" = "$pw" ] && echo "ok $c: after purge the user is as before: ${pw:-none}" ||
		echo "FAIL $c: after purge the user is [$(ch getent passwd drainer)], was [$pw]"
	[ "$(ch getent group drainer)" = "$gr" ] && echo "ok $c: after purge the group is as before: $gr" ||
		echo "FAIL $c: after purge the group is [$(ch getent group drainer)], was [$gr]"
	[ ! -e "$r/var/lib/drainer" ] && echo "ok $c: no /var/lib/drainer left" || echo "FAIL $c: /var/lib/drainer left: $(ls "$r/var/lib/drainer")"
	umount "$r/run"
	umount "$r/proc"
	umount "$r"
}
while IFS='|' read -r c setup want; do
	T=$t_tmp BASE=$base unshare --mount bash -c "$(declare -f accounts); accounts '$c' '$setup' '$want'" >"$t_tmp/accounts.out" 2>&1
	while read -r line; do
		case $line in
		ok*) pass "${line#ok }" ;;
		*) fail "$line" ;;
		esac
	done <"$t_tmp/accounts.out"
done <<'EOF2'
login-user|useradd -u 1001 -m -s /bin/bash drainer|refuse
system-uid-with-shell|useradd -r -u 998 -s /bin/bash drainer|refuse
non-system-group|groupadd -g 1500 drainer|refuse
admin-system-user|useradd -r -u 990 -M -d /nonexistent -s /usr/sbin/nologin drainer|use
admin-system-group|groupadd -r -g 991 drainer|refuse
EOF2

# What the install and purge left in the upper layer: only dpkg's log and bookkeeping.
# (A file that an overlay copied up unchanged is no leftover.)
left=()
while IFS= read -r -d '' f; do
	rel=${f#"$t_tmp/upper"}
	case $rel in
	/var/log/dpkg.log | /var/log/alternatives.log | /var/lib/dpkg/status-old | /var/lib/dpkg/status | /var/lib/dpkg/lock* | \
		/var/lib/dpkg/triggers/* | /var/cache/debconf/* | /etc/passwd- | /etc/group- | /etc/shadow- | /etc/gshadow- | /tmp/drainer.deb) continue ;;
	esac
	if [ -d "$f" ] && [ ! -L "$f" ]; then
		[ -d "$base$rel" ] && continue # a directory the overlay made for a copy-up
	elif [ -f "$f" ] && [ -f "$base$rel" ] && cmp -s "$f" "$base$rel"; then
		continue
	fi
	left+=("$rel")
done < <(find "$t_tmp/upper" -mindepth 1 -print0)
if [ ${#left[@]} = 0 ]; then pass "after dpkg --purge nothing is left behind (overlay upper layer: only dpkg's log and status)"; else fail "left behind after purge: ${left[*]}"; fi
for f in passwd group shadow gshadow; do
	if [ -f "$t_tmp/upper/etc/$f" ] && ! cmp -s "$t_tmp/upper/etc/$f" "$base/etc/$f"; then fail "/etc/$f differs after the purge"; fi
done
if [ -f "$t_tmp/upper/var/lib/dpkg/status" ]; then
	cmp -s "$t_tmp/upper/var/lib/dpkg/status" "$base/var/lib/dpkg/status" && pass "the root's dpkg status is as before" ||
		fail "the root's dpkg status differs: $(diff "$base/var/lib/dpkg/status" "$t_tmp/upper/var/lib/dpkg/status" | head -n 5 | tr '\n' ' ')"
fi
echo "    (install, run and purge: $((SECONDS - t2)) s)"

check_eq "the host's dpkg database is untouched" "$host_status" "$(sha256sum /var/lib/dpkg/status)"
check_eq "no new container or package state on the host (${host_paths[*]})" "$before_host" "$(host_paths_before)"
finish
