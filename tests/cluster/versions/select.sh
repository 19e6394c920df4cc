# Sourced by tests/cluster/build and test (after $here and GOFLAGS are set): the
# Kubernetes release to build against. DRAINER_CLUSTER_KUBE_VERSION (e.g. 1.37.2)
# selects versions/go-VERSION.mod (and .sum, made by versions/gen); unset, or the
# version go.mod pins, selects go.mod (the default release). The Go sources are the
# same for every release: where an API differs, a file says which releases it is
# for with the build tags set here, kube1.N for each minor N up to the release's
# (cumulative, like Go's go1.N: `//go:build kube1.37` is 1.37 and newer).
# Sets modfile, sumfile, kube_version (vX.Y.Z), kube_minor, kube_tags (for -tags: our
# Go only; the control plane needs none) and GOFLAGS (-modfile).
default_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$here/go.mod")
[ -n "$default_version" ] || default_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")
[ -n "$default_version" ] || { echo "cannot find the k8s.io/kubernetes version in $here/go.mod" >&2; exit 1; }
kube_want=${DRAINER_CLUSTER_KUBE_VERSION:-${default_version#v}}
kube_want=${kube_want#v}
if [ "v$kube_want" = "$default_version" ]; then
	modfile=$here/go.mod
else
	modfile=$here/versions/go-$kube_want.mod
	if [ ! -f "$modfile" ] || [ ! -f "${modfile%.mod}.sum" ]; then
		echo "DRAINER_CLUSTER_KUBE_VERSION=$kube_want: no $modfile (and .sum); releases: ${default_version#v} (go.mod)$(cd "$here/versions" && ls go-*.mod 2>/dev/null | sed 's/^go-/ /; s/\.mod$//' | tr -d '\n') (add one with versions/gen $kube_want)" >&2
		exit 2
	fi
	GOFLAGS="$GOFLAGS -modfile=$modfile"
fi
sumfile=${modfile%.mod}.sum
kube_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$modfile")
[ "$kube_version" = "v$kube_want" ] || { echo "$modfile pins k8s.io/kubernetes $kube_version, not v$kube_want" >&2; exit 1; }
kube_minor=${kube_version#v1.}
kube_minor=${kube_minor%%.*}
kube_tags=
for ((m = 30; m <= kube_minor; m++)); do kube_tags+=${kube_tags:+,}kube1.$m; done
export GOFLAGS
