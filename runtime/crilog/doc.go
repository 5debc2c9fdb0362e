// Package crilog reads container log files in the CRI format, the one
// containerd and CRI-O write under the pod log directory (runtime/cri sets
// the paths, as the kubelet does):
//
//	2026-01-02T03:04:05.123456789Z stdout F a whole line
//	2026-01-02T03:04:05.123456789Z stderr P the first part of a long line,
//	2026-01-02T03:04:05.123456789Z stderr F and its end
//
// ReadLogs turns a file into what `kubectl logs` shows, with the options of
// v1.PodLogOptions as the kubelet applies them: tailLines (found by
// reading the file backwards, so a huge file costs only its tail),
// limitBytes, sinceSeconds and sinceTime, timestamps, and follow, which
// keeps reading until the container stops running or ctx ends. A followed
// file that is rotated (renamed to <log>.<timestamp> and reopened by the
// runtime) is read to its end and following goes on in the new file, as
// the kubelet's; tailLines, as the kubelet's, counts the live file only.
//
// Where it sits: under the runtimes. runtime/cri implements
// runtime.ContainerLogs with it; any runtime that writes CRI log files can.
//
//	err := crilog.ReadLogs(ctx, path, &v1.PodLogOptions{TailLines: ptr.To[int64](10)},
//		crilog.Options{}, stdout, stderr)
package crilog
