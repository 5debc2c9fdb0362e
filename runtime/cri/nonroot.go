package cri

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// verifyRunAsNonRoot refuses a container whose effective security context
// asks for runAsNonRoot but which would run as root, as the kubelet's
// verifyRunAsNonRoot: an explicit runAsUser 0, or no runAsUser and an
// image whose user is root (or unset), non-numeric or not a valid UID. The
// image's user is asked of the runtime only when runAsUser does not decide.
// The error wraps ErrCreateContainerConfig with the kubelet's message.
func (m *Manager) verifyRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	nonRoot, runAsUser := effectiveNonRoot(pod, c)
	if !nonRoot {
		return nil
	}
	desc := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if runAsUser != nil {
		if *runAsUser == 0 {
			return errConfig("container's runAsUser breaks non-root policy (pod: %q, container: %s)", desc, c.Name)
		}
		return nil
	}
	uid, username, err := m.imageUser(ctx, imageRef)
	if err != nil {
		return errConfig("container %q: reading its image's user: %v", c.Name, err)
	}
	switch {
	case uid == nil && username != "":
		return errConfig("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, desc, c.Name)
	case uid == nil:
		return nil
	case *uid == 0:
		return errConfig("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", desc, c.Name)
	case *uid < 0 || *uid > math.MaxInt32:
		return errConfig("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): must be between 0 and %d, inclusive (pod: %q, container: %s)",
			*uid, math.MaxInt32, math.MaxInt32, desc, c.Name)
	}
	return nil
}

// effectiveNonRoot is runAsNonRoot and runAsUser of the container's
// security context over the pod's, as the kubelet's
// DetermineEffectiveSecurityContext merges them.
func effectiveNonRoot(pod *v1.Pod, c *v1.Container) (nonRoot bool, runAsUser *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
		runAsUser = psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = *csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
	}
	return nonRoot, runAsUser
}

// imageUser is the user the image runs as: its numeric UID, else its user
// name, else root (as the kubelet's getImageUser, which treats an image
// without a user as root).
func (m *Manager) imageUser(ctx context.Context, imageRef string) (*int64, string, error) {
	cctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.img.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: imageRef}})
	if err != nil {
		return nil, "", wrapErr("ImageStatus", err)
	}
	if img := resp.GetImage(); img != nil {
		if img.Uid != nil {
			uid := img.Uid.Value
			return &uid, "", nil
		}
		if img.Username != "" {
			return nil, img.Username, nil
		}
	}
	return new(int64), "", nil
}
