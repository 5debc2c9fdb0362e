// Package staticpod turns static pod manifests (the files of the file source
// and the bodies of the manifest-URL source) into pods, as the kubelet does:
// it decodes YAML or JSON as v1 Pod or PodList (case-sensitive field names;
// DecodeStrict also reports unknown and duplicate fields as warnings, as the
// apiserver's fieldValidation=Warn does, which the file and manifest-URL
// sources record as a FieldValidationWarning event on the pod while the pod
// runs without them, and names unknown fields in the error of a pod they
// leave invalid), applies the v1 API
// defaults the node acts on, applies the static-pod defaults (name suffixed
// with the node name, default namespace, a UID hashed from node, source and
// content, the config.source/config.hash annotations, a NoExecute toleration
// for file pods, phase Pending) and validates the result, including the
// kubelet's rule that static pods may not reference API objects (Secrets,
// ConfigMaps, ServiceAccounts, ClusterTrustBundles, ResourceClaims, ...).
//
// Where it sits: used by podconfig/file and podconfig/manifesturl before they
// hand pods to the podconfig mux. It depends on k8s.io/api and apimachinery
// alone; validation uses apimachinery's helpers, so it checks what matters to
// a node (names, containers, images, ports, volumes, policies, API
// references) rather than all of the apiserver's ValidatePodCreate.
//
// Usage:
//
//	pods, err := staticpod.Decode(data, false)
//	if err != nil { ... } // wraps staticpod.ErrDecode
//	for _, p := range pods {
//		if err := staticpod.Prepare(p, staticpod.Origin{Source: podutil.FileSource, Location: path, NodeName: node}); err != nil {
//			... // wraps staticpod.ErrInvalid
//		}
//	}
//
// Static pod UIDs are derived from the content's protobuf encoding, so they
// are stable across restarts of the same program but differ from the UIDs the
// kubelet itself would derive for the same manifest.
package staticpod
