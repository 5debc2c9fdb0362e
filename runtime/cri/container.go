package cri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volume"
)

// errConfig is a container the manager cannot express as a CRI config.
func errConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", runtime.ErrCreateContainerConfig, fmt.Sprintf(format, args...))
}

// checkPod rejects what no container of the pod may ask for, before anything
// of the pod is started.
func (m *Manager) checkPod(pod *v1.Pod) error {
	if m.cfg.DenyPrivileged && podPrivileged(pod) {
		return errConfig("pod %s/%s asks for a privileged container, but privileged containers are denied (Config.DenyPrivileged)", pod.Namespace, pod.Name)
	}
	return nil
}

// containerConfig builds the CRI config of one container instance. podIPs
// are the sandbox's, for the downward API.
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, ctype string, restartCount int, imageRef string, podIPs []string) (*runtimeapi.ContainerConfig, hostPaths, error) {
	if m.cfg.DenyPrivileged && c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		return nil, hostPaths{}, errConfig("container %q is privileged, but privileged containers are denied (Config.DenyPrivileged)", c.Name)
	}
	vars, err := m.envResolver().Env(ctx, pod, c, podIPs)
	if err != nil {
		return nil, hostPaths{}, fmt.Errorf("%w: %w", runtime.ErrCreateContainerConfig, err)
	}
	envs := make([]*runtimeapi.KeyValue, len(vars))
	for i, v := range vars {
		envs[i] = &runtimeapi.KeyValue{Key: v.Name, Value: []byte(v.Value)}
	}
	lookup := podenv.Lookup(vars)
	mounts, prep, err := m.mounts(pod, c, podIPs)
	if err != nil {
		return nil, prep, err
	}
	if err := m.verifyRunAsNonRoot(ctx, pod, c, imageRef); err != nil {
		return nil, prep, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     podenv.ExpandAll(c.Command, lookup),
		Args:        podenv.ExpandAll(c.Args, lookup),
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, ctype, restartCount),
		LogPath:     filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(c),
			SecurityContext: securityContext(pod, c),
		},
	}
	return cfg, prep, nil
}

// hostPaths are what must exist on the host before a container is created.
type hostPaths struct {
	dirs  []subPathDir
	files []string
	hosts *hostsFile
}

// mounts maps the container's volume mounts to CRI mounts at the volumes'
// host paths (set up by the VolumeManager), and adds its termination-message
// file and the pod's hosts file at /etc/hosts (unless the container mounts
// something there itself).
func (m *Manager) mounts(pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.Mount, hostPaths, error) {
	var out []*runtimeapi.Mount
	var prep hostPaths
	podDir := filepath.Join(m.cfg.PodsRoot, string(pod.UID))
	vols := m.volumeManager()
	mountHosts := needsHostsFile(pod, podIPs)
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == etcHostsPath {
			mountHosts = false
		}
		var vol *v1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == vm.Name {
				vol = &pod.Spec.Volumes[i]
			}
		}
		if vol == nil {
			return nil, prep, errConfig("container %q mounts volume %q, which the pod does not declare", c.Name, vm.Name)
		}
		hp, err := vols.HostPath(pod, vol)
		if err != nil {
			return nil, prep, errConfig("container %q mounts volume %q: %v", c.Name, vm.Name, err)
		}
		if vm.SubPath != "" {
			if filepath.IsAbs(vm.SubPath) || strings.HasPrefix(filepath.Clean(vm.SubPath), "..") {
				return nil, prep, errConfig("container %q mounts volume %q: subPath %q must be relative and stay inside the volume", c.Name, vm.Name, vm.SubPath)
			}
			root := hp
			hp = filepath.Join(hp, vm.SubPath)
			if vol.EmptyDir != nil {
				prep.dirs = append(prep.dirs, subPathDir{path: hp, volume: root})
			}
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: hp, Readonly: vm.ReadOnly || volume.ReadOnly(vol)})
	}
	if mountHosts {
		h, err := m.hostsFileFor(pod, podIPs)
		if err != nil {
			return nil, prep, errConfig("container %q: the pod's hosts file: %v", c.Name, err)
		}
		prep.hosts = &h
		out = append(out, &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: h.path, SelinuxRelabel: true})
	}
	if c.TerminationMessagePath != "" {
		// A fresh file per instance, as the kubelet's, so a restart does not
		// inherit the last instance's message.
		f := filepath.Join(podDir, "containers", c.Name, randomID())
		prep.files = append(prep.files, f)
		out = append(out, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: f})
	}
	return out, prep, nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (p hostPaths) create() error {
	if p.hosts != nil {
		if err := p.hosts.write(); err != nil {
			return err
		}
	}
	for _, d := range p.dirs {
		if err := d.create(); err != nil {
			return err
		}
	}
	for _, f := range p.files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
		if err := os.Chmod(f, 0o666); err != nil {
			return err
		}
	}
	return nil
}

// subPathDir is a volume's subPath directory, made before the container
// that mounts it.
type subPathDir struct {
	path   string
	volume string // the volume's root, path's ancestor
}

// create makes the subPath's missing directories with the volume root's
// mode whatever the umask, as the kubelet's SafeMakeDir with the volume's
// mode: its permissions and its setgid, setuid and sticky bits, so the
// subPath of a volume setgid for the pod's fsGroup stays so and one of a
// tmpfs keeps its sticky bit. Directories that exist are left as they are.
func (d subPathDir) create() error {
	if info, err := os.Stat(d.path); err == nil {
		if info.IsDir() {
			return nil
		}
		return &os.PathError{Op: "mkdir", Path: d.path, Err: syscall.ENOTDIR}
	}
	root, err := os.Stat(d.volume)
	if err != nil {
		return err
	}
	mode := root.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	rel, err := filepath.Rel(d.volume, d.path)
	if err != nil {
		return err
	}
	cur := d.volume
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return err
		}
		if err := os.Chmod(cur, mode); err != nil {
			return err
		}
	}
	return nil
}

const (
	cpuPeriod  = 100000 // the kernel's default CFS period, in µs
	minShares  = 2
	minQuota   = 1000
	sharesPerC = 1024
)

func linuxResources(c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{CpuShares: minShares}
	req, hasReq := c.Resources.Requests[v1.ResourceCPU]
	lim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	if !hasReq && hasLim {
		req, hasReq = lim, true // the API defaults requests to limits
	}
	if hasReq {
		r.CpuShares = max(minShares, req.MilliValue()*sharesPerC/1000)
	}
	if hasLim {
		r.CpuPeriod = cpuPeriod
		r.CpuQuota = max(minQuota, lim.MilliValue()*cpuPeriod/1000)
	}
	if mem, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = mem.Value()
	}
	return r
}

func securityContext(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups, sc.SupplementalGroupsPolicy = supplementalGroups(psc)
	}
	csc := c.SecurityContext
	if csc == nil {
		return sc
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	return sc
}

// restartCountFromLogs is used when the status knows no instance of the
// container: the kubelet then continues after the highest <n>.log in the
// container's log directory, so logs of earlier instances are not
// overwritten.
func restartCountFromLogs(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	next := 0
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log"))
		if err == nil && strings.HasSuffix(e.Name(), ".log") && n+1 > next {
			next = n + 1
		}
	}
	return next
}

// startContainer pulls, creates and starts one container, then runs its
// postStart hook, recording the kubelet's events on the way. The error
// wraps the step sentinel; msg is the message for the container's status.
func (m *Manager) startContainer(ctx context.Context, sandboxID string, sandbox *runtimeapi.PodSandboxConfig, pod *v1.Pod, c *v1.Container, ctype string, st *runtime.PodStatus, ips *sandboxIPs, pullSecrets []v1.Secret) (msg string, err error) {
	ref, msg, err := m.images.ensure(ctx, pod, c, sandbox, pullSecrets, m.recordContainer)
	if err != nil {
		m.recordContainer(pod, c.Name, "", v1.EventTypeWarning, runtime.EventFailed, "Error: %s", runtime.Reason(err))
		return msg, err
	}
	restartCount := 0
	if prev := st.FindContainerStatusByName(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
	} else {
		restartCount = restartCountFromLogs(filepath.Join(sandbox.LogDirectory, c.Name))
	}
	failed := func(id, event, msg string, err error) (string, error) {
		m.recordContainer(pod, c.Name, id, v1.EventTypeWarning, runtime.EventFailed, "Error: %s", event)
		return msg, err
	}
	cfg, prep, err := m.containerConfig(ctx, pod, c, ctype, restartCount, ref, ips.forContainer(ctx, pod, c))
	if err != nil {
		return failed("", configMessage(err), err.Error(), err)
	}
	if err := prep.create(); err != nil {
		err = errConfig("container %q: preparing its volumes: %v", c.Name, err)
		return failed("", configMessage(err), err.Error(), err)
	}
	cctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	created, err := m.rt.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox})
	if err != nil {
		msg = wrapErr("CreateContainer", err).Error()
		return failed("", msg, msg, fmt.Errorf("%w: %s", runtime.ErrCreateContainer, msg))
	}
	id := created.ContainerId
	m.recordContainer(pod, c.Name, id, v1.EventTypeNormal, runtime.EventCreated, "Created container: %s", c.Name)
	if _, err := m.rt.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		msg = wrapErr("StartContainer", err).Error()
		return failed(id, msg, msg, fmt.Errorf("%w: %s", runtime.ErrRunContainer, msg))
	}
	m.recordContainer(pod, c.Name, id, v1.EventTypeNormal, runtime.EventStarted, "Started container %s", c.Name)
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return "", nil
	}
	cid := m.id(id)
	msg, err = m.hooks.Run(ctx, cid, pod, c, c.Lifecycle.PostStart)
	if err == nil {
		return "", nil
	}
	m.log.Info("PostStart hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
	// As the kubelet: the event leaves out the message, which may hold
	// secrets; the container is killed and the start is an error.
	m.recordContainer(pod, c.Name, id, v1.EventTypeWarning, runtime.EventFailedPostStartHook, "PostStartHook failed")
	if kerr := m.killContainer(ctx, pod, cid, c.Name, "FailedPostStartHook", nil, nil); kerr != nil {
		m.log.Error(kerr, "Cannot kill container after its postStart hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name)
	}
	return msg, fmt.Errorf("%w: %s", runtime.ErrPostStartHook, msg)
}

// configMessage is a CreateContainerConfigError's message without its
// reason, as the kubelet's event shows it.
func configMessage(err error) string {
	return strings.TrimPrefix(err.Error(), runtime.ErrCreateContainerConfig.Error()+": ")
}

// stopContainer stops one container, giving it grace seconds after TERM.
// A container that is gone already counts as stopped.
func (m *Manager) stopContainer(ctx context.Context, id string, grace int64) error {
	ctx, cancel := m.callCtx(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	_, err := m.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
	if err != nil {
		err = wrapErr("StopContainer", err)
		if errors.Is(err, runtime.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}
