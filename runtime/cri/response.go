package cri

import (
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrMalformedResponse is wrapped by the error of a call whose answer lacks
// what the CRI requires, as the kubelet's remote runtime refuses them:
// acting on a status without a name would start a second container.
var ErrMalformedResponse = errors.New("cri: malformed response from the container runtime")

// verifyContainerStatus checks what the kubelet's verifyContainerStatus
// checks, but ImageRef, which the upstream fake leaves empty.
func verifyContainerStatus(s *runtimeapi.ContainerStatus) error {
	switch {
	case s == nil:
		return fmt.Errorf("no status: %w", ErrMalformedResponse)
	case s.Id == "":
		return fmt.Errorf("status.Id is not set: %w", ErrMalformedResponse)
	case s.Metadata.GetName() == "":
		return fmt.Errorf("status.Metadata.Name is not set: %w", ErrMalformedResponse)
	case s.Image == nil:
		return fmt.Errorf("status.Image is not set: %w", ErrMalformedResponse)
	}
	return nil
}

// verifySandboxStatus checks what the kubelet's verifySandboxStatus checks.
func verifySandboxStatus(s *runtimeapi.PodSandboxStatus) error {
	switch {
	case s == nil:
		return fmt.Errorf("no status: %w", ErrMalformedResponse)
	case s.Id == "":
		return fmt.Errorf("status.Id is not set: %w", ErrMalformedResponse)
	case s.Metadata == nil || s.Metadata.Name == "" || s.Metadata.Uid == "" || s.Metadata.Namespace == "":
		return fmt.Errorf("status.Metadata (name, uid, namespace) is not set: %w", ErrMalformedResponse)
	}
	return nil
}
