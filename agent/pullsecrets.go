package agent

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/podutil"
)

// SecretGetter reads the secrets of one namespace; client-go's
// CoreV1().Secrets(namespace) satisfies it as it is.
type SecretGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Secret, error)
}

// ReasonFailedToRetrieveImagePullSecret is the kubelet's Warning event
// reason for image pull secrets that could not be read.
const ReasonFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"

// newSecretCache reads Config.Secrets through a cache, so that each pull
// secret is read at most once a minute however often its pods sync (the
// kubelet reads them through its secret manager too). nil without Secrets.
func newSecretCache(c *Config) *objects.Cache {
	if c.Secrets == nil {
		return nil
	}
	return objects.New(objects.Config{
		Secrets: func(ns string) objects.SecretGetter { return c.Secrets(ns) },
		Clock:   c.Clock,
	})
}

// pullSecrets resolves pod's spec.imagePullSecrets, as the kubelet's
// getPullSecretsForPod: secrets that cannot be read are left out with a
// FailedToRetrieveImagePullSecret event, and the pull is tried without them.
func (a *Agent) pullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	var out []v1.Secret
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue // the API once allowed empty names
		}
		var s *v1.Secret
		var err error
		if a.secrets != nil {
			s, err = a.secrets.GetSecret(ctx, pod.Namespace, ref.Name)
		} else {
			err = fmt.Errorf("couldn't get secret %s/%s: %w", pod.Namespace, ref.Name, objects.ErrNoSource)
		}
		if err != nil {
			a.log.Info("Unable to retrieve pull secret, the image pull may not succeed", "pod", podutil.FullName(pod),
				"secret", ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		out = append(out, *s)
	}
	if len(failed) > 0 {
		a.event(pod, v1.EventTypeWarning, ReasonFailedToRetrieveImagePullSecret,
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(failed, ", "))
	}
	return out
}
