package cri

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type dockerConfigEntry struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// credentials returns the credentials in pullSecrets (kubernetes.io/dockerconfigjson
// and kubernetes.io/dockercfg) for image's registry, in secret order, as the
// kubelet finds them: a key matches the image's host, or host and path
// prefix; within a secret the most specific key comes first.
func credentials(image string, secrets []v1.Secret) []*runtimeapi.AuthConfig {
	if len(secrets) == 0 {
		return nil
	}
	ref := normalizeImage(image)
	var out []*runtimeapi.AuthConfig
	for i := range secrets {
		var entries map[string]dockerConfigEntry
		switch secrets[i].Type {
		case v1.SecretTypeDockerConfigJson:
			var cfg struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if json.Unmarshal(secrets[i].Data[v1.DockerConfigJsonKey], &cfg) != nil {
				continue
			}
			entries = cfg.Auths
		case v1.SecretTypeDockercfg:
			if json.Unmarshal(secrets[i].Data[v1.DockerConfigKey], &entries) != nil {
				continue
			}
		default:
			continue
		}
		// The most specific key first, as the kubelet's keyring.
		keys := make([]string, 0, len(entries))
		for key := range entries {
			if matchRegistry(normalizeKey(key), ref) {
				keys = append(keys, key)
			}
		}
		sort.Slice(keys, func(i, j int) bool {
			if a, b := len(normalizeKey(keys[i])), len(normalizeKey(keys[j])); a != b {
				return a > b
			}
			return keys[i] < keys[j]
		})
		for _, key := range keys {
			e := entries[key]
			a := &runtimeapi.AuthConfig{
				Username: e.Username, Password: e.Password, Auth: e.Auth,
				ServerAddress: strings.SplitN(normalizeKey(key), "/", 2)[0],
				IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken,
			}
			if a.Username == "" && e.Auth != "" {
				if b, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
					if u, p, ok := strings.Cut(string(b), ":"); ok {
						a.Username, a.Password = u, p
					}
				}
			}
			out = append(out, a)
		}
	}
	return out
}

// normalizeImage returns "host/path" of image without tag or digest, with
// Docker Hub's defaults filled in.
func normalizeImage(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	first, rest, found := strings.Cut(image, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return dockerHubAlias(first) + "/" + rest
	}
	if !found {
		image = "library/" + image
	}
	return "docker.io/" + image
}

// normalizeKey turns a docker config key ("https://index.docker.io/v1/",
// "registry.example.com/team") into "host[/path]".
func normalizeKey(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key = strings.TrimSuffix(key, "/")
	host, path, _ := strings.Cut(key, "/")
	host = dockerHubAlias(host)
	if host == "docker.io" && (path == "v1" || path == "v2") {
		path = ""
	}
	if path == "" {
		return host
	}
	return host + "/" + path
}

func dockerHubAlias(host string) string {
	switch host {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return "docker.io"
	}
	return host
}

// matchRegistry reports whether key ("host[/path]") covers ref ("host/path").
func matchRegistry(key, ref string) bool {
	return ref == key || strings.HasPrefix(ref, key+"/")
}
