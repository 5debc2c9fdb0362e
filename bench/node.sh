#!/usr/bin/env bash
# The whole agent against the kubelet: one control plane (hack/cluster.sh,
# as hack/conformance.sh's) and one private containerd; in each round a
# kubenode node (examples/kubenode -cri) and then the kubelet of the pinned
# version (the other order in even rounds) run the same scenarios, one agent
# at a time, and bench/nodebench measures them:
#
#   burst      110 busybox pods created at once, then deleted at once
#   churn      5 pods a second created, the oldest deleted, 30 alive, 5 min
#   rest       110 running pods with an exec readiness probe each, 10 min
#   crashloop  20 pods whose container exits at once, 3 min of back-off
#
#   bash bench/node.sh                     # 3 rounds, the durations above
#   bash bench/node.sh -rounds 1 -churn 1m -rest 2m -crashloop 1m
#   bash bench/node.sh -agents kubenode -scenarios burst   # one agent, one scenario
#   bash bench/node.sh -churn-rate 1       # churn at 1 pod a second (default 5)
#   bash bench/node.sh -doc                # also rewrite docs/performance.md's section
#
# Per scenario and agent: creation → Running as seen by a watch (p50, p90,
# p99) and the SLI (spec.nodeName seen set → Running seen; the images are
# present, so no pull), the time until all run and until all are deleted,
# the agent's CPU-seconds and peak and steady RSS (/proc), its apiserver
# requests by verb and resource (an audit log at Metadata level for the
# node's own user: each agent has its own token) and its CRI calls (a
# counting gRPC proxy between agent and containerd). Results (one JSON per
# round, agent and scenario, and table.md) go to -out (default
# $cache/nodebench/DATE).
#
# Environment: NODEKIT_BRIDGE / NODEKIT_SUBNET (containerd's CNI bridge),
# CONFORMANCE_*_PORT, CONFORMANCE_NODEKIT_CGROUP_ROOT and
# CONFORMANCE_KUBELET_CGROUP_ROOT (see hack/cluster.sh). The kubelet writes
# /var/lib/kubelet/device-plugins whatever its --root-dir: do not run its
# side beside another kubelet. Needs root, and what hack/containerd.sh needs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "node.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# shellcheck source=hack/cluster.sh
. "$repo/hack/cluster.sh"

ROUNDS=3
AGENTS="kubenode,kubelet"
SCENARIOS="burst,churn,rest,crashloop"
CHURN=5m
CHURN_RATE=5
REST=10m
CRASHLOOP=3m
BURST_PODS=110
OUT=""
DOC=""
while [ $# -gt 0 ]; do
	case $1 in
	-rounds) ROUNDS=$2; shift 2 ;;
	-agents) AGENTS=$2; shift 2 ;;
	-scenarios) SCENARIOS=$2; shift 2 ;;
	-churn) CHURN=$2; shift 2 ;;
	-churn-rate) CHURN_RATE=$2; shift 2 ;;
	-rest) REST=$2; shift 2 ;;
	-crashloop) CRASHLOOP=$2; shift 2 ;;
	-burst-pods) BURST_PODS=$2; shift 2 ;;
	-out) OUT=$2; shift 2 ;;
	-doc) DOC=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see -h)" ;;
	esac
done
COMMAND="bash bench/node.sh -rounds $ROUNDS -agents $AGENTS -scenarios $SCENARIOS -churn $CHURN -churn-rate $CHURN_RATE -rest $REST -crashloop $CRASHLOOP -burst-pods $BURST_PODS"

[ "$(id -u)" = 0 ] || die "must run as root"
if [ -n "${NODEBENCH_NO_BUILD:-}" ]; then
	CACHE=$(bash "$repo/e2e/hack/servers.sh" dir)
else
	CACHE=$(build_all kubelet)
fi
OUT=${OUT:-$CACHE/nodebench/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

node_name() { echo "nodebench-$1"; }

cleanup() { stop_cluster "${NODEBENCH_KEEP:-}"; }

RUN=$(mktemp -d /tmp/nkbench.XXXXXX)
trap cleanup EXIT
trap 'exit 130' INT TERM
save_host_state
HOST_IP=$(host_ip)
NODE_NAME=$(hostname | tr 'A-Z' 'a-z') # the serving certificate's name
certs "$HOST_IP"

# Each agent its own token, so the audit log tells its requests apart; the
# audit policy records only theirs.
for a in kubenode kubelet; do
	tok=nodebench-$a-$$
	echo "$tok,system:node:$(node_name $a),nodebench-$a,system:masters" >>"$RUN/certs/tokens.csv"
	sed "s/token: .*/token: $tok/" "$RUN/kubeconfig" >"$RUN/kubeconfig-$a"
done
cat >"$RUN/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [system:node:$(node_name kubenode), system:node:$(node_name kubelet)]
- level: None
YAML
APISERVER_EXTRA_ARGS=(--audit-policy-file="$RUN/audit-policy.yaml" --audit-log-path="$RUN/audit.log" --audit-log-maxsize=0)

make_images
envlines=$(NODEKIT_BRIDGE=${NODEKIT_BRIDGE:-nkbench0} NODEKIT_SUBNET=${NODEKIT_SUBNET:-10.244.99.0/24} bash "$repo/hack/containerd.sh" up)
eval "$envlines"
CONTAINERD_DIR=$NODEKIT_CONTAINERD_DIR
CRI=$NODEKIT_CRI_ENDPOINT
import_images
control_plane

(cd "$repo/bench" && go build -o "$RUN/nodebench" ./nodebench)
start criproxy "$RUN/nodebench" proxy -listen "$RUN/cri.sock" -upstream "${CRI#unix://}" -counts "$RUN/cri-counts.sock" ${NODEBENCH_CRI_TRACE:+-trace "$OUT/cri-trace"}
wait_for "the CRI proxy" 30 test -S "$RUN/cri-counts.sock"
CRI=unix://$RUN/cri.sock

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "command: $COMMAND"
	echo "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/^MemTotal:/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), cgroup $(if [ -e /sys/fs/cgroup/cgroup.controllers ]; then echo v2; else echo v1; fi), $(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "versions: kubelet $(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes), containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | head -1 | awk '{print $3}'), $(go env GOVERSION)"
	echo "kubenode: $(cd "$repo" && git rev-parse --short HEAD)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/meta"

# stop_node stops the agent and deletes its Node, so that the next start
# is timed from registration, not from a Node still Ready from the last.
stop_node() {
	local pid; pid=$(cat "$RUN/node.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	curl -sf -X DELETE --cacert "$RUN/certs/ca.crt" -H "Authorization: Bearer $TOKEN" \
		"https://127.0.0.1:$APISERVER_PORT/api/v1/nodes/$NODE_NAME" >/dev/null || log "could not delete Node $NODE_NAME"
}

run_agent() { # AGENT ROUND
	local agent=$1 round=$2 sc
	NODE_NAME=$(node_name "$agent")
	NODE_KUBECONFIG=$RUN/kubeconfig-$agent
	local t0=$SECONDS
	case $agent in
	kubenode) start_nodekit ;;
	kubelet) start_kubelet ;;
	*) die "unknown agent $agent" ;;
	esac
	wait_for "node $NODE_NAME Ready" 120 node_ready
	log "round $round: $agent Ready in $((SECONDS - t0))s"
	sleep 10 # registration's and the first syncs' work is not the scenarios'
	for sc in ${SCENARIOS//,/ }; do
		local dur=""
		case $sc in
		churn) dur=$CHURN ;;
		rest) dur=$REST ;;
		crashloop) dur=$CRASHLOOP ;;
		esac
		local pods="" rate=""
		[ "$sc" = burst ] && pods=$BURST_PODS
		[ "$sc" = churn ] && rate=$CHURN_RATE
		"$RUN/nodebench" run -kubeconfig "$RUN/kubeconfig" -node "$NODE_NAME" -agent "$agent" -round "$round" \
			-scenario "$sc" ${dur:+-duration "$dur"} ${pods:+-pods "$pods"} ${rate:+-rate "$rate"} -pid "$(cat "$RUN/node.pid")" \
			-cri-counts "$RUN/cri-counts.sock" -audit-log "$RUN/audit.log" -audit-user "system:node:$NODE_NAME" \
			-image "$IMG_BUSYBOX" -out "$OUT" ${NODEBENCH_CRI_TRACE:+-timeline} || {
			cp "$RUN/node.log" "$OUT/$round-$agent.node.log" 2>/dev/null || true
			die "$sc on $agent failed (node log in $OUT/$round-$agent.node.log)"
		}
		sleep 5
	done
	stop_node
	cp "$RUN/node.log" "$OUT/$round-$agent.node.log" 2>/dev/null || true
}

agents=(${AGENTS//,/ })
for round in $(seq 1 "$ROUNDS"); do
	order=("${agents[@]}")
	if [ $((round % 2)) = 0 ] && [ ${#agents[@]} = 2 ]; then order=("${agents[1]}" "${agents[0]}"); fi
	for a in "${order[@]}"; do run_agent "$a" "$round"; done
done

"$RUN/nodebench" report "$OUT" >"$OUT/table.md"
cat "$OUT/meta" "$OUT/table.md"
if [ -n "$DOC" ]; then
	python3 - "$repo/docs/performance.md" "$OUT/meta" "$OUT/table.md" <<'PY'
import sys
doc, meta, table = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read()
begin, end = "<!-- bench/node.sh begin -->", "<!-- bench/node.sh end -->"
s = open(doc).read()
if begin not in s or end not in s:
    sys.exit("docs/performance.md has no bench/node.sh markers")
m = dict(l.split(": ", 1) for l in meta.strip().splitlines())
body = "\n%s, `%s`.\n%s; %s; kubenode at %s; load average at start %s.\n\n%s" % (
    m["date"], m["command"], m["machine"], m["versions"], m["kubenode"], m["load average at start"], table)
a, rest = s.split(begin, 1)
_, b = rest.split(end, 1)
open(doc, "w").write(a + begin + body + end + b)
PY
	log "wrote docs/performance.md"
fi
log "results in $OUT"
