package nodeflags

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/nodekit/nodekit/runtime"
)

// HeaderFlag collects -manifest-url-header values, as the kubelet's
// --manifest-url-header does.
type HeaderFlag http.Header

// String lists the headers as key:value,...
func (h HeaderFlag) String() string {
	var parts []string
	for k, vs := range h {
		for _, v := range vs {
			parts = append(parts, k+":"+v)
		}
	}
	return strings.Join(parts, ",")
}

// Set adds the comma-separated key:value headers of s.
func (h HeaderFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q: want key:value", kv)
		}
		http.Header(h).Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return nil
}

// EnsureImage pulls image unless the node has it.
func EnsureImage(ctx context.Context, is runtime.ImageService, image string) error {
	images, err := is.ListImages(ctx)
	if err != nil {
		return err
	}
	for _, img := range images {
		for _, tag := range img.RepoTags {
			if tag == image || img.ID == image {
				return nil
			}
		}
	}
	_, err = is.PullImage(ctx, image, nil)
	return err
}
