#!/usr/bin/env python3
"""Writes docs/conformance.md from hack/conformance.sh's results.

  conformance_report.py RESULTS FOCUS SKIP     # the document, on stdout
  conformance_report.py --summary DIR NODE     # counts and failures of one run; exit 1 on a failure
  conformance_report.py --failed DIR NODE      # a ginkgo focus regexp of NODE's tests that did not pass

RESULTS holds, per node (nodekit, kubelet): NODE.json (ginkgo's
--json-report), NODE.seconds, NODE.command; and meta, images.md.
"""
import json
import os
import re
import sys

NODES = ("kubelet", "nodekit")

# Why a test fails on nodekit, and what would fix it: the first rule whose
# pattern matches. Rules on the failure message come first (what actually
# failed), then rules on the test's name (what the test is about).
CAUSES = [
    ("msg", r"unable to upgrade connection: 404|error dialing backend|upgrade request required",
     "exec/attach/port-forward not served: the node API answers 404 (the test execs into a pod or forwards a port)",
     "serve /exec, /attach and /portForward (node API branch)"),
    ("msg", r"Failed to open websocket to .*/(exec|attach)\?",
     "exec over websocket not served by the node API",
     "serve /exec (node API branch)"),
    ("name", r"in progress of terminating",
     "image: the test runs /bin/bash in agnhost, which the stand-in of this run lacked (the pod never starts; the same on both nodes)",
     "the script now gives the agnhost stand-in a /bin/bash that runs busybox ash; run again"),
    ("msg", r"expected number of restarts: 1, found restarts: 0",
     "a restartable init container (sidecar) is not restarted when its startup or liveness probe fails",
     "restart sidecars on probe failure as the kubelet does (restartPolicy Always on init containers)"),
    ("msg", r"Restart count should increment monotonically",
     "a restartable init container's restartCount went back (1 to 0)",
     "derive restartCount from the runtime's attempts across sidecar restarts, never from a fresh status"),
    ("msg", r"failed to get logs from .*the server could not find the requested resource",
     "an exited container's log is gone from the node's containerLogs (404) right after the pod succeeded",
     "keep exited containers and their logs until the pod is deleted (the kubelet's container GC keeps the last ones)"),
    ("msg", r"expected hosts file to contain entries from HostAliases",
     "hostAliases missing from /etc/hosts",
     "write the pod's /etc/hosts (hostAliases, hostNetwork handling) and mount it"),
    ("name", r"ContainerRestartRules|restart rules|RestartAllContainers",
     "ContainerRestartRules (beta gate): container-level restartPolicy and rules not implemented",
     "honour container restartPolicy/restartPolicyRules in the sync loop"),
    ("name", r"Networking Granular Checks",
     "the pod networking checks exec curl (or nc) in a pod: exec not served, the retries end as failed connections",
     "serve /exec (node API branch)"),
    ("name", r"(?i)lifecycle (sleep )?hook|postStart|preStop|sleep action",
     "lifecycle hooks (postStart/preStop: exec, httpGet, sleep) not run",
     "run hooks in the runtime layer with the kubelet's ordering, timeouts and FailedPostStartHook/FailedPreStopHook events"),
    ("name", r"(?i)ephemeral container",
     "ephemeral containers: not started, or exec into them not served",
     "start ephemeral containers; serve exec/attach"),
    ("name", r"(?i)hostAliases|/etc/hosts|KubeletManagedEtcHosts",
     "/etc/hosts not kubelet-managed (no <podIP> <hostname> line, hostAliases ignored)",
     "write the pod's /etc/hosts (hostAliases, hostNetwork handling) and mount it"),
    ("name", r"(?i)hostnameOverride",
     "hostnameOverride ignored",
     "use spec.hostnameOverride for the sandbox hostname"),
    ("name", r"(?i)fsGroup",
     "fsGroup not applied to volumes",
     "apply fsGroup and fsGroupChangePolicy to emptyDir, secret, configMap, projected and downwardAPI volumes"),
    ("name", r"(?i)sysctl",
     "sysctl admission or its events missing (SysctlForbidden, safe/unsafe lists)",
     "admit sysctls as the kubelet (safe list, --allowed-unsafe-sysctls) and report SysctlForbidden"),
    ("name", r"(?i)readiness gate",
     "pod readiness gates not honoured",
     "fold spec.readinessGates conditions into Ready"),
    ("name", r"(?i)runAsNonRoot",
     "runAsNonRoot: no CreateContainerConfigError event when the image user is root or unknown",
     "verify runAsNonRoot against the image user and report the kubelet's error and event"),
    ("msg", r"(?i)event",
     "an expected pod event (Pulling/Pulled/Created/Started/BackOff/Failed/Killing) not emitted",
     "emit the runtime manager's events with the kubelet's reasons and messages"),
    ("name", r"(?i)service.*environment|environment variables for services",
     "service environment variables missing",
     "read the namespace's Services when the pod starts (not from a stale cache)"),
]


def escape(s):
    return s.replace("|", "\\|").replace("\n", " ").strip()


def load(results, node):
    """Returns {test name: (state, message, seconds)} of NODE's run, or None."""
    path = os.path.join(results, node + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        suites = json.load(f)
    out = {}
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It":
                continue
            name = " ".join([t for t in spec.get("ContainerHierarchyTexts") or []] + [spec.get("LeafNodeText", "")])
            labels = []
            for ls in (spec.get("ContainerHierarchyLabels") or []) + [spec.get("LeafNodeLabels") or []]:
                labels += ls or []
            state = spec.get("State", "")
            if state in ("skipped", "pending"):
                continue
            msg = (spec.get("Failure") or {}).get("Message", "")
            secs = (spec.get("RunTime") or 0) / 1e9
            out[name] = (state, msg, secs)
    return out


def first_line(msg):
    for line in msg.splitlines():
        line = line.strip()
        if line:
            return line[:240]
    return ""


def cause_of(name, msg):
    for where, pat, cause, fix in CAUSES:
        if re.search(pat, msg if where == "msg" else name):
            return cause, fix
    return "other (see the message)", "investigate"


def short(state):
    return {"passed": "pass", "failed": "FAIL", "timedout": "TIMEOUT", "panicked": "PANIC",
            "interrupted": "interrupted", "aborted": "aborted"}.get(state, state or "not run")


def summary(results, node):
    r = load(results, node) or {}
    passed = sorted(n for n, v in r.items() if v[0] == "passed")
    failed = sorted(n for n, v in r.items() if v[0] != "passed")
    print(f"{node}: {len(r)} run, {len(passed)} passed, {len(failed)} failed")
    for n in failed:
        print(f"  FAIL {n}\n       {first_line(r[n][1])}")
    return 1 if failed or not r else 0


def document(results, focus, skip):
    meta = {}
    mpath = os.path.join(results, "meta")
    if os.path.exists(mpath):
        for line in open(mpath):
            k, _, v = line.rstrip("\n").partition("=")
            meta[k] = v
    runs = {n: load(results, n) for n in NODES}
    secs = {}
    for n in NODES:
        p = os.path.join(results, n + ".seconds")
        secs[n] = int(open(p).read()) if os.path.exists(p) else None
    names = sorted(set().union(*[set(r) for r in runs.values() if r]))
    # kubelet-recheck: the kubelet ran only the tests nodekit did not pass.
    recheck = os.path.exists(os.path.join(results, "kubelet.recheck"))

    o = []
    w = o.append
    w("# Kubernetes node conformance: nodekit and the kubelet")
    w("")
    w("Written by `bash hack/conformance.sh` (do not edit by hand): Kubernetes' own "
      "`[NodeConformance]` tests of `k8s.io/kubernetes/test/e2e` run against one node, "
      "a kubenode node (examples/kubenode `-cri`) and the kubelet of the same version, "
      "each on the same freshly started control plane, containerd and images.")
    w("")
    w(f"- Date: {meta.get('date', '?')}")
    w(f"- Versions: Kubernetes {meta.get('kube', '?')} (e2e.test, kube-apiserver, kube-controller-manager, "
      f"kube-scheduler, kubelet, agnhost, all built from the Go module proxy), etcd {meta.get('etcd', '?')}, "
      f"containerd {meta.get('containerd', '?')}, runc {meta.get('runc', '?')}, {meta.get('go', '?')}")
    w(f"- Machine: {meta.get('os', '?')}, kernel {meta.get('kernel', '?')}, {meta.get('cpus', '?')} CPUs "
      f"(shared with other jobs), {meta.get('mem', '?')}, cgroup {meta.get('cgroup', '?')}")
    w(f"- Command: `bash hack/conformance.sh both` (or `nodekit`, `kubelet`): ginkgo with "
      f"{meta.get('procs', '4')} processes, `--focus='{focus}'`, `--skip` the list below")
    w("- Cluster: etcd, kube-apiserver (token auth, RBAC), kube-controller-manager (serviceaccount, "
      "serviceaccount-token, namespace, garbage-collector, node-lifecycle, root-ca-certificate-publisher, job "
      "controllers), kube-scheduler, a private containerd with a CNI bridge (hack/containerd.sh). "
      "No kube-proxy, no cluster DNS, no registry.")
    w("")
    w("## Counts")
    w("")
    w("| Node | Run | Passed | Failed | Suite time |")
    w("|---|---|---|---|---|")
    for n in NODES:
        r = runs[n]
        if r is None:
            w(f"| {n} | pending | | | |")
            continue
        p = sum(1 for v in r.values() if v[0] == "passed")
        t = f"{secs[n] // 60}m{secs[n] % 60:02d}s" if secs[n] is not None else "?"
        note = " (only the tests nodekit did not pass: `kubelet-recheck`)" if n == "kubelet" and recheck else ""
        w(f"| {n}{note} | {len(r)} | {p} | {len(r) - p} | {t} |")
    if runs["kubelet"] and runs["nodekit"]:
        both = [x for x in names if runs["kubelet"].get(x, ("",))[0] == "passed"
                and runs["nodekit"].get(x, ("",))[0] not in ("passed", "")]
        w("")
        w(f"Tests that pass on the kubelet and fail on nodekit: {len(both)}.")
    w("")
    w("## Images")
    w("")
    w("No registry is reachable; the images the selected tests use are made locally as OCI "
      "archives and imported into containerd under the names the suite expects "
      "(`e2e.test --list-images`), so no KUBE_TEST_REPO_LIST is needed. Tests that pull other "
      "images (e.g. from a registry on purpose) fail on both nodes alike.")
    w("")
    ipath = os.path.join(results, "images.md")
    if os.path.exists(ipath):
        w(open(ipath).read().rstrip("\n"))
    w("")
    w("## Skipped (the same for both nodes)")
    w("")
    w("| Pattern (ginkgo --skip) | Why |")
    w("|---|---|")
    spath = os.path.join(results, "skips")
    if os.path.exists(spath):
        for line in open(spath):
            pat, _, why = line.rstrip("\n").partition("\t")
            if pat:
                w(f"| `{escape(pat)}` | {escape(why)} |")
    w("")
    fails = []
    if runs["nodekit"]:
        for x in names:
            st, msg, _ = runs["nodekit"].get(x, ("", "", 0))
            if st and st != "passed":
                fails.append((x, msg) + cause_of(x, msg))
    if fails:
        w("## nodekit failures by cause")
        w("")
        w("| Cause | Tests | Fix |")
        w("|---|---|---|")
        by = {}
        for x, msg, cause, fix in fails:
            by.setdefault((cause, fix), []).append(x)
        for (cause, fix), xs in sorted(by.items(), key=lambda kv: -len(kv[1])):
            kfail = ""
            if runs["kubelet"]:
                k = sum(1 for x in xs if runs["kubelet"].get(x, ("",))[0] not in ("passed", ""))
                kfail = f" ({k} also fail on the kubelet)" if k else ""
            w(f"| {escape(cause)} | {len(xs)}{kfail} | {escape(fix)} |")
        w("")
    w("## Every test run")
    w("")
    w("Reason: the first line of the failure message on nodekit; Cause/fix: from the patterns in "
      "hack/conformance_report.py.")
    w("")
    w("| Test | kubelet | nodekit | Reason (nodekit) | Cause / fix |")
    w("|---|---|---|---|---|")
    for x in names:
        k = runs["kubelet"].get(x) if runs["kubelet"] else None
        n = runs["nodekit"].get(x) if runs["nodekit"] else None
        ks = short(k[0]) if k else ("pending" if runs["kubelet"] is None else
                                    ("not run (passes on nodekit)" if recheck and n and n[0] == "passed"
                                     else "not run"))
        ns = short(n[0]) if n else ("pending" if runs["nodekit"] is None else "not run")
        reason = cf = ""
        if n and n[0] != "passed":
            reason = escape(first_line(n[1]))
            c, f = cause_of(x, n[1])
            cf = escape(f"{c}; fix: {f}")
        w(f"| {escape(x)} | {ks} | {ns} | {reason} | {cf} |")
    w("")
    return "\n".join(o)


def failed_focus(results, node):
    r = load(results, node) or {}
    names = sorted(n for n, v in r.items() if v[0] != "passed")
    # Go's regexp.QuoteMeta set.
    quote = lambda x: re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", x)
    print("|".join(quote(n) for n in names))
    return 0 if names else 1


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--failed":
        sys.exit(failed_focus(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 4 and sys.argv[1] == "--summary":
        sys.exit(summary(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    print(document(sys.argv[1], sys.argv[2], sys.argv[3]), end="")


if __name__ == "__main__":
    main()
