#!/usr/bin/env bash
# Runs Kubernetes' own node conformance tests ([NodeConformance] of
# k8s.io/kubernetes/test/e2e) against one node: a kubenode node on containerd
# (examples/kubenode -cri) or the kubelet of the same version on the same
# containerd, and writes the results side by side into docs/conformance.md.
#
#   bash hack/conformance.sh build     # build what is missing, print the cache dir
#   bash hack/conformance.sh cached    # exit 0 if what smoke needs is built
#   bash hack/conformance.sh nodekit   # the suite on a kubenode node
#   bash hack/conformance.sh kubelet   # the suite on the kubelet
#   bash hack/conformance.sh both      # one after the other, same cluster setup
#   bash hack/conformance.sh kubelet-recheck  # the kubelet on what nodekit did not pass
#   bash hack/conformance.sh nodekit-recheck  # nodekit again on what it did not pass
#                                             # (or on CONFORMANCE_RECHECK_FOCUS)
#   bash hack/conformance.sh smoke     # a handful of tests on nodekit (CI)
#   bash hack/conformance.sh report    # rewrite docs/conformance.md from the last results
#   bash hack/conformance.sh up nodekit|kubelet  # the cluster only, until Ctrl-C
#
# Everything is built from the Go module proxy at the k8s.io/kubernetes
# version e2e/tools/go.mod pins and cached by version next to e2e/hack/
# servers.sh's etcd and kube-apiserver: kube-controller-manager,
# kube-scheduler, the kubelet, e2e.test (go test -c), agnhost and nnp. The
# suite's images are made locally as OCI archives (no registry needed) and
# imported into a private containerd (hack/containerd.sh).
#
# Environment: CONFORMANCE_PROCS (ginkgo processes, default 4), CONFORMANCE_*_PORT
# and CONFORMANCE_NODEKIT_CGROUP_ROOT (to run two clusters at once),
# CONFORMANCE_RESULTS (results dir, default $cache/results),
# NODEKIT_BRIDGE / NODEKIT_SUBNET (containerd's CNI bridge, default
# nkconf0 / 10.244.86.0/24). Needs root, and what hack/containerd.sh needs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$repo/e2e/tools"

log() { echo "conformance.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=hack/cluster.sh
. "$repo/hack/cluster.sh"

# ---- the suite -------------------------------------------------------------

FOCUS='\[NodeConformance\]'
# The one skip list, for both nodes. [Slow], [Serial], [Disruptive] and
# [Flaky] by policy; the rest need what a one-node cluster without
# kube-proxy, cluster DNS or a registry has not (see docs/conformance.md).
# The one skip list, for both nodes: a pattern and why, a line each. [Slow],
# [Serial], [Disruptive] and [Flaky] by policy; the rest need what this
# one-node cluster without kube-proxy, cluster DNS or a registry has not, or
# what the locally made images cannot do.
SKIPS=$(cat <<'TXT'
\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]	policy: not in a node's quick conformance run
\[sig-node\] (ConfigMap|Secrets) should be consumable via the environment	image: Debian's busybox 1.35 ash drops environment names containing "-" (the envFrom prefix "p-"); upstream's busybox 1.37 keeps them
should function for node-pod communication: udp	image: the agnhost stand-in has no nc that speaks UDP
TXT
)
SKIP=$(printf '%s\n' "$SKIPS" | cut -f1 | paste -sd'|')
# smoke: a few specs nodekit passes, a few minutes; --label-filter keeps
# them to [NodeConformance].
SMOKE_FOCUS='Pods should get a host IP|Pods should be submitted and removed|Downward API volume should provide container.s cpu limit|ConfigMap should be consumable from pods in volume \[Conformance\]|runAsNonRoot should run with an explicit non-root user ID|Probing container should be restarted with a exec "cat /tmp/health" liveness probe|Secrets should be consumable from pods in env vars'

run_suite() { # NODE FOCUS OUTDIR
	local node=$1 focus=$2 out=$3 procs=${CONFORMANCE_PROCS:-4}
	mkdir -p "$out"
	local start=$SECONDS
	echo "$CACHE/ginkgo --procs=$procs --focus='$focus' --skip='\$SKIP' --label-filter=NodeConformance --timeout=2h $CACHE/e2e.test -- --kubeconfig=... --provider=skeleton" >"$out/$node.command"
	set +e
	(cd "$out" && KUBECONFIG="$RUN/kubeconfig" "$CACHE/ginkgo" --procs="$procs" --focus="$focus" --skip="$SKIP" \
		--label-filter=NodeConformance --timeout=2h --no-color --json-report="$node.json" --output-dir="$out" \
		"$CACHE/e2e.test" -- --kubeconfig="$RUN/kubeconfig" --provider=skeleton \
		--report-dir="$RUN/e2e-report" --e2e-output-dir="$RUN/e2e-output" \
		--allowed-not-ready-nodes=0 --minStartupPods=0 --dump-logs-on-failure=false \
		--node-os-distro=debian) >"$out/$node.log" 2>&1
	local rc=$?
	set -e
	echo $((SECONDS - start)) >"$out/$node.seconds"
	log "$node: suite ran in $((SECONDS - start))s (ginkgo exit $rc); log $out/$node.log"
}

# ---- one run ---------------------------------------------------------------

cleanup() { stop_cluster "${CONFORMANCE_KEEP:-}"; }

one_run() { # NODE(nodekit|kubelet) FOCUS RESULTS
	local node=$1 focus=$2 results=$3
	RUN=$(mktemp -d /tmp/nkconf.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	save_host_state
	HOST_IP=$(host_ip)
	NODE_NAME=$(hostname | tr 'A-Z' 'a-z')
	certs "$HOST_IP"
	make_images
	local envlines
	envlines=$(NODEKIT_BRIDGE=${NODEKIT_BRIDGE:-nkconf0} NODEKIT_SUBNET=${NODEKIT_SUBNET:-10.244.86.0/24} bash "$repo/hack/containerd.sh" up)
	eval "$envlines"
	CONTAINERD_DIR=$NODEKIT_CONTAINERD_DIR
	CRI=$NODEKIT_CRI_ENDPOINT
	import_images
	control_plane
	local t0=$SECONDS
	case $node in
	nodekit) start_nodekit ;;
	kubelet) start_kubelet ;;
	esac
	wait_for "node $NODE_NAME Ready" 120 node_ready
	log "$node: node Ready in $((SECONDS - t0))s"
	if [ -z "$focus" ]; then # up: the cluster only, until signalled
		log "$node: cluster up; KUBECONFIG=$RUN/kubeconfig; logs in $RUN; Ctrl-C stops it"
		sleep infinity &
		PIDS+=("$!")
		wait "$!" || true
		return
	fi
	run_suite "$node" "$focus" "$results"
	cp "$RUN/node.log" "$results/$node.node.log" 2>/dev/null || true
	cleanup
	trap - EXIT
}

# ---- the report ------------------------------------------------------------

report() { # RESULTS
	local results=$1
	{
		echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
		echo "kube=$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
		echo "etcd=$(cd "$tools" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
		echo "containerd=$(containerd --version | awk '{print $3}')"
		echo "runc=$(runc --version | head -1 | awk '{print $3}')"
		echo "go=$(go env GOVERSION)"
		echo "kernel=$(uname -r)"
		echo "os=$(. /etc/os-release && echo "$PRETTY_NAME")"
		echo "cpus=$(nproc)"
		echo "mem=$(awk '/^MemTotal:/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
		echo "cgroup=$(if [ -e /sys/fs/cgroup/cgroup.controllers ]; then echo v2; else echo v1; fi)"
		echo "procs=${CONFORMANCE_PROCS:-4}"
	} >"$results/meta"
	images_doc >"$results/images.md"
	printf '%s\n' "$SKIPS" >"$results/skips"
	python3 "$repo/hack/conformance_report.py" "$results" "$FOCUS" "$SKIP" >"$repo/docs/conformance.md"
	log "wrote docs/conformance.md"
}

preflight() { # [kubelet|nokubelet]: what to build
	[ "$(id -u)" = 0 ] || die "must run as root"
	command -v openssl >/dev/null || die "openssl not found"
	command -v curl >/dev/null || die "curl not found"
	if [ -n "${CONFORMANCE_NO_BUILD:-}" ]; then # use what is built (debugging)
		CACHE=$(bash "$repo/e2e/hack/servers.sh" dir)
	else
		CACHE=$(build_all "${1:-kubelet}")
	fi
	RESULTS=${CONFORMANCE_RESULTS:-$CACHE/results}
	mkdir -p "$RESULTS"
}

case "${1:-}" in
build) build_all ;;
cached) # exit 0 if what smoke needs is built
	dir=$(bash "$repo/e2e/hack/servers.sh" dir)
	for b in etcd kube-apiserver kube-scheduler kube-controller-manager agnhost nnp ginkgo e2e.test; do
		[ -x "$dir/$b" ] || { log "$b is not built in $dir"; exit 1; }
	done
	;;
nodekit | kubelet)
	preflight "$([ "$1" = kubelet ] && echo kubelet || echo nokubelet)"
	if [ "$1" = kubelet ]; then rm -f "$RESULTS/kubelet.recheck"; fi
	one_run "$1" "$FOCUS" "$RESULTS"
	report "$RESULTS"
	;;
both)
	preflight
	one_run nodekit "$FOCUS" "$RESULTS"
	rm -f "$RESULTS/kubelet.recheck"
	one_run kubelet "$FOCUS" "$RESULTS"
	report "$RESULTS"
	;;
kubelet-recheck)
	# The kubelet on only the tests nodekit did not pass in its last run:
	# the comparison that matters, in a fraction of the time.
	preflight kubelet
	focus=${CONFORMANCE_RECHECK_FOCUS:-} # (or given, e.g. while the nodekit run ends)
	if [ -z "$focus" ]; then
		focus=$(python3 "$repo/hack/conformance_report.py" --failed "$RESULTS" nodekit) ||
			die "no nodekit failures in $RESULTS to recheck"
	fi
	one_run kubelet "$focus" "$RESULTS"
	touch "$RESULTS/kubelet.recheck"
	report "$RESULTS"
	;;
up)
	case "${2:-}" in nodekit | kubelet) ;; *) die "usage: $0 up nodekit|kubelet" ;; esac
	preflight "$([ "$2" = kubelet ] && echo kubelet || echo nokubelet)"
	one_run "$2" "" "$RESULTS"
	;;
nodekit-recheck)
	# nodekit again on only the tests it did not pass in its last full run
	# (after fixes), into a results dir of its own; prints the summary.
	# CONFORMANCE_RECHECK_FOCUS, if given, is the focus instead (a few
	# specs while fixing them); docs/conformance.md is not rewritten.
	preflight nokubelet
	focus=${CONFORMANCE_RECHECK_FOCUS:-}
	if [ -z "$focus" ]; then
		focus=$(python3 "$repo/hack/conformance_report.py" --failed "$RESULTS" nodekit) ||
			die "no nodekit failures in $RESULTS to recheck"
	fi
	out=${CONFORMANCE_RECHECK_RESULTS:-$RESULTS/nodekit-recheck}
	mkdir -p "$out"
	one_run nodekit "$focus" "$out"
	python3 "$repo/hack/conformance_report.py" --summary "$out" nodekit
	;;
smoke)
	preflight nokubelet
	out=$(mktemp -d /tmp/nkconf-smoke.XXXXXX)
	one_run nodekit "$SMOKE_FOCUS" "$out"
	python3 "$repo/hack/conformance_report.py" --summary "$out" nodekit
	rm -rf "$out"
	;;
report)
	CACHE=$(bash "$repo/e2e/hack/servers.sh" dir)
	report "${CONFORMANCE_RESULTS:-$CACHE/results}"
	;;
*) die "usage: $0 build | cached | nodekit | kubelet | both | kubelet-recheck | nodekit-recheck | smoke | report | up nodekit|kubelet" ;;
esac
