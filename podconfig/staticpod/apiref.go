package staticpod

import (
	v1 "k8s.io/api/core/v1"
)

// apiObjectReference returns the kind of API object the pod references
// (plural resource, as the kubelet words it), or "". Static pods run without
// the apiserver's admission and may not depend on its objects. Unknown volume
// and projection types are refused too, so a type added to the API later is
// not let through unchecked.
func apiObjectReference(pod *v1.Pod) string {
	s := &pod.Spec
	if s.ServiceAccountName != "" || s.DeprecatedServiceAccount != "" {
		return "serviceaccounts"
	}
	if len(s.ImagePullSecrets) > 0 {
		return "secrets"
	}
	var envRef string
	visit := func(c *v1.Container) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil && envRef == "" {
				envRef = "secrets"
			}
			if e.ConfigMapRef != nil && envRef == "" {
				envRef = "configmaps"
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil || envRef != "" {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				envRef = "secrets"
			} else if e.ValueFrom.ConfigMapKeyRef != nil {
				envRef = "configmaps"
			}
		}
	}
	for i := range s.InitContainers {
		visit(&s.InitContainers[i])
	}
	for i := range s.Containers {
		visit(&s.Containers[i])
	}
	for i := range s.EphemeralContainers {
		visit((*v1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
	}
	if envRef != "" {
		return envRef
	}
	if len(s.ResourceClaims) > 0 {
		return "resourceclaims"
	}
	for i := range s.Volumes {
		if r := volumeReference(&s.Volumes[i]); r != "" {
			return r
		}
	}
	return ""
}

func volumeReference(v *v1.Volume) string {
	switch {
	case v.CephFS != nil && v.CephFS.SecretRef != nil,
		v.Cinder != nil && v.Cinder.SecretRef != nil,
		v.FlexVolume != nil && v.FlexVolume.SecretRef != nil,
		v.RBD != nil && v.RBD.SecretRef != nil,
		v.ScaleIO != nil && v.ScaleIO.SecretRef != nil,
		v.ISCSI != nil && v.ISCSI.SecretRef != nil,
		v.StorageOS != nil && v.StorageOS.SecretRef != nil:
		return "secrets"
	case v.AWSElasticBlockStore != nil, v.AzureDisk != nil, v.CephFS != nil, v.Cinder != nil,
		v.DownwardAPI != nil, v.EmptyDir != nil, v.FC != nil, v.FlexVolume != nil, v.Flocker != nil, v.GCEPersistentDisk != nil,
		v.GitRepo != nil, v.HostPath != nil, v.Image != nil, v.ISCSI != nil, v.NFS != nil, v.PhotonPersistentDisk != nil,
		v.PortworxVolume != nil, v.Quobyte != nil, v.RBD != nil, v.ScaleIO != nil, v.StorageOS != nil, v.VsphereVolume != nil:
		return ""
	case v.ConfigMap != nil:
		return "configmaps (via configmap volumes)"
	case v.Secret != nil:
		return "secrets (via secret volumes)"
	case v.CSI != nil:
		return "csidrivers (via CSI volumes)"
	case v.Glusterfs != nil:
		return "endpoints (via glusterFS volumes)"
	case v.PersistentVolumeClaim != nil:
		return "persistentvolumeclaims"
	case v.Ephemeral != nil:
		return "persistentvolumeclaims (via ephemeral volumes)"
	case v.AzureFile != nil:
		return "secrets (via azureFile volumes)"
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			switch {
			case src.ConfigMap != nil:
				return "configmaps (via projected volumes)"
			case src.Secret != nil:
				return "secrets (via projected volumes)"
			case src.ServiceAccountToken != nil:
				return "serviceaccounts (via projected volumes)"
			case src.ClusterTrustBundle != nil:
				return "clustertrustbundles"
			case src.PodCertificate != nil:
				return "podcertificates"
			case src.DownwardAPI != nil:
			default:
				return "unknown projected volume sources (volume " + v.Name + ")"
			}
		}
		return ""
	}
	return "unknown volume types (volume " + v.Name + ")"
}
