package podenv

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Var is one environment variable of a container.
type Var struct {
	Name  string
	Value string
}

// ObjectGetter returns the configMaps and secrets pods reference. A missing
// object is an error for which apierrors.IsNotFound holds; objects.Cache
// satisfies it.
type ObjectGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ServiceLister lists the services of a namespace; objects.Services
// satisfies it.
type ServiceLister interface {
	ListServices(ctx context.Context, namespace string) ([]*v1.Service, error)
}

// EventRecorder records an event about an object. client-go's
// record.EventRecorder satisfies it as it is.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// ReasonInvalidEnvironmentVariableNames is the event reason for envFrom keys
// that were skipped, as the kubelet's.
const ReasonInvalidEnvironmentVariableNames = "InvalidEnvironmentVariableNames"

// ErrNoSource is wrapped when a pod references a configMap or secret and the
// Resolver has no ObjectGetter (for example a standalone agent).
var ErrNoSource = errors.New("podenv: no API source configured")

// Config configures a Resolver. Every field is optional.
type Config struct {
	// Objects reads configMaps and secrets. nil: a pod referencing one gets
	// an error wrapping ErrNoSource, as the kubelet without a kubeClient.
	Objects ObjectGetter
	// Services lists services for the service environment variables. nil:
	// none are set, as with the kubelet without an apiserver.
	Services ServiceLister
	// MasterServiceNamespace is where the "kubernetes" service lives.
	// Default "default".
	MasterServiceNamespace string
	// HostIPs are the node's IPs, primary first, for status.hostIP(s).
	HostIPs []string
	// NodeAllocatable returns the node's allocatable resources, which stand
	// in for limits a container does not set in resourceFieldRefs, as the
	// kubelet's. Optional (such limits are then 0); usually the Node's
	// status.allocatable, for example from agent.Agent's Node().Node().
	NodeAllocatable func() v1.ResourceList
	// Recorder receives the InvalidEnvironmentVariableNames events.
	Recorder EventRecorder
}

// Resolver builds containers' environments as the kubelet's
// makeEnvironmentVariables. It is safe for concurrent use.
type Resolver struct {
	cfg Config
}

// New returns a Resolver for c.
func New(c Config) *Resolver {
	if c.MasterServiceNamespace == "" {
		c.MasterServiceNamespace = v1.NamespaceDefault
	}
	return &Resolver{cfg: c}
}

// env collects variables in the order they are first set; a later set of a
// name replaces the value in place.
type env struct {
	vars []Var
	idx  map[string]int
}

func (e *env) set(name, value string) {
	if i, ok := e.idx[name]; ok {
		e.vars[i].Value = value
		return
	}
	e.idx[name] = len(e.vars)
	e.vars = append(e.vars, Var{name, value})
}

func (e *env) get(name string) (string, bool) {
	i, ok := e.idx[name]
	if !ok {
		return "", false
	}
	return e.vars[i].Value, true
}

// Env returns container c's environment: envFrom sources first (keys
// prefixed; names no environment can hold are skipped with an event), then
// env in order, each value's $(VAR) references expanded against what is set
// so far and the service variables, then the service variables not set
// otherwise. podIPs are the sandbox's IPs, primary first.
//
// The errors are the kubelet's (`configmaps "x" not found`, `couldn't find
// key k in ConfigMap ns/x`, ...); a missing optional object or key is
// skipped.
func (r *Resolver) Env(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]Var, error) {
	svc, err := r.serviceVars(ctx, pod)
	if err != nil {
		return nil, err
	}
	e := env{vars: make([]Var, 0, len(c.Env)+len(svc)), idx: make(map[string]int, len(c.Env))}
	var cms map[string]*v1.ConfigMap
	var secrets map[string]*v1.Secret
	configMap := func(name string, optional bool) (*v1.ConfigMap, error) {
		if cm, ok := cms[name]; ok {
			return cm, nil
		}
		if r.cfg.Objects == nil {
			return nil, fmt.Errorf("couldn't get configMap %v/%v: %w", pod.Namespace, name, ErrNoSource)
		}
		cm, err := r.cfg.Objects.GetConfigMap(ctx, pod.Namespace, name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		if cms == nil {
			cms = map[string]*v1.ConfigMap{}
		}
		cms[name] = cm
		return cm, nil
	}
	secret := func(name string, optional bool) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		if r.cfg.Objects == nil {
			return nil, fmt.Errorf("couldn't get secret %v/%v: %w", pod.Namespace, name, ErrNoSource)
		}
		s, err := r.cfg.Objects.GetSecret(ctx, pod.Namespace, name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		if secrets == nil {
			secrets = map[string]*v1.Secret{}
		}
		secrets[name] = s
		return s, nil
	}

	for _, from := range c.EnvFrom {
		var kind, name string
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			kind, name = "configMap", from.ConfigMapRef.Name
			cm, err := configMap(name, isTrue(from.ConfigMapRef.Optional))
			if err != nil {
				return nil, err
			}
			if cm == nil {
				continue
			}
			data = cm.Data
		case from.SecretRef != nil:
			kind, name = "secret", from.SecretRef.Name
			s, err := secret(name, isTrue(from.SecretRef.Optional))
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			data = make(map[string]string, len(s.Data))
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys) // a stable order; the kubelet's is a map's
		var invalid []string
		for _, k := range keys {
			n := from.Prefix + k
			if len(validation.IsRelaxedEnvVarName(n)) != 0 {
				invalid = append(invalid, n)
				continue
			}
			e.set(n, data[k])
		}
		if len(invalid) > 0 && r.cfg.Recorder != nil {
			r.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, ReasonInvalidEnvironmentVariableNames,
				"Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
				strings.Join(invalid, ", "), kind, pod.Namespace, name)
		}
	}

	lookup := func(name string) (string, bool) {
		if v, ok := e.get(name); ok {
			return v, true
		}
		for _, v := range svc {
			if v.Name == name {
				return v.Value, true
			}
		}
		return "", false
	}
	for _, ev := range c.Env {
		val := ev.Value
		switch from := ev.ValueFrom; {
		case val != "":
			val = Expand(val, lookup)
		case from == nil:
		case from.FieldRef != nil:
			if val, err = FieldValue(from.FieldRef, pod, podIPs, r.cfg.HostIPs); err != nil {
				return nil, fmt.Errorf("env %q: %w", ev.Name, err)
			}
		case from.ResourceFieldRef != nil:
			if val, err = ResourceValue(from.ResourceFieldRef, pod, c, r.allocatable()); err != nil {
				return nil, fmt.Errorf("env %q: %w", ev.Name, err)
			}
		case from.ConfigMapKeyRef != nil:
			ref := from.ConfigMapKeyRef
			cm, err := configMap(ref.Name, isTrue(ref.Optional))
			if err != nil {
				return nil, err
			}
			if cm == nil {
				continue
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, pod.Namespace, ref.Name)
			}
			val = v
		case from.SecretKeyRef != nil:
			ref := from.SecretKeyRef
			s, err := secret(ref.Name, isTrue(ref.Optional))
			if err != nil {
				return nil, err
			}
			if s == nil {
				continue
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, pod.Namespace, ref.Name)
			}
			val = string(v)
		default:
			return nil, fmt.Errorf("env %q: unsupported valueFrom source", ev.Name)
		}
		e.set(ev.Name, val)
	}
	for _, v := range svc {
		if _, ok := e.idx[v.Name]; !ok {
			e.vars = append(e.vars, v)
		}
	}
	return e.vars, nil
}

// serviceVars lists the service variables pod sees; none without a lister.
func (r *Resolver) serviceVars(ctx context.Context, pod *v1.Pod) ([]Var, error) {
	if r.cfg.Services == nil {
		return nil, nil
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks // the API's default
	master, err := r.cfg.Services.ListServices(ctx, r.cfg.MasterServiceNamespace)
	if err != nil {
		return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
	}
	var own []*v1.Service
	if links && pod.Namespace != r.cfg.MasterServiceNamespace {
		if own, err = r.cfg.Services.ListServices(ctx, pod.Namespace); err != nil {
			return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
		}
	} else if links {
		own = master
	}
	return serviceEnv(master, own, r.cfg.MasterServiceNamespace, pod.Namespace, links), nil
}

func (r *Resolver) allocatable() v1.ResourceList {
	if r.cfg.NodeAllocatable == nil {
		return nil
	}
	return r.cfg.NodeAllocatable()
}

func isTrue(b *bool) bool { return b != nil && *b }
