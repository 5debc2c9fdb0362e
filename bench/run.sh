#!/usr/bin/env bash
# Runs the comparison of nodekit with the kubelet (this module) and writes
# its tables into docs/performance.md, between the markers of its section.
#
#   bash bench/run.sh            # 9 rounds at N=100,1000,10000; updates the doc
#   bash bench/run.sh -rounds 1 -sizes 100 -run podconfig   # a quick look, doc untouched
#   bash bench/run.sh -vet       # vet the module only (as CI does)
#
# Other arguments go to the command (see -h). The doc is rewritten only for
# a full default run.
set -euo pipefail
cd "$(dirname "$0")"

# The kubelet's pod workers are compiled from the pinned module's own
# pod_workers.go, placed beside internal/kubeletpodworkers/export.go by an
# overlay (see that package).
kdir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
if [ -z "$kdir" ] || [ ! -f "$kdir/pkg/kubelet/pod_workers.go" ]; then
	go mod download k8s.io/kubernetes
	kdir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
fi
overlay=$(mktemp --suffix=.json)
trap 'rm -f "$overlay"' EXIT
printf '{"Replace": {"%s": "%s"}}\n' "$PWD/internal/kubeletpodworkers/pod_workers.go" "$kdir/pkg/kubelet/pod_workers.go" >"$overlay"

if [ "${1:-}" = "-vet" ]; then
	go vet -overlay="$overlay" ./...
	exit 0
fi

go build -overlay="$overlay" -o "$overlay.bin" .
trap 'rm -f "$overlay" "$overlay.bin"' EXIT
if [ $# -gt 0 ]; then
	"$overlay.bin" "$@"
	exit 0
fi

out=$("$overlay.bin")
echo "$out"

doc=../docs/performance.md
begin='<!-- bench/run.sh: begin -->'
end='<!-- bench/run.sh: end -->'
kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' || true)
section=$(cat <<SECTION
$begin
## nodekit against the kubelet (k8s.io/kubernetes $kver)

\`\`\`sh
bash bench/run.sh
\`\`\`

The kubelet's own PodConfig and apiserver source (pkg/kubelet/config),
GenericPLEG (pkg/kubelet/pleg) and pod workers (pkg/kubelet/pod_workers.go) and
nodekit's, on the same inputs in the same process (module \`bench/\`),
klog at -v=0. Machine: $(nproc) CPUs ($cpu), $(go env GOOS)/$(go env GOARCH), $(go version | awk '{print $3}'); $(date -u '+%Y-%m-%d %H:%M UTC'), nodekit at $(git rev-parse --short HEAD). A ratio under 1 means nodekit is cheaper.
The CopyPods row is for reference: nodekit hands out the stored pods and no
nodekit component modifies them (podconfig's ownership contract, enforced
by agent's TestPodsAreNeverModified under -race), so an agent needs no
copies; a program that modifies the pods it receives sets CopyPods.

$out
$end
SECTION
)
sectionfile="$overlay.md"
printf '%s\n' "$section" >"$sectionfile"
if grep -qF "$begin" "$doc"; then
	# Replace the old section in place; other sections stay as they are.
	awk -v begin="$begin" -v end="$end" -v f="$sectionfile" '
		$0 == begin { while ((getline line < f) > 0) print line; skip = 1; next }
		$0 == end { skip = 0; next }
		!skip { print }' "$doc" >"$doc.tmp"
	mv "$doc.tmp" "$doc"
else
	printf '\n%s\n' "$section" >>"$doc"
fi
rm -f "$sectionfile"
echo "wrote $doc" >&2
