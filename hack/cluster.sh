#!/usr/bin/env bash
# The one-node cluster hack/conformance.sh and bench/node.sh share, sourced
# by both: builds of the pinned Kubernetes binaries, the suite's images made
# without a registry, the control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) and a node (kubenode or the
# kubelet) on a private containerd. The caller sets repo (the repository
# root), defines log and die, and sets RUN (a temp dir), CACHE, HOST_IP,
# NODE_NAME and CRI before it uses what needs them.
#
# Hooks: APISERVER_EXTRA_ARGS (array) is appended to kube-apiserver's flags;
# NODE_KUBECONFIG (default $RUN/kubeconfig) is the node's kubeconfig;
# CONFORMANCE_KUBELET_CGROUP_ROOT and CONFORMANCE_NODEKIT_CGROUP_ROOT its
# cgroup roots; CONFORMANCE_*_PORT the ports.
tools="$repo/e2e/tools"

# ---- builds ----------------------------------------------------------------

build_all() { # [kubelet|nokubelet]
	local dir; dir=$(bash "$repo/e2e/hack/servers.sh" build)
	exec 9>"$dir/.lock"
	flock 9
	local kube; kube=$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
	local minor=${kube#v1.}; minor=${minor%%.*}
	local v=k8s.io/component-base/version
	local vflags="-X $v.gitVersion=$kube -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	local jobs=${NODEKIT_E2E_BUILD_P:-}
	if [ -z "$jobs" ]; then
		local mem_kb; mem_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
		jobs=$(( mem_kb / (3 * 1024 * 1024) ))
		local cores; cores=$(nproc 2>/dev/null || echo 1)
		if [ "$jobs" -gt "$cores" ]; then jobs=$cores; fi
		if [ "$jobs" -lt 1 ]; then jobs=1; fi
	fi
	# build NAME PACKAGE [test]: go build (or go test -c) into the cache.
	build() {
		if [ -x "$dir/$1" ]; then return; fi
		log "building $1 from $2 into $dir (-p $jobs)"
		local start=$SECONDS
		if [ "${3:-}" = test ]; then
			(cd "$tools" && GOFLAGS="-p=$jobs -buildvcs=false" go test -c -trimpath \
				-ldflags "$vflags" -o "$dir/.$1.tmp" "$2") >&2
		else
			(cd "$tools" && CGO_ENABLED=${CGO:-1} GOFLAGS="-p=$jobs -buildvcs=false" go build -trimpath \
				-ldflags "$vflags" -o "$dir/.$1.tmp" "$2") >&2
		fi
		mv "$dir/.$1.tmp" "$dir/$1"
		log "built $1 in $((SECONDS - start))s"
		echo "$1 $((SECONDS - start))s" >>"$dir/build-times"
	}
	build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	# Static: they run inside the images, which have no libc.
	CGO=0 build agnhost k8s.io/kubernetes/test/images/agnhost
	CGO=0 build nnp k8s.io/kubernetes/test/images/nonewprivs
	CGO=0 build ginkgo github.com/onsi/ginkgo/v2/ginkgo
	build e2e.test k8s.io/kubernetes/test/e2e test
	if [ "${1:-kubelet}" = kubelet ]; then build kubelet k8s.io/kubernetes/cmd/kubelet; fi
	flock -u 9
	echo "$dir"
}

# ---- images ----------------------------------------------------------------

# The suite's images, made without a registry (see images_doc for the list
# docs/conformance.md carries). Names are the suite's defaults
# (test/utils/image/manifest.go at the pinned version), so no
# KUBE_TEST_REPO_LIST is needed.
E2E_REG=registry.k8s.io/e2e-test-images
IMG_BUSYBOX=$E2E_REG/busybox:1.37.0-2
IMG_AGNHOST=$E2E_REG/agnhost:2.66.1
IMG_AGNHOST_PREV=$E2E_REG/agnhost:2.55
IMG_PAUSE=registry.k8s.io/pause:3.10.2
IMG_NONROOT=$E2E_REG/nonroot:1.5
IMG_NONEWPRIVS=$E2E_REG/nonewprivs:1.4
IMG_GLIBC_DNS=$E2E_REG/glibc-dns-testing:2.1.1

images_doc() {
	cat <<DOC
| Image | Made from |
|---|---|
| \`$IMG_BUSYBOX\` | Debian's busybox-static ($(busybox 2>/dev/null | head -1 | cut -d' ' -f2)) with its applets linked in /bin; CMD sh. Its ash drops environment names containing "-" (upstream 1.37 keeps them). |
| \`$IMG_AGNHOST\`, \`$IMG_AGNHOST_PREV\` | agnhost built from k8s.io/kubernetes/test/images/agnhost at the pinned version (static), on the busybox layer (/bin/bash a script that runs busybox ash), with /agnhost-2, /uploads, porter's localhost.crt/key, user-defined-in-image (1000) and group-defined-in-image (50000) as in its Dockerfile; ENTRYPOINT /agnhost, CMD pause. curl is hack/conformance-curl.sh (busybox wget: the forms the suite execs); no bind-tools, iperf, socat, coredns or a UDP-capable nc (upstream's alpine packages). |
| \`$IMG_PAUSE\` | the same agnhost binary, ENTRYPOINT \`/agnhost pause\`, USER 65535:65535 (upstream's pause is C; this one also exits on SIGTERM). The sandbox image stays containerd.sh's nodekit.local/pause:1. |
| \`$IMG_NONROOT\` | the busybox layer with USER 1234 (as its Dockerfile). |
| \`$IMG_GLIBC_DNS\` | the busybox layer (its \`hostname -f\` stands in for glibc's). |
| \`$IMG_NONEWPRIVS\` | the busybox layer with nnp (k8s.io/kubernetes/test/images/nonewprivs, static) setuid root in /usr/local/bin; CMD nnp. |
DOC
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
put_blob() { local h; h=$(sha "$1"); mv "$1" "$2/blobs/sha256/$h"; echo "$h"; }

# oci_image NAME ROOTFS CONFIG_JSON OUT.tar: one-layer OCI archive of ROOTFS
# whose image config is CONFIG_JSON (Entrypoint, Cmd, User, ...).
oci_image() {
	local name=$1 root=$2 cfg=$3 out=$4 d arch
	d=$(mktemp -d "$RUN/img.XXXXXX")
	mkdir -p "$d/blobs/sha256"
	arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
	tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$d/layer.tar" .
	local lsize lhash csize chash msize mhash
	lsize=$(stat -c %s "$d/layer.tar"); lhash=$(put_blob "$d/layer.tar" "$d")
	printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$arch" "$cfg" "$lhash" >"$d/config.json"
	csize=$(stat -c %s "$d/config.json"); chash=$(put_blob "$d/config.json" "$d")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
		"$chash" "$csize" "$lhash" "$lsize" >"$d/manifest.json"
	msize=$(stat -c %s "$d/manifest.json"); mhash=$(put_blob "$d/manifest.json" "$d")
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$mhash" "$msize" "$arch" "$name" "${name##*:}" >"$d/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
	tar -C "$d" -cf "$out" oci-layout index.json blobs
	rm -rf "$d"
}

PATHENV='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

# make_images: the suite's images as OCI archives in $RUN/images.
make_images() {
	local out="$RUN/images" bb root
	mkdir -p "$out"
	bb=$(command -v busybox) || die "busybox not found: apt-get install -y busybox-static"
	base() { # DIR: a busybox root file system
		mkdir -p "$1"/{bin,etc,proc,sys,dev,tmp,var/log,root}
		cp "$bb" "$1/bin/busybox"
		local a
		for a in $("$bb" --list); do [ "$a" = busybox ] || ln -sf busybox "$1/bin/$a"; done
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$1/etc/passwd"
		printf 'root:x:0:\nnobody:x:65534:\n' >"$1/etc/group"
		chmod 1777 "$1/tmp"
	}
	root="$RUN/rootfs-busybox"; base "$root"
	oci_image "$IMG_BUSYBOX" "$root" "{$PATHENV,\"Cmd\":[\"sh\"],\"WorkingDir\":\"/\"}" "$out/busybox.tar"
	cp -a "$root" "$RUN/rootfs-nonroot"
	oci_image "$IMG_NONROOT" "$RUN/rootfs-nonroot" "{$PATHENV,\"Cmd\":[\"sh\"],\"User\":\"1234\",\"WorkingDir\":\"/\"}" "$out/nonroot.tar"
	oci_image "$IMG_GLIBC_DNS" "$root" "{$PATHENV,\"Cmd\":[\"sh\"],\"WorkingDir\":\"/\"}" "$out/glibc-dns-testing.tar"
	printf '%s\n' "$IMG_BUSYBOX" "$IMG_NONROOT" "$IMG_GLIBC_DNS" >"$out/names"
	if [ ! -x "$CACHE/agnhost" ] || [ ! -x "$CACHE/nnp" ]; then
		log "agnhost or nnp not built: only busybox and nonroot made"
		rm -rf "$RUN"/rootfs-*
		return
	fi
	cp -a "$root" "$RUN/rootfs-nnp"
	mkdir -p "$RUN/rootfs-nnp/usr/local/bin"
	install -m 4755 "$CACHE/nnp" "$RUN/rootfs-nnp/usr/local/bin/nnp"
	oci_image "$IMG_NONEWPRIVS" "$RUN/rootfs-nnp" "{$PATHENV,\"Cmd\":[\"nnp\"],\"WorkingDir\":\"/\"}" "$out/nonewprivs.tar"
	local ag="$RUN/rootfs-agnhost" porter
	cp -a "$root" "$ag"
	install -m 755 "$CACHE/agnhost" "$ag/agnhost"
	ln -s agnhost "$ag/agnhost-2"
	# Some specs run /bin/bash in agnhost (alpine's bash upstream); ash stands
	# in (busybox has no bash applet here).
	printf '#!/bin/sh\nexec /bin/sh "$@"\n' >"$ag/bin/bash"
	chmod 755 "$ag/bin/bash"
	mkdir -p "$ag/uploads" "$ag/usr/local/bin"
	install -m 755 "$repo/hack/conformance-curl.sh" "$ag/usr/local/bin/curl"
	porter="$(cd "$tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter"
	cp "$porter/localhost.crt" "$porter/localhost.key" "$ag/"
	echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$ag/etc/passwd"
	printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$ag/etc/group"
	oci_image "$IMG_AGNHOST" "$ag" "{$PATHENV,\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"],\"WorkingDir\":\"/\"}" "$out/agnhost.tar"
	oci_image "$IMG_AGNHOST_PREV" "$ag" "{$PATHENV,\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"],\"WorkingDir\":\"/\"}" "$out/agnhost-prev.tar"
	local pa="$RUN/rootfs-pause"
	mkdir -p "$pa"
	install -m 755 "$CACHE/agnhost" "$pa/agnhost"
	oci_image "$IMG_PAUSE" "$pa" "{$PATHENV,\"Entrypoint\":[\"/agnhost\",\"pause\"],\"User\":\"65535:65535\",\"WorkingDir\":\"/\"}" "$out/pause.tar"
	printf '%s\n' "$IMG_NONEWPRIVS" "$IMG_AGNHOST" "$IMG_AGNHOST_PREV" "$IMG_PAUSE" >>"$out/names"
	rm -rf "$RUN"/rootfs-*
}

import_images() {
	local f
	for f in "$RUN"/images/*.tar; do
		ctr --address "$CONTAINERD_DIR/containerd.sock" -n k8s.io images import "$f" >/dev/null
	done
	# shellcheck disable=SC2046 # one image name a line
	(cd "$repo" && go run ./hack/criwait -endpoint "$CRI" -timeout 60s $(cat "$RUN/images/names")) >&2 ||
		die "the CRI plugin did not list the imported images"
}

# ---- the cluster -----------------------------------------------------------

# Ports of this script's servers, away from the defaults other nodes on the
# machine may use.
ETCD_PORT=${CONFORMANCE_ETCD_PORT:-23791}
APISERVER_PORT=${CONFORMANCE_APISERVER_PORT:-26443}
KCM_PORT=${CONFORMANCE_KCM_PORT:-20257}
SCHED_PORT=${CONFORMANCE_SCHED_PORT:-20259}
NODE_PORT=${CONFORMANCE_NODE_PORT:-20250}
NODE_HEALTHZ_PORT=${CONFORMANCE_NODE_HEALTHZ_PORT:-20248}
TOKEN=conformance-admin-$$

host_ip() { hostname -I 2>/dev/null | awk '{print $1}'; }

certs() {
	local c="$RUN/certs" ip=$1
	mkdir -p "$c"
	(
		cd "$c"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=nodekit-conformance-ca 2>/dev/null
		for who in apiserver node; do
			openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who 2>/dev/null
			printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:%s\n' \
				"$ip" "$NODE_NAME" >$who.ext
			openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt -days 2 -extfile $who.ext 2>/dev/null
		done
		# The apiserver's client certificate to the node's API (kubeadm's
		# apiserver-kubelet-client): kubenode authenticates it against the
		# cluster CA and authorizes system:masters by SubjectAccessReview.
		openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr \
			-subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
		openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 2 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		# One admin token: the suite, the controllers and the node share it
		# (system:masters), the same for both nodes.
		echo "$TOKEN,admin,admin,system:masters" >tokens.csv
	)
	cat >"$RUN/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $c/ca.crt
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: c
  context: {cluster: c, user: admin}
current-context: c
KC
}

PIDS=()
start() { # NAME ARGS...: starts a server in the background, its log in $RUN/NAME.log
	local name=$1; shift
	setsid "$@" >"$RUN/$name.log" 2>&1 </dev/null &
	PIDS+=("$!")
	echo "$!" >"$RUN/$name.pid"
}

api() { curl -sf --cacert "$RUN/certs/ca.crt" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$APISERVER_PORT$1"; }

wait_for() { # WHAT SECONDS CMD...
	local what=$1 secs=$2; shift 2
	local i
	for i in $(seq 1 $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	die "$what did not come up in ${secs}s (logs in $RUN)"
}

control_plane() {
	local c="$RUN/certs"
	start etcd "$CACHE/etcd" --name=conf --data-dir="$RUN/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
		--initial-cluster="conf=http://127.0.0.1:$((ETCD_PORT + 1))" --log-level=warn --unsafe-no-fsync=true
	wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
	start kube-apiserver "$CACHE/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=0.0.0.0 --advertise-address="$HOST_IP" --secure-port="$APISERVER_PORT" \
		--tls-cert-file="$c/apiserver.crt" --tls-private-key-file="$c/apiserver.key" --client-ca-file="$c/ca.crt" \
		--token-auth-file="$c/tokens.csv" \
		--kubelet-client-certificate="$c/kubelet-client.crt" --kubelet-client-key="$c/kubelet-client.key" \
		--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$c/sa.pub" \
		--service-account-signing-key-file="$c/sa.key" --service-cluster-ip-range=10.0.0.0/24 \
		--authorization-mode=Node,RBAC --allow-privileged=true --endpoint-reconciler-type=none --profiling=false \
		${APISERVER_EXTRA_ARGS[@]+"${APISERVER_EXTRA_ARGS[@]}"}
	wait_for kube-apiserver 120 api /readyz
	start kube-controller-manager "$CACHE/kube-controller-manager" --kubeconfig="$RUN/kubeconfig" \
		--controllers=serviceaccount-token-controller,serviceaccount-controller,namespace-controller,garbage-collector-controller,node-lifecycle-controller,root-ca-certificate-publisher-controller,job-controller \
		--service-account-private-key-file="$c/sa.key" --root-ca-file="$c/ca.crt" \
		--leader-elect=false --secure-port="$KCM_PORT" --bind-address=127.0.0.1 --use-service-account-credentials=false
	start kube-scheduler "$CACHE/kube-scheduler" --kubeconfig="$RUN/kubeconfig" \
		--leader-elect=false --secure-port="$SCHED_PORT" --bind-address=127.0.0.1
	wait_for "the default service account" 60 api /api/v1/namespaces/default/serviceaccounts/default
}

# ---- the node --------------------------------------------------------------

SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops"
save_host_state() {
	local s
	: >"$RUN/sysctls"
	for s in $SYSCTLS; do echo "$s=$(sysctl -n "$s")" >>"$RUN/sysctls"; done
	[ -e /var/lib/kubelet ] && echo yes >"$RUN/had-var-lib-kubelet" || true
	[ -e /var/lib/kubelet/device-plugins ] && echo yes >"$RUN/had-device-plugins" || true
	[ -e /var/log/containers ] && echo yes >"$RUN/had-var-log-containers" || true
	ls -1 /var/log/containers 2>/dev/null >"$RUN/var-log-containers" || true
}
restore_host_state() {
	local kv
	if [ -f "$RUN/sysctls" ]; then
		while read -r kv; do sysctl -qw "$kv" || log "could not restore $kv"; done <"$RUN/sysctls"
	fi
	# The kubelet makes /var/lib/kubelet/device-plugins whatever its
	# --root-dir; only what it made goes.
	if [ ! -f "$RUN/had-device-plugins" ]; then rm -rf /var/lib/kubelet/device-plugins; fi
	if [ ! -f "$RUN/had-var-lib-kubelet" ] && [ -d /var/lib/kubelet ]; then
		rmdir /var/lib/kubelet 2>/dev/null || log "/var/lib/kubelet is not empty; left as is"
	fi
	if [ -f "$RUN/had-var-log-containers" ]; then
		local f
		for f in /var/log/containers/*; do
			[ -e "$f" ] || [ -L "$f" ] || continue
			grep -qxF "$(basename "$f")" "$RUN/var-log-containers" || rm -f "$f"
		done
	else
		rm -rf /var/log/containers
	fi
}

# Each node gets a cgroup root of its own: the kubelet kills processes in
# pod cgroups under its kubepods that it does not know.
CG_ROOT_NODEKIT=${CONFORMANCE_NODEKIT_CGROUP_ROOT:-/nkconf-nodekit}
CG_ROOT_KUBELET=${CONFORMANCE_KUBELET_CGROUP_ROOT:-/nkconf-kubelet}
cgroup_dirs() { # ROOT: that cgroup's directory in every v1 hierarchy
	local h
	for h in /sys/fs/cgroup/*/; do
		[ -L "${h%/}" ] && continue
		echo "${h%/}$1"
	done
}
make_cgroup_root() { local d; for d in $(cgroup_dirs "$1"); do mkdir -p "$d"; done; }
remove_cgroup_root() { # depth first; a busy one is reported and left
	local d
	for d in $(cgroup_dirs "$1"); do
		[ -d "$d" ] || continue
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || log "could not remove cgroup $d"
	done
}

start_nodekit() {
	(cd "$repo/examples/kubenode" && go build -o "$RUN/kubenode" .)
	make_cgroup_root "$CG_ROOT_NODEKIT"
	start node "$RUN/kubenode" -kubeconfig "${NODE_KUBECONFIG:-$RUN/kubeconfig}" -node-name "$NODE_NAME" -node-ip "$HOST_IP" \
		-cri "$CRI" -pause-image "$NODEKIT_PAUSE_IMAGE" \
		-pod-logs-root "$RUN/pod-logs" -pods-root "$RUN/pods" \
		-cgroups-per-qos -cgroup-driver cgroupfs -cgroup-root "$CG_ROOT_NODEKIT" \
		-address 0.0.0.0 -port "$NODE_PORT" -healthz-port "$NODE_HEALTHZ_PORT" \
		-tls-cert-file "$RUN/certs/node.crt" -tls-private-key-file "$RUN/certs/node.key" \
		-client-ca-file "$RUN/certs/ca.crt" \
		-eviction-hard "memory.available<1Mi,nodefs.available<1%,imagefs.available<1%"
}

start_kubelet() {
	make_cgroup_root "$CG_ROOT_KUBELET"
	mkdir -p "$RUN/kubelet" "$RUN/pod-logs"
	cat >"$RUN/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $CG_ROOT_KUBELET
containerRuntimeEndpoint: $CRI
address: 0.0.0.0
port: $NODE_PORT
healthzPort: $NODE_HEALTHZ_PORT
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
tlsCertFile: $RUN/certs/node.crt
tlsPrivateKeyFile: $RUN/certs/node.key
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
podLogsDir: $RUN/pod-logs
makeIPTablesUtilChains: false
failSwapOn: false
protectKernelDefaults: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 87600h
evictionHard: {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
serializeImagePulls: false
YAML
	start node "$CACHE/kubelet" --config="$RUN/kubelet.yaml" --kubeconfig="${NODE_KUBECONFIG:-$RUN/kubeconfig}" \
		--root-dir="$RUN/kubelet" --hostname-override="$NODE_NAME" --node-ip="$HOST_IP" --v=1
}

node_ready() {
	api "/api/v1/nodes/$NODE_NAME" | python3 -c '
import json, sys
n = json.load(sys.stdin)
ok = any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
tainted = any(t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints", []))
sys.exit(0 if ok and not tainted else 1)'
}

# stop_cluster [KEEP]: stops what start started (last first, SIGKILL after
# 5 s), containerd, the cgroup roots, restores the host state and, unless
# KEEP is set, unmounts and removes the run's directory.
stop_cluster() {
	local pid keep=${1:-}
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		pid=${PIDS[$i]}
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	PIDS=()
	if [ -n "${CONTAINERD_DIR:-}" ]; then bash "$repo/hack/containerd.sh" down "$CONTAINERD_DIR" || true; CONTAINERD_DIR=""; fi
	remove_cgroup_root "$CG_ROOT_NODEKIT"
	remove_cgroup_root "$CG_ROOT_KUBELET"
	restore_host_state
	if [ -n "${RUN:-}" ] && [ -z "$keep" ]; then
		umount_under "$RUN"
		rm -rf "$RUN"
	fi
	RUN=""
}
umount_under() {
	local m
	for m in $(awk -v d="$1" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" 2>/dev/null || true; done
}
