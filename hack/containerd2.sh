#!/usr/bin/env bash
# Builds containerd 2.x (containerd, its runc shim, ctr) from the Go module
# proxy and caches the binaries by version; prints the bin directory. Debian's
# containerd 1.6 has no GetContainerEvents, so the evented PLEG is tested on
# this one (hack/containerd.sh starts it when NODEKIT_CONTAINERD_BIN points
# here).
#
#   bash hack/containerd2.sh build   # build what is missing, print the bin dir
#   bash hack/containerd2.sh dir     # print the bin dir only
#
# Cache: ${NODEKIT_CONTAINERD2_CACHE:-$HOME/.cache/nodekit-containerd}/<version>/bin
# A cold build takes about 4 minutes on 2 cores.
set -euo pipefail
version=${NODEKIT_CONTAINERD2_VERSION:-v2.4.2}
dir="${NODEKIT_CONTAINERD2_CACHE:-$HOME/.cache/nodekit-containerd}/$version"

case "${1:-}" in
dir) echo "$dir/bin"; exit 0 ;;
build) ;;
*) echo "usage: $0 build|dir" >&2; exit 2 ;;
esac

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # concurrent callers wait for one build

if [ ! -x "$dir/bin/containerd" ] || [ ! -x "$dir/bin/containerd-shim-runc-v2" ] || [ ! -x "$dir/bin/ctr" ]; then
	echo "containerd2.sh: building containerd $version into $dir/bin" >&2
	start=$SECONDS
	rm -rf "$dir/.bin.tmp"
	mkdir -p "$dir/.bin.tmp"
	# A module-mode install needs no checkout; GOFLAGS keeps it off any
	# enclosing module's go.mod.
	(cd "$dir" && GOBIN="$dir/.bin.tmp" CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" \
		go install -tags no_btrfs,no_devmapper,no_zfs \
		"github.com/containerd/containerd/v2/cmd/containerd@$version" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$version" \
		"github.com/containerd/containerd/v2/cmd/ctr@$version" >&2)
	rm -rf "$dir/bin"
	mv "$dir/.bin.tmp" "$dir/bin"
	echo "containerd2.sh: built in $((SECONDS - start))s" >&2
fi
echo "$dir/bin"
