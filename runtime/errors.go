package runtime

import "errors"

// Errors a runtime returns, wrapped, so callers branch with errors.Is. The
// step errors' messages are the reasons the kubelet puts in container
// statuses (for example "CrashLoopBackOff"), so status generation can use
// err.Error() of the sentinel directly; see Reason.
var (
	ErrNotFound           = errors.New("runtime: not found")
	ErrNotSupported       = errors.New("runtime: not supported by this runtime")
	ErrInvalidContainerID = errors.New("runtime: invalid container ID")
	ErrInvalidConfig      = errors.New("runtime: invalid config")

	ErrCrashLoopBackOff      = errors.New("CrashLoopBackOff")
	ErrImagePullBackOff      = errors.New("ImagePullBackOff")
	ErrImagePull             = errors.New("ErrImagePull")
	ErrImageInspect          = errors.New("ImageInspectError")
	ErrImageNeverPull        = errors.New("ErrImageNeverPull")
	ErrInvalidImageName      = errors.New("InvalidImageName")
	ErrCreateContainerConfig = errors.New("CreateContainerConfigError")
	ErrCreateContainer       = errors.New("CreateContainerError")
	// ErrPreStartHook is the kubelet's reason for a failed internal
	// pre-start step (its resource managers' PreStartContainer, not a
	// user's hook); nodekit's runtimes have no such step and never return
	// it. It is here for runtimes that do.
	ErrPreStartHook = errors.New("PreStartHookError")
	// ErrPostStartHook is for a failed lifecycle.postStart hook: the
	// container was started, its hook failed and it was killed.
	ErrPostStartHook    = errors.New("PostStartHookError")
	ErrRunContainer     = errors.New("RunContainerError")
	ErrKillContainer    = errors.New("KillContainerError")
	ErrCreatePodSandbox = errors.New("CreatePodSandboxError")
	ErrConfigPodSandbox = errors.New("ConfigPodSandboxError")
	ErrKillPodSandbox   = errors.New("KillPodSandboxError")
)

// reasons lists the step sentinels whose text is a container waiting reason.
var reasons = [...]error{
	ErrCrashLoopBackOff, ErrImagePullBackOff, ErrImagePull, ErrImageInspect,
	ErrImageNeverPull, ErrInvalidImageName, ErrCreateContainerConfig,
	ErrCreateContainer, ErrPreStartHook, ErrPostStartHook, ErrRunContainer,
	ErrKillContainer, ErrCreatePodSandbox, ErrConfigPodSandbox, ErrKillPodSandbox,
}

// Reason returns the kubelet's short reason for err ("CrashLoopBackOff",
// "ErrImagePull", ...) if err wraps one of the step sentinels, else "".
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	return ""
}
