package statustest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Verbs of recorded actions.
const (
	VerbGet    = "get"
	VerbPatch  = "patch"
	VerbCreate = "create"
	VerbDelete = "delete"
	// VerbUpdate is an update (PUT) of the status subresource.
	VerbUpdate = "update"
)

// Action is one recorded call.
type Action struct {
	Verb      string
	Namespace string
	Name      string
	// Subresource is "status" for status patches.
	Subresource string
	// PatchType and Patch are set for patches.
	PatchType types.PatchType
	Patch     []byte
	// Object is a copy of the pod given to Create or UpdateStatus.
	Object *v1.Pod
	// DeleteOptions are the options given to Delete.
	DeleteOptions metav1.DeleteOptions
	// Err is what the call returned.
	Err error
}

type key struct{ namespace, name string }

// Fake is an in-memory pod store answering the calls of client-go's typed pod
// client. The zero value is not usable; call New.
type Fake struct {
	mu      sync.Mutex
	pods    map[key]*v1.Pod
	actions []Action
	errs    map[string][]error
	nextUID int
	nextRV  int
	// changed is closed and replaced whenever an action is recorded.
	changed chan struct{}
}

// New returns a Fake holding copies of pods.
func New(pods ...*v1.Pod) *Fake {
	f := &Fake{pods: map[key]*v1.Pod{}, errs: map[string][]error{}, changed: make(chan struct{})}
	for _, p := range pods {
		f.Add(p)
	}
	return f
}

// Add stores a copy of pod, replacing any pod of the same namespace and
// name. A pod without UID gets one.
func (f *Fake) Add(pod *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := pod.DeepCopy()
	if p.UID == "" {
		p.UID = f.newUIDLocked()
	}
	f.nextRV++
	p.ResourceVersion = strconv.Itoa(f.nextRV)
	f.pods[key{p.Namespace, p.Name}] = p
}

// Remove deletes a pod from the store without recording an action.
func (f *Fake) Remove(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, key{namespace, name})
}

// Pod returns a copy of the stored pod.
func (f *Fake) Pod(namespace, name string) (*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[key{namespace, name}]
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

// InjectError makes the next call of verb fail with err, before it touches
// the store; several injected errors are returned in order.
func (f *Fake) InjectError(verb string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[verb] = append(f.errs[verb], err)
}

// Actions returns a copy of the calls so far.
func (f *Fake) Actions() []Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Action(nil), f.actions...)
}

// ClearActions forgets the recorded calls.
func (f *Fake) ClearActions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = nil
}

// Count returns how many calls of verb were recorded.
func (f *Fake) Count(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.actions {
		if a.Verb == verb {
			n++
		}
	}
	return n
}

// WaitForActions blocks until at least n calls of verb ("" for any verb)
// were recorded since the last ClearActions, or ctx ends.
func (f *Fake) WaitForActions(ctx context.Context, verb string, n int) error {
	for {
		f.mu.Lock()
		c := 0
		for _, a := range f.actions {
			if verb == "" || a.Verb == verb {
				c++
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if c >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d %q actions, have %d: %w", n, verb, c, ctx.Err())
		}
	}
}

// Pods returns the client of one namespace. Its methods have the signatures
// of client-go's typed CoreV1().Pods(namespace).
func (f *Fake) Pods(namespace string) *PodClient {
	return &PodClient{f: f, ns: namespace}
}

// PodClient is the Fake seen through one namespace.
type PodClient struct {
	f  *Fake
	ns string
}

func (f *Fake) newUIDLocked() types.UID {
	f.nextUID++
	return types.UID("fake-uid-" + strconv.Itoa(f.nextUID))
}

// recordLocked appends a and wakes waiters.
func (f *Fake) recordLocked(a Action) {
	f.actions = append(f.actions, a)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Fake) injectedLocked(verb string) error {
	q := f.errs[verb]
	if len(q) == 0 {
		return nil
	}
	err := q[0]
	f.errs[verb] = q[1:]
	return err
}

// Get returns a copy of the named pod, or a NotFound error.
func (c *PodClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Pod, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	a := Action{Verb: VerbGet, Namespace: c.ns, Name: name}
	pod, err := f.getLocked(c.ns, name)
	a.Err = err
	f.recordLocked(a)
	return pod, err
}

func (f *Fake) getLocked(ns, name string) (*v1.Pod, error) {
	if err := f.injectedLocked(VerbGet); err != nil {
		return nil, err
	}
	p, ok := f.pods[key{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("pods"), name)
	}
	return p.DeepCopy(), nil
}

// Create stores a copy of pod with a new UID, or answers AlreadyExists.
func (c *PodClient) Create(_ context.Context, pod *v1.Pod, _ metav1.CreateOptions) (*v1.Pod, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	a := Action{Verb: VerbCreate, Namespace: c.ns, Name: pod.Name, Object: pod.DeepCopy()}
	out, err := f.createLocked(c.ns, pod)
	a.Err = err
	f.recordLocked(a)
	return out, err
}

func (f *Fake) createLocked(ns string, pod *v1.Pod) (*v1.Pod, error) {
	if err := f.injectedLocked(VerbCreate); err != nil {
		return nil, err
	}
	if pod.Namespace != "" && pod.Namespace != ns {
		return nil, apierrors.NewBadRequest("the namespace of the object does not match the namespace of the request")
	}
	k := key{ns, pod.Name}
	if _, ok := f.pods[k]; ok {
		return nil, apierrors.NewAlreadyExists(v1.Resource("pods"), pod.Name)
	}
	p := pod.DeepCopy()
	p.Namespace = ns
	p.UID = f.newUIDLocked()
	f.nextRV++
	p.ResourceVersion = strconv.Itoa(f.nextRV)
	p.Generation = 1
	p.Status = v1.PodStatus{Phase: v1.PodPending}
	f.pods[k] = p
	return p.DeepCopy(), nil
}

// Delete removes the pod (grace period 0) or marks it deleted.
func (c *PodClient) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	a := Action{Verb: VerbDelete, Namespace: c.ns, Name: name, DeleteOptions: *opts.DeepCopy()}
	err := f.deleteLocked(c.ns, name, opts)
	a.Err = err
	f.recordLocked(a)
	return err
}

func (f *Fake) deleteLocked(ns, name string, opts metav1.DeleteOptions) error {
	if err := f.injectedLocked(VerbDelete); err != nil {
		return err
	}
	k := key{ns, name}
	p, ok := f.pods[k]
	if !ok {
		return apierrors.NewNotFound(v1.Resource("pods"), name)
	}
	if pre := opts.Preconditions; pre != nil && pre.UID != nil && *pre.UID != p.UID {
		return apierrors.NewConflict(v1.Resource("pods"), name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, p.UID))
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0 {
		delete(f.pods, k)
		return nil
	}
	if p.DeletionTimestamp == nil {
		now := metav1.NewTime(time.Unix(0, 0))
		p.DeletionTimestamp = &now
		p.DeletionGracePeriodSeconds = opts.GracePeriodSeconds
		f.nextRV++
		p.ResourceVersion = strconv.Itoa(f.nextRV)
	}
	return nil
}

// UpdateStatus replaces the stored pod's status with pod's, if pod's
// resourceVersion (required) and UID (if set) are the stored pod's; else it
// answers Conflict, as the apiserver does. Labels and annotations are taken
// from pod as well, the rest of the metadata and the spec are kept.
func (c *PodClient) UpdateStatus(_ context.Context, pod *v1.Pod, _ metav1.UpdateOptions) (*v1.Pod, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	a := Action{Verb: VerbUpdate, Namespace: c.ns, Name: pod.Name, Subresource: "status", Object: pod.DeepCopy()}
	out, err := f.updateStatusLocked(c.ns, pod)
	a.Err = err
	f.recordLocked(a)
	return out, err
}

func (f *Fake) updateStatusLocked(ns string, pod *v1.Pod) (*v1.Pod, error) {
	if err := f.injectedLocked(VerbUpdate); err != nil {
		return nil, err
	}
	if pod.Namespace != "" && pod.Namespace != ns {
		return nil, apierrors.NewBadRequest("statustest: the pod's namespace is not the client's")
	}
	p, ok := f.pods[key{ns, pod.Name}]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
	}
	if pod.ResourceVersion == "" {
		return nil, apierrors.NewBadRequest("statustest: an update needs the pod's resourceVersion")
	}
	if pod.ResourceVersion != p.ResourceVersion || pod.UID != "" && pod.UID != p.UID {
		return nil, apierrors.NewConflict(v1.Resource("pods"), pod.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	// As the apiserver's pod status strategy: the body's metadata and
	// status, the stored spec, ownerReferences and deletionTimestamp (and
	// the system fields: identity, creation, generation).
	in := pod.DeepCopy()
	np := p.DeepCopy()
	np.Labels, np.Annotations, np.Finalizers, np.GenerateName = in.Labels, in.Annotations, in.Finalizers, in.GenerateName
	np.Status = in.Status
	f.nextRV++
	np.ResourceVersion = strconv.Itoa(f.nextRV)
	f.pods[key{ns, pod.Name}] = np
	return np.DeepCopy(), nil
}

// Patch applies a strategic-merge patch to the status subresource; see the
// package doc for what is supported.
func (c *PodClient) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, subresources ...string) (*v1.Pod, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	sub := ""
	if len(subresources) > 0 {
		sub = subresources[0]
	}
	a := Action{Verb: VerbPatch, Namespace: c.ns, Name: name, Subresource: sub, PatchType: pt,
		Patch: append([]byte(nil), data...)}
	out, err := f.patchLocked(c.ns, name, pt, data, subresources)
	a.Err = err
	f.recordLocked(a)
	return out, err
}

func (f *Fake) patchLocked(ns, name string, pt types.PatchType, data []byte, subresources []string) (*v1.Pod, error) {
	if err := f.injectedLocked(VerbPatch); err != nil {
		return nil, err
	}
	if len(subresources) != 1 || subresources[0] != "status" {
		return nil, apierrors.NewBadRequest("statustest: only the status subresource can be patched")
	}
	if pt != types.StrategicMergePatchType {
		return nil, apierrors.NewBadRequest("statustest: only strategic-merge patches are supported")
	}
	k := key{ns, name}
	p, ok := f.pods[k]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("pods"), name)
	}
	var patch struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, apierrors.NewBadRequest("statustest: invalid patch: " + err.Error())
	}
	if patch.Metadata.UID != "" && patch.Metadata.UID != p.UID {
		return nil, apierrors.NewConflict(v1.Resource("pods"), name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", patch.Metadata.UID, p.UID))
	}
	raw, err := json.Marshal(p.Status)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for field, val := range patch.Status {
		if val == nil {
			delete(st, field)
			continue
		}
		if mk, ok := mergeKeys[field]; ok {
			merged, err := mergeList(st[field], val, mk)
			if err != nil {
				return nil, apierrors.NewBadRequest("statustest: " + field + ": " + err.Error())
			}
			st[field] = merged
			continue
		}
		st[field] = val
	}
	raw, err = json.Marshal(st)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var ns2 v1.PodStatus
	if err := json.Unmarshal(raw, &ns2); err != nil {
		return nil, apierrors.NewBadRequest("statustest: patched status: " + err.Error())
	}
	np := p.DeepCopy()
	np.Status = ns2
	f.nextRV++
	np.ResourceVersion = strconv.Itoa(f.nextRV)
	f.pods[k] = np
	return np.DeepCopy(), nil
}

// mergeKeys are the patchMergeKeys of v1.PodStatus's merged lists.
var mergeKeys = map[string]string{
	"conditions":            "type",
	"podIPs":                "ip",
	"hostIPs":               "ip",
	"resourceClaimStatuses": "name",
}

// mergeList merges patch (a list of objects) into orig by key, honouring the
// "$patch" directives delete (on an element) and replace (as an element).
func mergeList(orig, patch any, mergeKey string) (any, error) {
	pl, ok := patch.([]any)
	if !ok {
		return nil, fmt.Errorf("want a list, got %T", patch)
	}
	var out []any
	if ol, ok := orig.([]any); ok {
		out = append(out, ol...)
	}
	for _, e := range pl {
		if m, ok := e.(map[string]any); ok && m["$patch"] == "replace" {
			out = nil
			break
		}
	}
	for _, e := range pl {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("want objects, got %T", e)
		}
		if m["$patch"] == "replace" {
			continue
		}
		idx := -1
		for i, o := range out {
			if om, ok := o.(map[string]any); ok && om[mergeKey] == m[mergeKey] {
				idx = i
				break
			}
		}
		if m["$patch"] == "delete" {
			if idx >= 0 {
				out = append(out[:idx], out[idx+1:]...)
			}
			continue
		}
		if idx < 0 {
			out = append(out, m)
			continue
		}
		om := out[idx].(map[string]any)
		for k, v := range m {
			if v == nil {
				delete(om, k)
			} else {
				om[k] = v
			}
		}
	}
	return out, nil
}
