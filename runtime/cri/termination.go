package cri

import (
	"bytes"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits of a termination message, as the kubelet's.
const (
	maxTerminationMessage     = 4096
	maxTerminationLogBytes    = 2048
	maxTerminationLogLines    = 80
	criLogFieldsBeforeMessage = 3 // timestamp, stream, tag
)

// terminationMessage is what an exited container left in its termination
// message file or, under FallbackToLogsOnError after a failure with an empty
// file, the tail of its log.
func terminationMessage(s *runtimeapi.ContainerStatus, ci containerInfo) string {
	if ci.terminationMsgPath != "" {
		for _, mnt := range s.Mounts {
			if mnt.ContainerPath != ci.terminationMsgPath {
				continue
			}
			if msg := readHead(mnt.HostPath, maxTerminationMessage); msg != "" {
				return msg
			}
			break
		}
	}
	if ci.terminationMsgPolicy == v1.TerminationMessageFallbackToLogsOnError && s.ExitCode != 0 && s.LogPath != "" {
		return logTail(s.LogPath)
	}
	return ""
}

func readHead(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return string(b)
}

// logTail returns the messages of the last lines of a CRI log file, at most
// maxTerminationLogLines lines and maxTerminationLogBytes bytes of it.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 << 10 // CRI framing makes lines longer than their messages
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, fi.Size()-window)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // the first one is cut
	}
	var msgs [][]byte
	for _, l := range lines {
		fields := bytes.SplitN(l, []byte(" "), criLogFieldsBeforeMessage+1)
		if len(fields) <= criLogFieldsBeforeMessage {
			continue
		}
		msg := fields[criLogFieldsBeforeMessage]
		if string(fields[2]) == "F" {
			msg = append(msg, '\n')
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) > maxTerminationLogLines {
		msgs = msgs[len(msgs)-maxTerminationLogLines:]
	}
	out := bytes.Join(msgs, nil)
	if len(out) > maxTerminationLogBytes {
		out = out[len(out)-maxTerminationLogBytes:]
	}
	return string(out)
}
