package cri

import (
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// CRI labels and annotations, named as the kubelet names them so that crictl,
// containerd and operators see nodekit pods as kubelet pods.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash            = "io.kubernetes.container.hash"
	AnnotationRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPreStopHandler           = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts           = "io.kubernetes.container.ports"
	AnnotationContainerType            = "io.kubernetes.container.type"
	AnnotationPodDeletionGracePeriod   = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGrace      = "io.kubernetes.pod.terminationGracePeriod"
)

// Values of AnnotationContainerType.
const (
	containerTypeInit      = "init"
	containerTypeRegular   = "container"
	containerTypeEphemeral = "ephemeral"
)

func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	return l
}

func sandboxAnnotations(pod *v1.Pod) map[string]string {
	a := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		a[k] = v
	}
	return a
}

func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, ctype string, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(runtime.HashContainer(c), 16),
		AnnotationRestartCount:             strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		AnnotationContainerType:            ctype,
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGrace] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(b)
		}
	}
	return a
}

// containerInfo is what a container's labels and annotations tell.
type containerInfo struct {
	podName, podNamespace string
	podUID                types.UID
	name                  string
	hash                  uint64
	restartCount          int
	deletionGrace         *int64
	terminationGrace      *int64
	terminationMsgPath    string
	terminationMsgPolicy  v1.TerminationMessagePolicy
	preStop               *v1.LifecycleHandler
	ports                 []v1.ContainerPort
}

func readContainerInfo(labels, annotations map[string]string) containerInfo {
	ci := containerInfo{
		podName:      labels[LabelPodName],
		podNamespace: labels[LabelPodNamespace],
		podUID:       types.UID(labels[LabelPodUID]),
		name:         labels[LabelContainerName],
	}
	// Missing or malformed values read as zero, as with the kubelet: the
	// container may predate the annotation.
	ci.hash, _ = strconv.ParseUint(annotations[AnnotationContainerHash], 16, 64)
	ci.restartCount, _ = strconv.Atoi(annotations[AnnotationRestartCount])
	ci.deletionGrace = int64Annotation(annotations, AnnotationPodDeletionGracePeriod)
	ci.terminationGrace = int64Annotation(annotations, AnnotationPodTerminationGrace)
	ci.terminationMsgPath = annotations[AnnotationTerminationMessagePath]
	ci.terminationMsgPolicy = v1.TerminationMessagePolicy(annotations[AnnotationTerminationMessagePolicy])
	if s := annotations[AnnotationPreStopHandler]; s != "" {
		h := &v1.LifecycleHandler{}
		if json.Unmarshal([]byte(s), h) == nil {
			ci.preStop = h
		}
	}
	if s := annotations[AnnotationContainerPorts]; s != "" {
		_ = json.Unmarshal([]byte(s), &ci.ports)
	}
	return ci
}

func int64Annotation(a map[string]string, key string) *int64 {
	s, ok := a[key]
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &v
}

func metaNow(m *Manager) metav1.Time { return metav1.NewTime(m.clock.Now()) }
