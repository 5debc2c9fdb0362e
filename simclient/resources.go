package simclient

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is a kind served as unstructured objects: a custom resource
// whose Go type is not in the Scheme.
type Resource struct {
	// GroupVersionResource names it in URLs (group, version, plural).
	schema.GroupVersionResource
	// Kind is its kind (ListKind is Kind+"List").
	Kind string
	// Namespaced is false for a cluster-scoped resource.
	Namespaced bool
	// Status gives it a status subresource: the main resource keeps the
	// stored status, /status changes the status alone.
	Status bool
}

// resource is what the server knows of one resource.
type resource struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	status     bool // has a status subresource
	typed      bool // the scheme has its Go type
	sim        bool // stored in sim's Store
	scale      bool // has a scale subresource (autoscaling/v1 Scale)
}

// clusterScoped are the built-in kinds without a namespace.
var clusterScoped = map[string]bool{
	"Node": true, "Namespace": true, "PersistentVolume": true, "ComponentStatus": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "StorageClass": true, "CSIDriver": true,
	"CSINode": true, "VolumeAttachment": true, "PriorityClass": true, "RuntimeClass": true,
	"IngressClass": true, "CertificateSigningRequest": true, "ClusterTrustBundle": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true, "StorageVersion": true,
	"StorageVersionMigration": true, "IPAddress": true, "ServiceCIDR": true,
	"DeviceClass": true, "ResourceSlice": true, "VolumeAttributesClass": true,
	"CustomResourceDefinition": true, "APIService": true, "TokenReview": true,
	"SelfSubjectReview": true, "SubjectAccessReview": true, "SelfSubjectAccessReview": true,
	"SelfSubjectRulesReview": true, "DeviceTaintRule": true,
}

// scaled are the kinds with a scale subresource.
var scaled = map[string]bool{"Deployment": true, "ReplicaSet": true, "StatefulSet": true, "ReplicationController": true}

// simKinds are those sim's Store holds, which its agents read and write.
var simKinds = map[schema.GroupVersionKind]bool{
	{Version: "v1", Kind: "Pod"}:                                 true,
	{Version: "v1", Kind: "Node"}:                                true,
	{Version: "v1", Kind: "Event"}:                               true,
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}: true,
}

var metaObjectType = reflect.TypeFor[metav1.Object]()

// resourcesOf lists the scheme's kinds that are API resources: an object
// with ObjectMeta and a list kind (options, Status, Scale, Binding and
// Eviction are not), in external versions.
func resourcesOf(scheme *runtime.Scheme, extra []Resource) (map[schema.GroupVersionResource]*resource, error) {
	out := map[schema.GroupVersionResource]*resource{}
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if !reflect.PointerTo(t).Implements(metaObjectType) {
			continue
		}
		if !scheme.Recognizes(gvk.GroupVersion().WithKind(gvk.Kind + "List")) {
			continue
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		_, hasStatus := t.FieldByName("Status")
		out[gvr] = &resource{gvr: gvr, gvk: gvk, namespaced: !clusterScoped[gvk.Kind], status: hasStatus,
			typed: true, sim: simKinds[gvk], scale: scaled[gvk.Kind] && (gvk.Group == "apps" || gvk.Group == "")}
	}
	for _, r := range extra {
		if r.Resource == "" || r.Version == "" || r.Kind == "" {
			return nil, fmt.Errorf("simclient: resource %v: group version resource and kind are required", r.GroupVersionResource)
		}
		if _, ok := out[r.GroupVersionResource]; ok {
			return nil, fmt.Errorf("simclient: resource %v: already served", r.GroupVersionResource)
		}
		out[r.GroupVersionResource] = &resource{gvr: r.GroupVersionResource, gvk: r.GroupVersion().WithKind(r.Kind),
			namespaced: r.Namespaced, status: r.Status}
	}
	return out, nil
}

// sortedGroups lists the served group versions, the core one first, then
// by group and version.
func sortedGroups(rs map[schema.GroupVersionResource]*resource) []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for gvr := range rs {
		gv := gvr.GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Version < out[j].Version
	})
	return out
}
