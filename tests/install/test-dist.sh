#!/usr/bin/env bash
# meson dist makes a source tarball that builds, and the build is reproducible from it:
#  - `meson dist` (xz) of HEAD holds .dist-version (the revision and its commit time,
#    written by deploy/packaging/version-info --dist), LICENSE (Apache-2.0) and no .git;
#  - unpacked at another path, outside any git tree, deploy/image/build builds it
#    (meson setup + ninja of the release build, the man page and completions,
#    meson install, and the image); its drainer reports HEAD's revision and commit time;
#  - that image has the same index, manifest (linux/amd64, linux/arm64), config and
#    layer digests as the image built from this clone (build/drainer-image.oci.tar, when it was built from HEAD with a
#    clean tree): a second tree at a different path gives the same bits.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$install_root" || exit 1
export LC_ALL=C
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
head_rev=$(git rev-parse HEAD)

t0=$SECONDS
dirty=()
git diff-index --quiet HEAD -- || dirty=(--allow-dirty)
if out=$(meson dist -C build --no-tests --formats xztar "${dirty[@]}" 2>&1); then
	pass "meson dist ($((SECONDS - t0)) s)"
else
	fail "meson dist"
	echo "$out" | tail -n 20 | sed 's/^/    /'
	finish
	exit 1
fi
tarball=build/meson-dist/drainer-$version.tar.xz
check "the tarball $tarball" test -s "$tarball"
echo "    $(($(stat -c %s "$tarball") / 1024)) KiB, $(tar -tJf "$tarball" | wc -l) entries"
check_eq "the tarball holds .dist-version with HEAD's revision" "revision=$head_rev" "$(tar -xJOf "$tarball" "drainer-$version/.dist-version" 2>/dev/null | head -n 1)"
check_eq "the tarball holds no .git" "" "$(tar -tJf "$tarball" | grep -E '(^|/)\.git(/|$)' | head -n 1)"
check "the tarball holds LICENSE, the Apache License 2.0 every artifact names" \
	bash -c "tar -xJOf '$tarball' 'drainer-$version/LICENSE' 2>/dev/null | grep -q 'Apache License' && tar -xJOf '$tarball' 'drainer-$version/LICENSE' | grep -q 'Version 2.0, January 2004'"
# the same files as HEAD's tree (+ .dist-version)
check_eq "the tarball holds exactly HEAD's files and .dist-version" \
	"$( (git ls-tree -r --name-only HEAD; echo .dist-version) | sort)" \
	"$(tar -tJf "$tarball" | sed "s|^drainer-$version/||" | grep -v '/$' | grep . | sort)"

src=$t_tmp/elsewhere/unpacked/drainer-$version
mkdir -p "$(dirname "$src")" && tar -C "$(dirname "$src")" -xJf "$tarball"
t1=$SECONDS
if (cd "$src" && deploy/image/build) >"$t_tmp/build.log" 2>&1; then
	pass "deploy/image/build from the unpacked tarball at $src ($((SECONDS - t1)) s)"
else
	fail "deploy/image/build from the unpacked tarball"
	tail -n 30 "$t_tmp/build.log" | sed 's/^/    /'
	finish
	exit 1
fi
v=$("$src/build/image/stage/usr/bin/drainer" version -o json)
check_eq "drainer built from the tarball: version, revision, commit time, clean" \
	"$version $head_rev $(date -u -d "@$(git log -1 --format=%ct)" +%Y-%m-%dT%H:%M:%SZ) false" \
	"$(jq -r '"\(.version) \(.revision) \(.commitTime) \(.dirty)"' <<<"$v")"
check "the tarball's build installed drainer(1) and the completions" \
	test -s "$src/build/image/stage/usr/share/man/man1/drainer.1" -a -s "$src/build/image/stage/usr/share/bash-completion/completions/drainer"
oci() { # ARCHIVE: "index ARCH=manifest... config layer revision" (config, layer: linux/amd64's)
	local L
	L=$(mktemp -d -p "$t_tmp")
	tar -C "$L" -xf "$1"
	local i m c
	i=$(jq -r '.manifests[0].digest' "$L/index.json")
	m=$(jq -r '.manifests[] | select(.platform.architecture == "amd64") | .digest' "$L/blobs/sha256/${i#sha256:}")
	c=$(jq -r '.config.digest' "$L/blobs/sha256/${m#sha256:}")
	echo "$i $(jq -r '[.manifests[] | "\(.platform.architecture)=\(.digest)"] | join(" ")' "$L/blobs/sha256/${i#sha256:}") $c $(jq -r '.layers[0].digest' "$L/blobs/sha256/${m#sha256:}") $(jq -r '.config.Labels["org.opencontainers.image.revision"]' "$L/blobs/sha256/${c#sha256:}")"
}
from_tarball=$(oci "$src/build/drainer-image.oci.tar")
echo "    from the tarball: index manifests config layer = ${from_tarball% *}"
if [ -f build/drainer-image.oci.tar ] && [ "${#dirty[@]}" = 0 ]; then
	from_clone=$(oci build/drainer-image.oci.tar)
	echo "    from this clone:  index manifests config layer = ${from_clone% *}"
	if [ "${from_clone##* }" = "$head_rev" ]; then
		check_eq "the same image digests from this clone ($install_root) and from the tarball at $src" "$from_clone" "$from_tarball"
		check "and byte-identical archives" cmp -s build/drainer-image.oci.tar "$src/build/drainer-image.oci.tar"
	else
		pass "SKIP digest comparison: build/drainer-image.oci.tar is of revision ${from_clone##* }, not HEAD (deploy/image/build first)"
	fi
else
	pass "SKIP digest comparison: no build/drainer-image.oci.tar of a clean HEAD"
fi
finish
