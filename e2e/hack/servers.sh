#!/usr/bin/env bash
# Builds the servers the e2e tests run against, etcd and kube-apiserver, from
# the Go module proxy (versions pinned in e2e/tools/go.mod; no prebuilt
# downloads needed) and caches them by version:
#
#   bash e2e/hack/servers.sh build   # build what is missing, print the directory
#   bash e2e/hack/servers.sh dir     # print the directory only
#
# Cache: ${NODEKIT_E2E_CACHE:-$HOME/.cache/nodekit-e2e}/kube-<v>-etcd-<v>/
# Parallelism: $NODEKIT_E2E_BUILD_P (go build -p). Default: one job per core
# and per 3 GB of available memory (a compile or link of kube-apiserver peaks
# at about 2.8 GB), at least 1.
set -euo pipefail
tools="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools" && pwd)"
cd "$tools"
versions=$(go list -m -f '{{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3)
kube=${versions%%$'\n'*}
etcd=${versions##*$'\n'}
dir="${NODEKIT_E2E_CACHE:-$HOME/.cache/nodekit-e2e}/kube-$kube-etcd-$etcd"

case "${1:-}" in
dir) echo "$dir"; exit 0 ;;
build) ;;
*) echo "usage: $0 build|dir" >&2; exit 2 ;;
esac

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # concurrent test binaries wait for one build

jobs=${NODEKIT_E2E_BUILD_P:-}
if [ -z "$jobs" ]; then
	mem_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
	jobs=$(( mem_kb / (3 * 1024 * 1024) ))
	cores=$(nproc 2>/dev/null || echo 1)
	if [ "$jobs" -gt "$cores" ]; then jobs=$cores; fi
	if [ "$jobs" -lt 1 ]; then jobs=1; fi
fi

build() { # name package [ldflags]
	if [ -x "$dir/$1" ]; then return; fi
	echo "servers.sh: building $1 from $2 into $dir (go build -p $jobs)" >&2
	local start=$SECONDS
	GOFLAGS="-p=$jobs -buildvcs=false" \
		go build -trimpath -ldflags "${3:-}" -o "$dir/.$1.tmp" "$2" >&2
	mv "$dir/.$1.tmp" "$dir/$1"
	echo "servers.sh: built $1 in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3
minor=${kube#v1.}; minor=${minor%%.*}
v=k8s.io/component-base/version
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
	"-X $v.gitVersion=$kube -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
echo "$dir"
