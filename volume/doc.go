// Package volume sets up a pod's volumes on the node as the kubelet's
// volume manager and plugins do, and tears them down.
//
//   - hostPath: the type (DirectoryOrCreate, Directory, FileOrCreate, File,
//     Socket, CharDevice, BlockDevice) checked, with the kubelet's messages;
//   - emptyDir: a world-writable directory (0777) under the pod's, or a
//     tmpfs for medium Memory (its root 1777, as the kubelet's, the sticky
//     bit kept through the fsGroup's chmod), mounted once and unmounted at
//     TearDown; a node that
//     cannot mount gets a clear error. A tmpfs (secret and projected ones
//     too) is as large as the kubelet makes it: the node's allocatable
//     memory (Config.NodeAllocatable), the pod's memory limit if lower, an
//     emptyDir's sizeLimit if lower still;
//   - configMap, secret, downwardAPI and projected (configMap, secret,
//     downwardAPI, serviceAccountToken through the TokenRequest API): files
//     written with the kubelet's atomic-writer layout (a timestamped
//     directory, a ..data symlink swapped with rename(2), one user-visible
//     symlink per top-level name), so a reader sees one version or the next,
//     never a mix. Items, defaultMode and mode, and optional are honoured.
//
// Layout: <PodsRoot>/<uid>/volumes/kubernetes.io~<kind>/<name>, the
// kubelet's. SetUp is called at every pod sync: contents are recomputed
// from the sources (objects.Cache, objects.Tokens) and rewritten only when
// they changed, so changed objects and refreshed tokens reach running pods
// within the sync period plus the cache's TTL. After an agent restart the
// directories (and mounted tmpfs) already there are reused.
//
// Bad input (a key that is not a file name, a path with "..", a mode
// outside 0..0777, a configMap or secret over 1 MiB, a token request the
// apiserver refuses) is an error naming the volume, recorded as a
// FailedMount event; the payload is computed before anything is written,
// so nothing is written for such a volume, and never outside its
// directory.
//
// Where it sits: runtime/cri calls SetUp before starting a pod's
// containers, HostPath for each mount and TearDown when it removes the pod;
// a provider that is not CRI-based calls the same three.
//
//	m, _ := volume.New(volume.Config{PodsRoot: "/var/lib/nodekit/pods", Objects: cache, Tokens: tokens})
//	if err := m.SetUp(ctx, pod); err != nil { /* the pod waits; err names the volumes */ }
//	dir, _ := m.HostPath(pod, &pod.Spec.Volumes[0])
//	defer m.TearDown(pod.UID)
//
// Secret and projected volumes are each a tmpfs, as with the kubelet, so
// secrets and tokens never reach a disk (Config.SecretsOnDisk for nodes
// that cannot mount).
//
// With the pod's fsGroup, the files of those volumes belong to that group
// and are group-readable, their directories setgid, as the kubelet's
// SetVolumeOwnership leaves them; an emptyDir, when made (or its tmpfs
// mounted), is given to the group by SetVolumeOwnership (group read-write,
// setgid, so what the pod writes there is the group's; fsGroupChangePolicy
// OnRootMismatch skips a volume whose root is right already) and stays
// setgid; a service-account token file belongs to
// the one user all containers run as, if they do, with mode 0600 (0640
// with an fsGroup), as the kubelet's.
//
// Not covered: other volume types (an ErrUnsupported error), sizeLimit of
// emptyDirs on disk (the kubelet enforces it by eviction),
// clusterTrustBundle and podCertificate projections.
package volume
