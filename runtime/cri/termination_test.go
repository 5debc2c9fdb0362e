package cri_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

func TestTerminationMessage(t *testing.T) {
	tests := []struct {
		name     string
		policy   v1.TerminationMessagePolicy
		file     string
		log      string
		exitCode int32
		want     string
	}{
		{name: "the file's content", policy: v1.TerminationMessageReadFile, file: "bye", exitCode: 1, want: "bye"},
		{name: "an empty file under ReadFile gives nothing", policy: v1.TerminationMessageReadFile, log: "noise", exitCode: 1, want: ""},
		{name: "a failure falls back to the log tail", policy: v1.TerminationMessageFallbackToLogsOnError, log: "line1\nlast words", exitCode: 2, want: "line1\nlast words\n"},
		{name: "the file wins over the log", policy: v1.TerminationMessageFallbackToLogsOnError, file: "from file", log: "from log", exitCode: 2, want: "from file"},
		{name: "a success does not fall back", policy: v1.TerminationMessageFallbackToLogsOnError, log: "fine", exitCode: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			e.srv.SetBehavior("main", fakecri.Behavior{Log: tt.log})
			pod := newPod("term", "busybox:1", func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
				p.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			})
			res := e.sync(t, pod, nil)
			require.NoError(t, res.Error())
			id := e.srv.ContainerIDs("main")[0]
			e.srv.Runtime.Lock()
			mounts := e.srv.Runtime.Containers[id].Mounts
			e.srv.Runtime.Unlock()
			mounts = slices.DeleteFunc(slices.Clone(mounts), func(m *runtimeapi.Mount) bool { return m.ContainerPath == "/etc/hosts" })
			require.Len(t, mounts, 1)
			require.Equal(t, "/dev/termination-log", mounts[0].ContainerPath)
			require.FileExists(t, mounts[0].HostPath, "the file exists before the container starts")
			if tt.file != "" {
				require.NoError(t, os.WriteFile(mounts[0].HostPath, []byte(tt.file), 0o644))
			}
			require.NoError(t, e.srv.Exit(id, tt.exitCode))
			require.Equal(t, tt.want, e.status(t, pod).FindContainerStatusByName("main").Message)
		})
	}
}

func TestEmptyDirLivesWithThePod(t *testing.T) {
	e := newFakeEnv(t)
	pod := newPod("vol", "busybox:1", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	})
	res := e.sync(t, pod, nil)
	require.NoError(t, res.Error())
	dir := filepath.Join(e.pods, "uid-vol", "volumes", "kubernetes.io~empty-dir", "cache")
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o777), fi.Mode().Perm(), "writable by any user of the pod")

	pods, err := e.m.GetPods(e.ctx, false)
	require.NoError(t, err)
	require.NoError(t, e.m.KillPod(e.ctx, pod, *pods[0], nil))
	require.DirExists(t, dir, "a killed pod keeps its data")
	require.NoError(t, e.m.RemovePod(e.ctx, pod.UID))
	require.NoDirExists(t, filepath.Join(e.pods, "uid-vol"), "a removed pod loses its state")
	require.NoDirExists(t, filepath.Join(e.logs, "test_vol_uid-vol"), "and its logs")
}
