# Shared by deploy/image/{build,lock,run} (sourced): the lock file, the cache, apt
# state of our own, and podman with storage of our own.

# The cache outside the clone: mmdebstrap extractions keyed on the lock's hash, and
# the apt lists of the pin check.
image_cache() { echo "${DRAINER_IMAGE_CACHE:-${HOME:-/root}/.cache/drainer-image}"; }
# The Debian mirror: this host's apt source for Debian (only the Debian one: other
# sources on the host are not the image's business).
image_sources() {
	local f=${DRAINER_IMAGE_SOURCES:-}
	if [ -z "$f" ]; then
		for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list ''; do
			[ -z "$f" ] || [ -s "$f" ] && break
		done
	fi
	[ -n "$f" ] || { echo "no Debian apt source (set DRAINER_IMAGE_SOURCES)" >&2; return 1; }
	echo "$f"
}

image_sources_default() { DRAINER_IMAGE_SOURCES='' image_sources; }
lock_field() { sed -n "s/^# $2: *//p" "$1" | head -n 1; }  # LOCK FIELD
lock_pins() { grep -v '^#' "$1" | grep -v '^[[:space:]]*$'; }  # LOCK

# apt with its own state and an empty dpkg status, on the image's mirror. Its package
# lists: the host's (read only, no download) when the host's apt has lists for the
# mirror's suite, else lists of its own under the cache (apt_private_update).
apt_private() {
	local d lists
	d=$(image_cache)/apt
	lists=${apt_lists:-$d/state/lists}
	apt-get -q -o Debug::NoLocking=1 -o APT::Architecture="${apt_arch:-$(dpkg --print-architecture)}" \
		-o APT::Architectures="${apt_arch:-$(dpkg --print-architecture)}" \
		-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$d/sources.list.d" \
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
		-o Dir::State="$d/state" -o Dir::State::Lists="$lists" -o Dir::State::Status="$d/state/status" -o Dir::Cache="$d/cache" \
		-o Dir::Log="$d/log" -o APT::Install-Recommends=false "$@"
}
apt_private_update() { # ARCH
	local d src
	d=$(image_cache)/apt
	apt_arch=$1
	src=$(image_sources) || return 1
	mkdir -p "$d/sources.list.d" "$d/state/lists/partial" "$d/cache/archives/partial" "$d/log"
	: >>"$d/state/status"
	case $src in
	*.sources) cp "$src" "$d/sources.list.d/debian.sources" ;;
	*) cp "$src" "$d/sources.list.d/debian.list" ;;
	esac
	apt_lists=''
	if [ -z "${DRAINER_IMAGE_OWN_LISTS:-}" ] && [ "$src" = "$(image_sources_default)" ] &&
		ls /var/lib/apt/lists/*_dists_"${apt_suite:-}"_*Packages* >/dev/null 2>&1; then
		apt_lists=/var/lib/apt/lists
		return 0
	fi
	apt_private update >"$d/update.log" 2>&1 || {
		echo "apt-get update of the image's mirror failed:" >&2
		tail -n 5 "$d/update.log" >&2
		return 1
	}
}

# podman with all of its state under $PODMAN_DIR (default build/image/podman): storage
# (--root/--runroot), its tmpdir, events file, network and volume folders, and a
# registries.conf that names no registry. What podman 4.3 writes to fixed paths all
# the same (/run/containers/networks, the blob info cache in /var/lib/containers/cache)
# lands in tmpfs mounts of a private mount namespace: nothing reaches the host's
# /var/lib/containers, /run or ~/.local/share/containers. The flags are the ones this VM kind
# needs (see deploy/image/README.md): runc (crun refuses its hybrid cgroups),
# cgroupfs, file events, and ulimits within the hard limits (no CAP_SYS_RESOURCE).
podman_setup() { # DIR
	PODMAN_DIR=$1
	mkdir -p "$PODMAN_DIR"/{root,run,tmp,networks,volumes}
	# podman refuses a runroot longer than 50 characters (socket paths): then a short
	# one in /tmp, for this run only (podman_cleanup removes it).
	PODMAN_RUNROOT=$PODMAN_DIR/run
	if [ ${#PODMAN_RUNROOT} -gt 50 ]; then
		PODMAN_RUNROOT=$(mktemp -d /tmp/drainer-podman.XXXXXX)
		PODMAN_RUNROOT_TMP=1
	fi
	cat >"$PODMAN_DIR/containers.conf" <<-EOF
		[containers]
		netns = "none"
		[engine]
		cgroup_manager = "cgroupfs"
		events_logger = "file"
		events_logfile_path = "$PODMAN_DIR/tmp/events.log"
		runtime = "runc"
		tmp_dir = "$PODMAN_DIR/tmp"
		image_copy_tmp_dir = "$PODMAN_DIR/tmp"
		volume_path = "$PODMAN_DIR/volumes"
		static_dir = "$PODMAN_DIR/root/libpod"
		[network]
		network_config_dir = "$PODMAN_DIR/networks"
	EOF
	cat >"$PODMAN_DIR/storage.conf" <<-EOF
		[storage]
		driver = "overlay"
		graphroot = "$PODMAN_DIR/root"
		runroot = "$PODMAN_RUNROOT"
	EOF
	printf 'unqualified-search-registries = []\n' >"$PODMAN_DIR/registries.conf"
}
podman_() {
	CONTAINERS_CONF=$PODMAN_DIR/containers.conf CONTAINERS_STORAGE_CONF=$PODMAN_DIR/storage.conf \
		CONTAINERS_REGISTRIES_CONF=$PODMAN_DIR/registries.conf XDG_CONFIG_HOME=$PODMAN_DIR/config \
		XDG_DATA_HOME=$PODMAN_DIR/data XDG_RUNTIME_DIR=$PODMAN_DIR/xdg \
		unshare --mount --propagation private -- sh -c \
		'mount -t tmpfs -o mode=0755 podman-run /run && mount -t tmpfs -o mode=0755 podman-var-lib /var/lib && exec "$@"' sh \
		podman --root "$PODMAN_DIR/root" --runroot "$PODMAN_RUNROOT" --tmpdir "$PODMAN_DIR/tmp" \
		--storage-driver overlay --cgroup-manager cgroupfs --events-backend file --runtime runc "$@"
}
# podman run with the flags of this VM kind; args: podman run options, IMAGE, drainer args.
podman_run() {
	local nofile
	nofile=$(ulimit -Hn)
	podman_ run --rm --pull never \
		--ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 "$@" 2>&1
}
podman_cleanup() {
	if [ -n "${PODMAN_RUNROOT_TMP:-}" ] && [ -d "${PODMAN_RUNROOT:-}" ]; then
		umount -R "$PODMAN_RUNROOT" 2>/dev/null || true
		rm -rf "$PODMAN_RUNROOT"
	fi
}

# The image's architectures: the host's (amd64), and arm64, cross built and run with
# qemu-user (Debian's qemu-user-static: no binfmt registration, the loader is named).
arch_loader() { # ARCH: the loader's path in a Debian root file system
	case $1 in
	amd64) echo lib64/ld-linux-x86-64.so.2 ;;
	arm64) echo lib/ld-linux-aarch64.so.1 ;;
	*) echo "no loader known for $1" >&2; return 1 ;;
	esac
}
arch_triplet() { dpkg-architecture -a "$1" -qDEB_HOST_MULTIARCH 2>/dev/null; }  # ARCH
arch_run() { # ARCH PROGRAM ARGS...: PROGRAM of ARCH on this host (qemu-user if foreign)
	local a=$1
	shift
	case $a in
	"$(dpkg --print-architecture)") "$@" ;;
	arm64) qemu-aarch64-static "$@" ;;
	*) echo "cannot run $a programs here" >&2; return 1 ;;
	esac
}
# ld.so --list of BINARY with this host's (multiarch) libraries of ARCH, as ldd prints it
ld_list() { # ARCH BINARY
	arch_run "$1" "/$(arch_loader "$1")" --list "$2"
}
