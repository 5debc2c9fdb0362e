#!/usr/bin/env bash
# Regenerates the table of docs/reliability.md from what the reliability
# tests measured: each prints its row (internal/reltable) and this script
# puts the rows between the table markers. NODEKIT_SOAK=1 runs the long
# soak (10,000 cycles, ~15 min); without it the short one (200 cycles).
# The containerd crash test needs root and containerd, the e2e row the
# servers of e2e/hack/servers.sh.
# Figures come from a run without the race detector.
#
#	NODEKIT_SOAK=1 bash hack/reliability.sh
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/reliability.md
run='^(TestSoak|TestContainerdCrashes|TestDirectoryOfAThousandManifests|TestConfigMapStyleDataSymlinkSwap|TestHostileFiles|TestEndlessBody|TestSlowBody|TestMalformedBodies|TestPodListOfTenThousandPods|TestMalformedCRI|TestEnormousCRI|TestHugePodSpecs)'
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# -p 1: the figures (allocations, durations) are not shared with another
# package's test binary.
go test -count=1 -p 1 -timeout 60m -v -run "$run" \
	./agent ./podconfig/file ./podconfig/manifesturl ./runtime/cri | tee "$log" | grep -E '^(--- |ok|FAIL)' >&2
(cd e2e && go test -count=1 -timeout 30m -v -run '^TestAgentThroughAPIServerOutage$' .) | tee -a "$log" | grep -E '^(--- |ok|FAIL)' >&2
rows=$(grep '^reliability-row: ' "$log" | sed 's/^reliability-row: //')
if grep -q '^FAIL' "$log"; then
	echo "reliability tests failed; $doc left as it was" >&2
	exit 1
fi
ROWS="$rows" python3 - "$doc" <<'PY'
import os, re, sys
path = sys.argv[1]
doc = open(path).read()
new = "<!-- rows -->\n" + os.environ["ROWS"] + "\n<!-- /rows -->"
doc, n = re.subn(r"<!-- rows -->.*?<!-- /rows -->", lambda m: new, doc, flags=re.S)
if n != 1:
    sys.exit(path + ": table markers not found")
open(path, "w").write(doc)
PY
echo "updated $doc" >&2
