package volume

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodekit/nodekit/podenv"
)

const (
	// defaultMode is the API's default file mode of the atomically written
	// volumes.
	defaultMode int32 = 0o644
	// maxObjectSize is the apiserver's limit on a configMap or secret; a
	// larger one did not come from an apiserver and is refused.
	maxObjectSize = 1 << 20
	// defaultTokenExpiration is the API's default expirationSeconds.
	defaultTokenExpiration int64 = 3600
)

// payload computes the files of an atomically written volume.
func (m *Manager) payload(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (map[string]File, error) {
	switch {
	case vol.ConfigMap != nil:
		s := vol.ConfigMap
		mode, err := modeOr(s.DefaultMode, defaultMode, "defaultMode")
		if err != nil {
			return nil, err
		}
		out := map[string]File{}
		return out, m.addConfigMap(ctx, out, pod, s.Name, s.Items, isTrue(s.Optional), mode)
	case vol.Secret != nil:
		s := vol.Secret
		mode, err := modeOr(s.DefaultMode, defaultMode, "defaultMode")
		if err != nil {
			return nil, err
		}
		out := map[string]File{}
		return out, m.addSecret(ctx, out, pod, s.SecretName, s.Items, isTrue(s.Optional), mode)
	case vol.DownwardAPI != nil:
		mode, err := modeOr(vol.DownwardAPI.DefaultMode, defaultMode, "defaultMode")
		if err != nil {
			return nil, err
		}
		out := map[string]File{}
		return out, m.addDownwardAPI(out, pod, vol.DownwardAPI.Items, mode)
	case vol.Projected != nil:
		return m.projected(ctx, pod, vol.Projected)
	}
	return nil, fmt.Errorf("volume %q: %w", vol.Name, ErrUnsupported)
}

func (m *Manager) projected(ctx context.Context, pod *v1.Pod, p *v1.ProjectedVolumeSource) (map[string]File, error) {
	mode, err := modeOr(p.DefaultMode, defaultMode, "defaultMode")
	if err != nil {
		return nil, err
	}
	out := map[string]File{}
	for i, src := range p.Sources {
		switch {
		case src.ConfigMap != nil:
			err = m.addConfigMap(ctx, out, pod, src.ConfigMap.Name, src.ConfigMap.Items, isTrue(src.ConfigMap.Optional), mode)
		case src.Secret != nil:
			err = m.addSecret(ctx, out, pod, src.Secret.Name, src.Secret.Items, isTrue(src.Secret.Optional), mode)
		case src.DownwardAPI != nil:
			err = m.addDownwardAPI(out, pod, src.DownwardAPI.Items, mode)
		case src.ServiceAccountToken != nil:
			err = m.addToken(ctx, out, pod, src.ServiceAccountToken, mode)
		default:
			err = fmt.Errorf("projected source %d: %w: only configMap, secret, downwardAPI and serviceAccountToken", i, ErrUnsupported)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (m *Manager) addConfigMap(ctx context.Context, out map[string]File, pod *v1.Pod, name string, items []v1.KeyToPath, optional bool, mode int32) error {
	if m.cfg.Objects == nil {
		return fmt.Errorf("couldn't get configMap %s/%s: %w", pod.Namespace, name, ErrNoSource)
	}
	cm, err := m.cfg.Objects.GetConfigMap(ctx, pod.Namespace, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	size := 0
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
		size += len(k) + len(v)
	}
	if size > maxObjectSize {
		return fmt.Errorf("configmap %s/%s holds %d bytes, more than the apiserver's limit of 1 MiB", pod.Namespace, name, size)
	}
	return project(out, data, items, optional, mode, "configmap")
}

func (m *Manager) addSecret(ctx context.Context, out map[string]File, pod *v1.Pod, name string, items []v1.KeyToPath, optional bool, mode int32) error {
	if m.cfg.Objects == nil {
		return fmt.Errorf("couldn't get secret %s/%s: %w", pod.Namespace, name, ErrNoSource)
	}
	s, err := m.cfg.Objects.GetSecret(ctx, pod.Namespace, name)
	if err != nil {
		if optional && apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	size := 0
	for k, v := range s.Data {
		size += len(k) + len(v)
	}
	if size > maxObjectSize {
		return fmt.Errorf("secret %s/%s holds %d bytes, more than the apiserver's limit of 1 MiB", pod.Namespace, name, size)
	}
	return project(out, s.Data, items, optional, mode, "secret")
}

// project adds data's keys (all, or items) to out, as the kubelet's
// MakePayload: an item whose key is missing is an error unless optional;
// keys used as file names must be valid keys.
func project(out map[string]File, data map[string][]byte, items []v1.KeyToPath, optional bool, mode int32, kind string) error {
	if len(items) == 0 {
		for k, v := range data {
			if errs := validation.IsConfigMapKey(k); len(errs) != 0 {
				return fmt.Errorf("%s key %q is not a valid file name: %s", kind, k, strings.Join(errs, "; "))
			}
			if err := validatePath(k); err != nil {
				return fmt.Errorf("%s key %q: %w", kind, k, err)
			}
			out[k] = File{Data: v, Mode: mode}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s references non-existent %s key: %s", kind, kind, it.Key)
		}
		fm, err := modeOr(it.Mode, mode, "mode")
		if err != nil {
			return err
		}
		if err := validatePath(it.Path); err != nil {
			return fmt.Errorf("item %q: %w", it.Key, err)
		}
		out[it.Path] = File{Data: v, Mode: fm}
	}
	return nil
}

func (m *Manager) addDownwardAPI(out map[string]File, pod *v1.Pod, items []v1.DownwardAPIVolumeFile, mode int32) error {
	for _, it := range items {
		fm, err := modeOr(it.Mode, mode, "mode")
		if err != nil {
			return err
		}
		if err := validatePath(it.Path); err != nil {
			return fmt.Errorf("item %q: %w", it.Path, err)
		}
		var val string
		switch {
		case it.FieldRef != nil:
			if it.FieldRef.APIVersion != "" && it.FieldRef.APIVersion != "v1" {
				return fmt.Errorf("item %q: unsupported pod version: %s", it.Path, it.FieldRef.APIVersion)
			}
			val, err = podenv.MetadataValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			var alloc v1.ResourceList
			if m.cfg.NodeAllocatable != nil {
				alloc = m.cfg.NodeAllocatable()
			}
			val, err = podenv.ResourceValue(it.ResourceFieldRef, pod, nil, alloc)
		default:
			err = fmt.Errorf("neither fieldRef nor resourceFieldRef")
		}
		if err != nil {
			return fmt.Errorf("item %q: %w", it.Path, err)
		}
		out[it.Path] = File{Data: []byte(val), Mode: fm}
	}
	return nil
}

func (m *Manager) addToken(ctx context.Context, out map[string]File, pod *v1.Pod, tp *v1.ServiceAccountTokenProjection, mode int32) error {
	if err := validatePath(tp.Path); err != nil {
		return fmt.Errorf("serviceAccountToken: %w", err)
	}
	if m.cfg.Tokens == nil {
		return fmt.Errorf("serviceAccountToken: %w", ErrNoSource)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := defaultTokenExpiration
	if tp.ExpirationSeconds != nil {
		exp = *tp.ExpirationSeconds
	}
	var auds []string
	if tp.Audience != "" {
		auds = []string{tp.Audience}
	}
	tr, err := m.cfg.Tokens.Token(ctx, pod.Namespace, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         auds,
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}})
	if err != nil {
		return fmt.Errorf("failed to fetch token: %w", err)
	}
	// The kubelet's token file: owned by the pod's one user if it has one,
	// and then, or with an fsGroup (which adds group read), mode 0600.
	owner := fsUser(pod)
	if owner != nil || (pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.FSGroup != nil) {
		mode = 0o600
	}
	out[tp.Path] = File{Data: []byte(tr.Status.Token), Mode: mode, Owner: owner}
	return nil
}

// fsUser is the user every container of pod runs as, if they all name the
// same one (their own runAsUser or the pod's), as the kubelet's FsUserFrom.
func fsUser(pod *v1.Pod) *int64 {
	var user *int64
	same := true
	visit := func(sc *v1.SecurityContext) {
		var u *int64
		if sc != nil && sc.RunAsUser != nil {
			u = sc.RunAsUser
		} else if psc := pod.Spec.SecurityContext; psc != nil && psc.RunAsUser != nil {
			u = psc.RunAsUser
		}
		switch {
		case u == nil:
			same = false
		case user == nil:
			user = u
		case *user != *u:
			same = false
		}
	}
	for i := range pod.Spec.InitContainers {
		visit(pod.Spec.InitContainers[i].SecurityContext)
	}
	for i := range pod.Spec.Containers {
		visit(pod.Spec.Containers[i].SecurityContext)
	}
	for i := range pod.Spec.EphemeralContainers {
		visit(pod.Spec.EphemeralContainers[i].SecurityContext)
	}
	if !same || user == nil {
		return nil
	}
	u := *user
	return &u
}

// modeOr returns *mode, or def when mode is nil; a mode outside 0..0777 is
// an error, as in the API's validation.
func modeOr(mode *int32, def int32, what string) (int32, error) {
	if mode == nil {
		return def, nil
	}
	if *mode < 0 || *mode > 0o777 {
		return 0, fmt.Errorf("%s %#o: must be a number between 0 and 0777 (octal), both inclusive", what, *mode)
	}
	return *mode, nil
}

func isTrue(b *bool) bool { return b != nil && *b }
