# Shared by tests/install/*.sh (sourced): checks that count, and a private temp folder.
# Each script ends with `finish` ("N passed, N failed").
set -uo pipefail
install_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
t_tmp=$(mktemp -d "${TMPDIR:-/tmp}/drainer-install-test.XXXXXX")
t_checks=0 t_failed=0
t_cleanup_hooks=()
t_cleanup() {
	local h
	for h in "${t_cleanup_hooks[@]}"; do eval "$h" || true; done
	if [ -n "${KEEP_TMP:-}" ]; then echo "(kept $t_tmp)"; else rm -rf "$t_tmp"; fi
}
trap t_cleanup EXIT
pass() { t_checks=$((t_checks + 1)); echo "  ok: $*"; }
fail() { t_checks=$((t_checks + 1)); t_failed=$((t_failed + 1)); echo "  FAIL: $*"; }
check() { # description command...
	local d=$1
	shift
	if "$@"; then pass "$d"; else fail "$d"; fi
}
check_eq() { # description expected actual
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi
}
finish() {
	echo "$((t_checks - t_failed)) passed, $t_failed failed"
	[ "$t_failed" = 0 ]
}
# The host paths a container or package tool might write to: none of them may appear
# during a test that did not have them before (the test says so by checking).
host_paths=(/var/lib/containers /run/containers /run/libpod /root/.local/share/containers
	/root/.config/containers /var/lib/dpkg/info/drainer.list /etc/drainer /etc/systemd/system/multi-user.target.wants/drainer.service)
host_paths_before() { local p; for p in "${host_paths[@]}"; do [ -e "$p" ] && echo "$p"; done; }
