package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Key names one Kubernetes object: its API group (not the version: the same object may be
// written in two versions), kind, namespace ("" when cluster-scoped) and name.
type Key struct {
	Group, Kind, Namespace, Name string
}

func (k Key) String() string {
	kind := k.Kind
	if k.Group != "" {
		kind += "." + k.Group
	}
	if k.Namespace == "" {
		return kind + " " + k.Name
	}
	return kind + " " + k.Namespace + "/" + k.Name
}

// Object is one rendered manifest: its key and its content as JSON values (maps, slices,
// strings, float64, bool, nil), and the YAML document it came from.
type Object struct {
	Key  Key
	Body map[string]any
	Raw  []byte
}

// clusterScoped lists the kinds of deploy/ and the chart that have no namespace. kustomize
// gives ValidatingAdmissionPolicy and DeviceClass one (its schema predates the kinds); the API
// server drops it.
var clusterScoped = []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
	"ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterIssuer",
	"PriorityClass", "CustomResourceDefinition", "DeviceClass"}

// maxDocument bounds one YAML document (a rendering is far smaller).
const maxDocument = 4 << 20

// ParseObjects reads a multi-document YAML stream (kubectl kustomize, helm template) into
// objects, skipping empty documents. Each needs apiVersion, kind and metadata.name; a key
// may appear once.
func ParseObjects(data []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReaderSize(bytes.NewReader(data), 64<<10))
	var objs []Object
	seen := map[Key]int{}
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if len(doc) > maxDocument {
			return nil, fmt.Errorf("document %d: %d bytes, want at most %d", n, len(doc), maxDocument)
		}
		var body map[string]any
		if err := yaml.Unmarshal(doc, &body); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if len(body) == 0 {
			continue // only comments, or empty
		}
		k, err := keyOf(body)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if first, dup := seen[k]; dup {
			return nil, fmt.Errorf("document %d: %s again (first in document %d)", n, k, first)
		}
		seen[k] = n
		objs = append(objs, Object{Key: k, Body: body, Raw: doc})
	}
}

// keyOf reads an object's key; cluster-scoped kinds get no namespace.
func keyOf(body map[string]any) (Key, error) {
	apiVersion, _ := body["apiVersion"].(string)
	kind, _ := body["kind"].(string)
	meta, _ := body["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	switch {
	case apiVersion == "":
		return Key{}, fmt.Errorf("field apiVersion: missing or not a string (want e.g. apps/v1)")
	case kind == "":
		return Key{}, fmt.Errorf("field kind: missing or not a string")
	case name == "":
		return Key{}, fmt.Errorf("%s: field metadata.name: missing or not a string", kind)
	}
	group := ""
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	if slices.Contains(clusterScoped, kind) {
		namespace = ""
	}
	return Key{Group: group, Kind: kind, Namespace: namespace, Name: name}, nil
}
