package runtime

import (
	"errors"
	"fmt"
	"strings"
)

// SyncAction names one step of SyncPod or KillPod.
type SyncAction string

// The steps, as the kubelet names them in its sync results.
const (
	StartContainer   SyncAction = "StartContainer"
	KillContainer    SyncAction = "KillContainer"
	InitContainer    SyncAction = "InitContainer"
	CreatePodSandbox SyncAction = "CreatePodSandbox"
	KillPodSandbox   SyncAction = "KillPodSandbox"
	ConfigPodSandbox SyncAction = "ConfigPodSandbox"
)

// SyncResult is the outcome of one step. Target is the container name for
// container steps and the pod's UID for sandbox steps.
type SyncResult struct {
	Action  SyncAction
	Target  string
	Error   error
	Message string
}

// Fail records err (which should wrap a step sentinel such as
// ErrCrashLoopBackOff) and a human-readable message.
func (r *SyncResult) Fail(err error, msg string) {
	r.Error, r.Message = err, msg
}

// PodSyncResult collects the steps of one SyncPod call. SyncError is set when
// the call failed as a whole (for example the status it was given was
// unusable), outside any step.
type PodSyncResult struct {
	SyncResults []*SyncResult
	SyncError   error
}

// NewStep appends a step and returns it for the caller to Fail if need be.
func (p *PodSyncResult) NewStep(action SyncAction, target string) *SyncResult {
	r := &SyncResult{Action: action, Target: target}
	p.SyncResults = append(p.SyncResults, r)
	return r
}

// AddSyncResult appends steps.
func (p *PodSyncResult) AddSyncResult(results ...*SyncResult) {
	p.SyncResults = append(p.SyncResults, results...)
}

// AddPodSyncResult appends all steps of other and adopts its SyncError.
func (p *PodSyncResult) AddPodSyncResult(other PodSyncResult) {
	p.AddSyncResult(other.SyncResults...)
	if other.SyncError != nil {
		p.SyncError = other.SyncError
	}
}

// Fail sets SyncError.
func (p *PodSyncResult) Fail(err error) { p.SyncError = err }

// Error joins the SyncError and every failed step's error, or returns nil.
// Each step error reads "Action for "target" failed: err: message" (without
// ": message" when the message is empty or err already says it, as
// CrashLoopBackOff's does) and still matches its sentinel with errors.Is.
func (p PodSyncResult) Error() error {
	var errs []error
	if p.SyncError != nil {
		errs = append(errs, p.SyncError)
	}
	for _, r := range p.SyncResults {
		switch {
		case r.Error == nil:
		case r.Message == "" || strings.Contains(r.Error.Error(), r.Message):
			errs = append(errs, fmt.Errorf("%s for %q failed: %w", r.Action, r.Target, r.Error))
		default:
			errs = append(errs, fmt.Errorf("%s for %q failed: %w: %s", r.Action, r.Target, r.Error, r.Message))
		}
	}
	return errors.Join(errs...)
}
