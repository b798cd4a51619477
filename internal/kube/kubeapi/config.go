// Package kubeapi talks to the Kubernetes API server with plain REST calls: where the
// server is and which credentials to show (Config: a pod's service account or a
// kubeconfig file), and an HTTPS client that sends one request at a time (Client).
//
// It exists so that the node agent, whose memory budget is tight, needs no client-go: its
// few calls (Events, the Node's labels and info) are a POST, a PATCH or a GET of a JSON
// body, and one watch of its Node (node.go). Subpackage clientset builds a client-go
// clientset for commands that need informers; the agent must not import it.
package kubeapi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/regfile"
)

// Config says how to reach the API server.
type Config struct {
	// Host is the server's URL: https://host:port.
	Host string
	// CAData verifies the server (PEM); Insecure skips verification.
	CAData   []byte
	Insecure bool
	// Token, or TokenFile (re-read on each request), is a bearer token.
	Token, TokenFile string
	// CertData and KeyData are a client certificate and key (PEM).
	CertData, KeyData []byte
}

// ServiceAccountDir is where the kubelet mounts a pod's service-account credentials.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotInCluster: the process does not run in a pod (no KUBERNETES_SERVICE_HOST/PORT).
var ErrNotInCluster = errors.New("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset")

// InCluster is the config of a process in a pod: the API service from the environment
// (getenv) and the service account's token and CA from dir (ServiceAccountDir).
func InCluster(dir string, getenv func(string) string) (Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, ErrNotInCluster
	}
	ca, err := regfile.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return Config{}, fmt.Errorf("in-cluster config: %w", err)
	}
	token := filepath.Join(dir, "token")
	if _, err := os.Stat(token); err != nil {
		return Config{}, fmt.Errorf("in-cluster config: %w", err)
	}
	return Config{Host: "https://" + net.JoinHostPort(host, port), CAData: ca, TokenFile: token}, nil
}

// Load is the config of the kubeconfig file at path or, when path is empty, of the pod the
// process runs in (ErrNotInCluster outside a pod).
func Load(path string) (Config, error) {
	if path != "" {
		return Kubeconfig(path)
	}
	return InCluster(ServiceAccountDir, os.Getenv)
}

// kubeconfig is the part of a kubeconfig file (clientcmd's v1 Config) that Kubeconfig reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server     string `json:"server"`
			CA         string `json:"certificate-authority"`
			CAData     []byte `json:"certificate-authority-data"`
			Insecure   bool   `json:"insecure-skip-tls-verify"`
			ProxyURL   string `json:"proxy-url"`
			ServerName string `json:"tls-server-name"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token     string         `json:"token"`
			TokenFile string         `json:"tokenFile"`
			Cert      string         `json:"client-certificate"`
			CertData  []byte         `json:"client-certificate-data"`
			Key       string         `json:"client-key"`
			KeyData   []byte         `json:"client-key-data"`
			Exec      map[string]any `json:"exec"`
			Provider  map[string]any `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
}

// Kubeconfig reads the current context of the kubeconfig file at path: its server, CA,
// and a token or client certificate. File paths in it are relative to its directory.
// Exec plugins and auth providers are not supported.
func Kubeconfig(path string) (Config, error) {
	b, err := regfile.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return Config{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err := kc.current(filepath.Dir(path))
	if err != nil {
		return Config{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

func (kc *kubeconfig) current(dir string) (Config, error) {
	var cluster, user string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			cluster, user, found = c.Context.Cluster, c.Context.User, true
		}
	}
	if !found {
		return Config{}, fmt.Errorf("current-context %q: no such context", kc.CurrentContext)
	}
	var cfg Config
	read := func(file string, data []byte) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		return regfile.ReadFile(file)
	}
	found = false
	for _, c := range kc.Clusters {
		if c.Name != cluster {
			continue
		}
		found, cfg.Host, cfg.Insecure = true, c.Cluster.Server, c.Cluster.Insecure
		var err error
		if cfg.CAData, err = read(c.Cluster.CA, c.Cluster.CAData); err != nil {
			return Config{}, fmt.Errorf("cluster %q: %w", cluster, err)
		}
		if c.Cluster.ProxyURL != "" || c.Cluster.ServerName != "" {
			return Config{}, fmt.Errorf("cluster %q: proxy-url and tls-server-name are not supported", cluster)
		}
	}
	if !found {
		return Config{}, fmt.Errorf("context %q: no cluster %q", kc.CurrentContext, cluster)
	}
	for _, u := range kc.Users {
		if u.Name != user {
			continue
		}
		if u.User.Exec != nil || u.User.Provider != nil {
			return Config{}, fmt.Errorf("user %q: exec plugins and auth providers are not supported; give a token or a client certificate", user)
		}
		cfg.Token, cfg.TokenFile = u.User.Token, u.User.TokenFile
		if cfg.TokenFile != "" && !filepath.IsAbs(cfg.TokenFile) {
			cfg.TokenFile = filepath.Join(dir, cfg.TokenFile)
		}
		var err error
		if cfg.CertData, err = read(u.User.Cert, u.User.CertData); err == nil {
			cfg.KeyData, err = read(u.User.Key, u.User.KeyData)
		}
		if err != nil {
			return Config{}, fmt.Errorf("user %q: %w", user, err)
		}
	}
	return cfg, nil
}
