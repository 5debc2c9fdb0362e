#!/usr/bin/env bash
# Simulated nodes on a real control plane, nodekit's beside kwok's:
# etcd, kube-apiserver (audit log on), kube-scheduler and
# kube-controller-manager (node-lifecycle, taint-eviction, replicaset and
# deployment controllers), fresh for each run, then
# examples/simnodes/cmd/simbench with examples/simnodes (nodekit) or kwok
# (sigs.k8s.io/kwok v0.8.0, built from the Go module proxy). Each run
# writes a JSON result; the last step writes their table into
# docs/performance.md.
#
#   bash bench/simnodes.sh                  # 100 and 1,000 nodes: nodekit, kwok, nodekit in 4 processes at 1,000
#   bash bench/simnodes.sh 100              # the 100-node runs only
#   SIMBENCH_RUNS="nodekit:1000:4" bash bench/simnodes.sh   # runs as impl:nodes:processes
#   bash bench/simnodes.sh report           # the table only, from the results kept
#
# Servers come from the cache hack/conformance.sh builds (bash
# hack/conformance.sh build); binaries and results are kept in
# ${SIMBENCH_CACHE:-~/.cache/nodekit-simnodes}. Ports (env SIMBENCH_*_PORT):
# etcd 24791-24792, apiserver 24443, controller-manager 24257, scheduler
# 24259, away from hack/conformance.sh's. SIMBENCH_PODS_PER_NODE (default
# 10) sizes the Deployment, SIMBENCH_REST (default 60s) the windows at
# rest; SIMBENCH_KEEP=1 keeps each run's logs and audit log;
# SIMBENCH_SIMNODES_ARGS adds flags to every simnodes process (e.g.
# "-pprof-addr 127.0.0.1:0": each logs its address in its simnodes-i.log,
# kept with SIMBENCH_KEEP=1). Needs openssl and curl.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "simnodes.sh: $*" >&2; }
die() { log "$*"; exit 1; }

CACHE=$(bash "$repo/e2e/hack/servers.sh" dir)
HOME_DIR=${SIMBENCH_CACHE:-$HOME/.cache/nodekit-simnodes}
BIN=$HOME_DIR/bin
RESULTS=$HOME_DIR/results
KWOK_VERSION=${SIMBENCH_KWOK_VERSION:-v0.8.0}
ETCD_PORT=${SIMBENCH_ETCD_PORT:-24791}
API_PORT=${SIMBENCH_APISERVER_PORT:-24443}
KCM_PORT=${SIMBENCH_KCM_PORT:-24257}
SCHED_PORT=${SIMBENCH_SCHED_PORT:-24259}
mkdir -p "$BIN" "$RESULTS"

report() {
	(cd "$repo" && "$BIN/simbench" -report "$RESULTS/*.json" -doc docs/performance.md)
	log "table written into docs/performance.md"
}

build() {
	for b in etcd kube-apiserver kube-scheduler kube-controller-manager; do
		[ -x "$CACHE/$b" ] || die "$CACHE/$b missing: bash hack/conformance.sh build"
	done
	(cd "$repo/examples/simnodes" && go build -o "$BIN/simnodes" . && go build -o "$BIN/simbench" ./cmd/simbench)
}

build_kwok() {
	if [ ! -x "$BIN/kwok" ]; then
		log "building kwok $KWOK_VERSION from the Go module proxy"
		GOBIN="$BIN" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
	fi
	# kwok's default stages (what kwokctl gives a cluster): nodes Ready at
	# once with a Lease heartbeat, pods Running and Ready at once,
	# completed, deleted.
	local st; st="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
	[ -d "$st" ] || (cd /tmp && go mod download "sigs.k8s.io/kwok@$KWOK_VERSION")
	local f first=1
	: >"$BIN/kwok-stages.yaml"
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		[ $first = 1 ] || echo "---" >>"$BIN/kwok-stages.yaml"
		first=0
		cat "$st/$f" >>"$BIN/kwok-stages.yaml"
	done
}

PIDS=()
start() { # NAME ARGS...
	local name=$1; shift
	setsid "$@" >"$RUN/$name.log" 2>&1 </dev/null &
	PIDS+=("$!")
	echo "$!" >"$RUN/$name.pid"
}
stop_all() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$p" 2>/dev/null || true
	done
	PIDS=()
}
trap stop_all EXIT
api() { curl -sf --cacert "$RUN/ca.crt" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$API_PORT$1"; }
wait_for() { # WHAT SECONDS CMD...
	local what=$1 secs=$2; shift 2
	for _ in $(seq 1 $((secs * 5))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	die "$what did not come up in ${secs}s (logs in $RUN)"
}

control_plane() {
	TOKEN=simbench-$$
	(
		cd "$RUN"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=simbench-ca 2>/dev/null
		openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=apiserver 2>/dev/null
		echo "subjectAltName=IP:127.0.0.1,DNS:localhost" >apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 2 -extfile apiserver.ext 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		echo "$TOKEN,admin,admin,system:masters" >tokens.csv
		cat >audit-policy.yaml <<'P'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
P
	)
	cat >"$RUN/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$RUN/ca.crt"}
users:
- name: admin
  user: {token: "$TOKEN"}
contexts:
- name: c
  context: {cluster: c, user: admin}
current-context: c
KC
	start etcd "$CACHE/etcd" --name=simbench --data-dir="$RUN/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
		--initial-cluster="simbench=http://127.0.0.1:$((ETCD_PORT + 1))" --log-level=warn --unsafe-no-fsync=true --quota-backend-bytes=8589934592
	wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
	# ServiceAccount admission is off: no token controller runs, and the
	# simulated pods mount nothing.
	start kube-apiserver "$CACHE/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 --secure-port="$API_PORT" \
		--tls-cert-file="$RUN/apiserver.crt" --tls-private-key-file="$RUN/apiserver.key" --client-ca-file="$RUN/ca.crt" \
		--token-auth-file="$RUN/tokens.csv" --service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$RUN/sa.pub" --service-account-signing-key-file="$RUN/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16 --authorization-mode=RBAC --endpoint-reconciler-type=none \
		--disable-admission-plugins=ServiceAccount --profiling=false \
		--max-requests-inflight=800 --max-mutating-requests-inflight=400 \
		--audit-policy-file="$RUN/audit-policy.yaml" --audit-log-path="$RUN/audit.log" --audit-log-maxsize=0 \
		--audit-log-mode=batch
	wait_for kube-apiserver 180 api /readyz
	# Evictions at once (a bench, not a production setting), so a killed
	# shard's pods go within the run.
	# Both give up if the apiserver is not healthy within 40s of their
	# start (a loaded machine): wait for it, and check they run.
	wait_for "kube-apiserver /healthz" 180 api /healthz
	local try
	for try in 1 2 3; do
		start kube-controller-manager "$CACHE/kube-controller-manager" --kubeconfig="$RUN/kubeconfig" \
			--controllers=node-lifecycle-controller,taint-eviction-controller,replicaset-controller,deployment-controller \
			--leader-elect=false --secure-port="$KCM_PORT" --bind-address=127.0.0.1 \
			--kube-api-qps=300 --kube-api-burst=600 --node-eviction-rate=100 --secondary-node-eviction-rate=100
		start kube-scheduler "$CACHE/kube-scheduler" --kubeconfig="$RUN/kubeconfig" \
			--leader-elect=false --secure-port="$SCHED_PORT" --bind-address=127.0.0.1 --kube-api-qps=300 --kube-api-burst=600
		sleep 15
		if kill -0 "$(cat "$RUN/kube-controller-manager.pid")" 2>/dev/null && kill -0 "$(cat "$RUN/kube-scheduler.pid")" 2>/dev/null; then
			return 0
		fi
		log "controller-manager or scheduler exited (try $try); starting them again"
		kill "$(cat "$RUN/kube-controller-manager.pid")" "$(cat "$RUN/kube-scheduler.pid")" 2>/dev/null || true
		sleep 1
	done
	die "controller-manager or scheduler does not stay up (logs in $RUN)"
}

run_one() { # IMPL NODES PROCESSES
	local impl=$1 nodes=$2 procs=$3
	RUN=$(mktemp -d "/tmp/simbench.$impl-$nodes-$procs.XXXX")
	log "$impl, $nodes nodes, $procs process(es): cluster in $RUN"
	if [ "$impl" = kwok ]; then build_kwok; fi
	control_plane
	local load; load="$(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) on $(nproc) cores"
	local status=0
	"$BIN/simbench" -kubeconfig "$RUN/kubeconfig" -impl "$impl" -nodes "$nodes" -shards "$procs" \
		-simnodes "$BIN/simnodes" -simnodes-args "${SIMBENCH_SIMNODES_ARGS:-}" -kwok "$BIN/kwok" -kwok-config "$BIN/kwok-stages.yaml" \
		-audit "$RUN/audit.log" -apiserver-pid "$RUN/kube-apiserver.pid" -workdir "$RUN" \
		-rest "${SIMBENCH_REST:-60s}" -pods-per-node "${SIMBENCH_PODS_PER_NODE:-10}" -load "$load" -out "$RESULTS/$impl-$nodes-$procs.json" || status=$?
	stop_all
	rm -rf "$RUN/etcd"
	if [ $status = 0 ] && [ -z "${SIMBENCH_KEEP:-}" ]; then rm -rf "$RUN"; else log "logs and audit log kept in $RUN"; fi
	return $status
}

case "${1:-}" in
report) report; exit 0 ;;
esac
build
runs=${SIMBENCH_RUNS:-}
if [ -z "$runs" ]; then
	for n in "${@:-100 1000}"; do
		for n1 in $n; do
			runs="$runs nodekit:$n1:1 kwok:$n1:1"
			if [ "$n1" -ge 1000 ]; then runs="$runs nodekit:$n1:4"; fi
		done
	done
fi
for r in $runs; do
	IFS=: read -r impl nodes procs <<<"$r"
	run_one "$impl" "$nodes" "$procs" || log "$r failed"
done
report
