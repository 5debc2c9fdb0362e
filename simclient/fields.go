package simclient

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

var (
	everything = labels.Everything()
	noFields   = fields.Everything()
)

// metaFields are the fields every kind can be selected by.
func metaFields(o runtime.Object) fields.Set {
	m := objectMeta(o)
	return fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
}

// fieldsOf returns an object's selectable fields: the apiserver's for the
// kinds controllers select by field, metadata's for the others.
func fieldsOf(o runtime.Object) fields.Set {
	f := metaFields(o)
	switch o := o.(type) {
	case *corev1.Pod:
		f["spec.nodeName"] = o.Spec.NodeName
		f["spec.restartPolicy"] = string(o.Spec.RestartPolicy)
		f["spec.schedulerName"] = o.Spec.SchedulerName
		f["spec.serviceAccountName"] = o.Spec.ServiceAccountName
		f["spec.hostNetwork"] = strconv.FormatBool(o.Spec.HostNetwork)
		f["status.phase"] = string(o.Status.Phase)
		f["status.podIP"] = o.Status.PodIP
		f["status.nominatedNodeName"] = o.Status.NominatedNodeName
	case *corev1.Node:
		f["spec.unschedulable"] = strconv.FormatBool(o.Spec.Unschedulable)
	case *corev1.Event:
		io := o.InvolvedObject
		f["involvedObject.kind"] = io.Kind
		f["involvedObject.namespace"] = io.Namespace
		f["involvedObject.name"] = io.Name
		f["involvedObject.uid"] = string(io.UID)
		f["involvedObject.apiVersion"] = io.APIVersion
		f["involvedObject.resourceVersion"] = io.ResourceVersion
		f["involvedObject.fieldPath"] = io.FieldPath
		f["reason"] = o.Reason
		f["reportingComponent"] = o.ReportingController
		f["source"] = o.Source.Component
		f["type"] = o.Type
	case *corev1.Secret:
		f["type"] = string(o.Type)
	case *corev1.Namespace:
		f["status.phase"] = string(o.Status.Phase)
	case *corev1.ReplicationController:
		f["status.replicas"] = strconv.Itoa(int(o.Status.Replicas))
	case *batchv1.Job:
		f["status.successful"] = strconv.Itoa(int(o.Status.Succeeded))
	}
	return f
}
