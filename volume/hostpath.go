package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"
)

// checkHostPath checks (and for the ...OrCreate types creates) a hostPath
// volume's path as the kubelet does, with its messages.
func checkHostPath(hp *v1.HostPathVolumeSource) error {
	if hp.Type == nil || *hp.Type == v1.HostPathUnset {
		return nil
	}
	p := hp.Path
	_, statErr := os.Stat(p)
	exists := statErr == nil
	var want, expected string
	switch *hp.Type {
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(p, 0o755)
		}
		want, expected = "Directory", "directory"
	case v1.HostPathDirectory:
		want, expected = "Directory", "directory"
	case v1.HostPathFileOrCreate:
		if !exists {
			// As the kubelet's makeFile, the parent directory is not
			// created: a missing one fails the volume.
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		want, expected = "File", "file"
	case v1.HostPathFile:
		want, expected = "File", "file"
	case v1.HostPathSocket:
		want, expected = "Socket", "socket file"
	case v1.HostPathCharDev:
		want, expected = "CharDevice", "character device"
	case v1.HostPathBlockDev:
		want, expected = "BlockDevice", "block device"
	default:
		return fmt.Errorf("%s is an invalid volume type", *hp.Type)
	}
	got, err := fileType(p)
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", p, expected, err)
	}
	if got != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", p, expected, got)
	}
	return nil
}

func fileType(p string) (string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	switch m := info.Mode(); {
	case m.IsDir():
		return "Directory", nil
	case m.IsRegular():
		return "File", nil
	case m&fs.ModeSocket != 0:
		return "Socket", nil
	case m&fs.ModeDevice != 0 && m&fs.ModeCharDevice != 0:
		return "CharDevice", nil
	case m&fs.ModeDevice != 0:
		return "BlockDevice", nil
	}
	return "", errors.New("only recognise file, directory, socket, block device and character device")
}
