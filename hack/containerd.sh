#!/usr/bin/env bash
# Starts and stops a private containerd for nodekit's integration tests.
#
#   eval "$(bash hack/containerd.sh up)"    # prints export lines on stdout
#   go test -race -count=1 ./...
#   bash hack/containerd.sh down            # uses $NODEKIT_CONTAINERD_DIR
#   bash hack/containerd.sh crash DIR       # SIGKILL containerd only (shims live on)
#   bash hack/containerd.sh restart DIR     # start it again on the same state
#
# NODEKIT_BRIDGE and NODEKIT_SUBNET name the CNI bridge and its subnet, so a
# second instance (the crash tests') does not share the first one's network.
#
# Everything (root, state, socket, CNI config and IPAM state, logs) lives in
# one temp directory. No registry is needed: a pause image and a busybox image
# are built from busybox-static as OCI archives and imported.
# Needs root and: containerd runc containernetworking-plugins busybox-static.
#
# NODEKIT_CONTAINERD_BIN, if set, is a directory with containerd, its
# containerd-shim-runc-v2 and ctr to use instead of those on PATH (containerd
# 2.x from hack/containerd2.sh: it streams container events). Give a second
# instance its own NODEKIT_BRIDGE and NODEKIT_SUBNET.
set -euo pipefail

PAUSE_IMAGE=${NODEKIT_PAUSE_IMAGE:-nodekit.local/pause:1}
TEST_IMAGE=${NODEKIT_TEST_IMAGE:-nodekit.local/busybox:1}
BRIDGE=${NODEKIT_BRIDGE:-nodekit0}
SUBNET=${NODEKIT_SUBNET:-10.244.77.0/24}
CNI_BIN=${NODEKIT_CNI_BIN:-/usr/lib/cni}
if [ -n "${NODEKIT_CONTAINERD_BIN:-}" ]; then
	export PATH="$NODEKIT_CONTAINERD_BIN:$PATH" # its shim, too
fi

log() { echo "containerd.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# sha256 of a file, hex only.
sha() { sha256sum "$1" | cut -d' ' -f1; }

# put_blob FILE DIR: moves FILE into DIR/blobs/sha256, prints its digest hex.
put_blob() {
	local h; h=$(sha "$1")
	mv "$1" "$2/blobs/sha256/$h"
	echo "$h"
}

# build_image NAME ENTRYPOINT_JSON OUT.tar LAYER.tar: writes an OCI archive.
build_image() {
	local name=$1 entry=$2 out=$3 layer=$4 dir
	dir=$(mktemp -d "$WORK/img.XXXXXX")
	mkdir -p "$dir/blobs/sha256"
	local arch; arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
	cp "$layer" "$dir/layer.tar"
	local lsize; lsize=$(stat -c %s "$dir/layer.tar")
	local lhash; lhash=$(put_blob "$dir/layer.tar" "$dir")
	printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$arch" "$entry" "$lhash" >"$dir/config.json"
	local csize; csize=$(stat -c %s "$dir/config.json")
	local chash; chash=$(put_blob "$dir/config.json" "$dir")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
		"$chash" "$csize" "$lhash" "$lsize" >"$dir/manifest.json"
	local msize; msize=$(stat -c %s "$dir/manifest.json")
	local mhash; mhash=$(put_blob "$dir/manifest.json" "$dir")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$mhash" "$msize" "$arch" "$name" "${name##*:}" >"$dir/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
	tar -C "$dir" -cf "$out" oci-layout index.json blobs
	rm -rf "$dir"
}

build_layer() {
	local busybox; busybox=$(command -v busybox) || die "busybox not found: apt-get install -y busybox-static"
	local root="$WORK/rootfs"
	mkdir -p "$root"/{bin,etc,proc,sys,dev,tmp,var/log}
	cp "$busybox" "$root/bin/busybox"
	local applet
	for applet in $("$busybox" --list); do
		[ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
	done
	echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"
	echo 'root:x:0:' >"$root/etc/group"
	chmod 1777 "$root/tmp"
	tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$WORK/layer.tar" .
	rm -rf "$root"
}

write_config() {
	local runc; runc=$(command -v runc) || die "runc not found: apt-get install -y runc"
	mkdir -p "$D/cni/conf" "$D/cni/ipam"
	echo "$BRIDGE" >"$D/bridge" # for down
	echo "${NODEKIT_CONTAINERD_BIN:-}" >"$D/bin" # for down
	if containerd --version | grep -q ' v2\.'; then
		cat >"$D/config.toml" <<TOML
version = 3
root = "$D/root"
state = "$D/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$D/containerd.sock"

[ttrpc]
  address = "$D/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$D/opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins."io.containerd.grpc.v1.cri"]
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$CNI_BIN"]
    conf_dir = "$D/cni/conf"
    max_conf_num = 1
TOML
	else
		write_config_v2 "$runc"
	fi
	write_cni
}

write_config_v2() {
	local runc=$1
	cat >"$D/config.toml" <<TOML
version = 2
root = "$D/root"
state = "$D/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$D/containerd.sock"

[ttrpc]
  address = "$D/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$D/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$D/cni/conf"
    max_conf_num = 1
TOML
}

write_cni() {
	cat >"$D/cni/conf/10-nodekit.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "nodekit",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$D/cni/ipam",
        "ranges": [[{"subnet": "$SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
JSON
}

# start_containerd starts containerd on $D's config and waits until it answers.
start_containerd() {
	setsid containerd --config "$D/config.toml" --log-level info >>"$D/containerd.log" 2>&1 </dev/null &
	echo $! >"$D/containerd.pid"
	local i
	for i in $(seq 1 200); do
		if ctr --address "$D/containerd.sock" version >/dev/null 2>&1; then break; fi
		kill -0 "$(cat "$D/containerd.pid")" 2>/dev/null || { tail -20 "$D/containerd.log" >&2; die "containerd exited at start (log: $D/containerd.log)"; }
		sleep 0.1
	done
	ctr --address "$D/containerd.sock" version >/dev/null 2>&1 || die "containerd did not answer on $D/containerd.sock (log: $D/containerd.log)"
}

# crash kills the containerd of DIR with SIGKILL, as a crash would: its
# shims and containers live on.
crash() {
	D=$1
	[ -f "$D/config.toml" ] && [ -f "$D/containerd.pid" ] || die "$D is not a directory made by containerd.sh up"
	local pid; pid=$(cat "$D/containerd.pid")
	kill -9 "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		[ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || break
		sleep 0.05
	done
	log "containerd in $D killed"
}

# restart starts the containerd of DIR again after a crash.
restart() {
	D=$1
	[ -f "$D/config.toml" ] || die "$D is not a directory made by containerd.sh up"
	start_containerd
	log "containerd in $D restarted"
}

ctr_() { ctr --address "$D/containerd.sock" -n k8s.io "$@"; }

up() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	command -v containerd >/dev/null || die "containerd not found: apt-get install -y containerd runc containernetworking-plugins busybox-static"
	[ -x "$CNI_BIN/bridge" ] || die "$CNI_BIN/bridge not found: apt-get install -y containernetworking-plugins"
	D=$(mktemp -d "${TMPDIR:-/tmp}/nodekit-containerd.XXXXXX")
	# A failed start leaves nothing behind either.
	trap 'rc=$?; if [ $rc -ne 0 ]; then log "start failed, cleaning up"; down "$D" || true; fi' EXIT
	WORK="$D/work"
	mkdir -p "$WORK"
	write_config
	start_containerd

	build_layer
	build_image "$PAUSE_IMAGE" '["/bin/sleep","2147483647"]' "$WORK/pause.tar" "$WORK/layer.tar"
	build_image "$TEST_IMAGE" '["/bin/sh"]' "$WORK/busybox.tar" "$WORK/layer.tar"
	ctr_ images import "$WORK/pause.tar" >&2
	ctr_ images import "$WORK/busybox.tar" >&2
	rm -rf "$WORK"

	# The CRI plugin indexes imports asynchronously; wait until it serves both.
	local here; here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	(cd "$here" && go run ./hack/criwait -endpoint "unix://$D/containerd.sock" -timeout 60s "$PAUSE_IMAGE" "$TEST_IMAGE") >&2 ||
		die "the CRI plugin did not list the images (log: $D/containerd.log)"

	log "containerd is up in $D"
	echo "export NODEKIT_CONTAINERD_DIR=$D"
	echo "export NODEKIT_CRI_ENDPOINT=unix://$D/containerd.sock"
	echo "export NODEKIT_TEST_IMAGE=$TEST_IMAGE"
	echo "export NODEKIT_PAUSE_IMAGE=$PAUSE_IMAGE"
}

# pids_with_arg S: pids of processes whose command line contains S.
pids_with_arg() {
	local p
	for p in /proc/[0-9]*; do
		if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$1"; then echo "${p#/proc/}"; fi
	done
}

down() {
	D=${1:-${NODEKIT_CONTAINERD_DIR:-}}
	[ -n "$D" ] || die "usage: containerd.sh down DIR (or set NODEKIT_CONTAINERD_DIR)"
	[ -f "$D/config.toml" ] || die "$D is not a directory made by containerd.sh up"
	if [ -s "$D/bin" ]; then PATH="$(cat "$D/bin"):$PATH"; fi
	local netns="" c pid m
	if [ -S "$D/containerd.sock" ] && ctr --address "$D/containerd.sock" version >/dev/null 2>&1; then
		for c in $(ctr_ containers ls -q 2>/dev/null); do
			netns+=" $(ctr_ containers info "$c" 2>/dev/null | grep -o '/var/run/netns/cni-[0-9a-f-]*' | head -1 || true)"
			ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
		done
		for c in $(ctr_ containers ls -q 2>/dev/null); do
			for _ in 1 2 3 4 5 6 7 8 9 10; do
				ctr_ tasks delete -f "$c" >/dev/null 2>&1 && break
				ctr_ tasks ls -q 2>/dev/null | grep -qx "$c" || break
				sleep 0.2
			done
			ctr_ containers delete "$c" >/dev/null 2>&1 || true
		done
	fi
	if [ -f "$D/containerd.pid" ]; then
		pid=$(cat "$D/containerd.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	# Shims of tasks that did not go away, and their containers' processes.
	for pid in $(pids_with_arg "$D/containerd.sock"); do kill -9 "$pid" 2>/dev/null || true; done
	for m in $(awk -v d="$D" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	for m in $netns; do
		[ -e "$m" ] || continue
		umount -l "$m" 2>/dev/null || true
		rm -f "$m"
	done
	if [ -f "$D/bridge" ]; then BRIDGE=$(cat "$D/bridge"); fi
	# iproute2 may be missing; busybox has an ip applet.
	if command -v ip >/dev/null; then ip link delete "$BRIDGE" >/dev/null 2>&1 || true; else busybox ip link delete "$BRIDGE" >/dev/null 2>&1 || true; fi
	rm -rf "$D"
	log "containerd in $D is down"
}

case "${1:-}" in
up) up ;;
down) down "${2:-}" ;;
crash) crash "${2:?usage: $0 crash DIR}" ;;
restart) restart "${2:?usage: $0 restart DIR}" ;;
*) die "usage: $0 up | down [DIR] | crash DIR | restart DIR" ;;
esac
