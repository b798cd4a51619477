// Package manifest reads Kubernetes Pod manifests: multi-document YAML or JSON, as kubectl
// takes them.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ReadPods reads every document of r as a Pod (kind Pod, apiVersion v1); empty documents are
// skipped. Errors name the source, the document number and the field at fault.
func ReadPods(r io.Reader, source string) ([]*corev1.Pod, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var pods []*corev1.Pod
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return pods, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, doc, err)
		}
		if meta.Kind == "" && meta.APIVersion == "" {
			continue // comments only
		}
		if meta.Kind != "Pod" || meta.APIVersion != "v1" {
			return nil, fmt.Errorf("%s: document %d: kind %q apiVersion %q: want kind Pod, apiVersion v1", source, doc, meta.Kind, meta.APIVersion)
		}
		pod := &corev1.Pod{}
		if err := yaml.UnmarshalStrict(raw, pod); err != nil {
			return nil, fmt.Errorf("%s: document %d (pod): %w", source, doc, err)
		}
		if pod.Name == "" {
			return nil, fmt.Errorf("%s: document %d: field metadata.name is empty: a pod needs a name", source, doc)
		}
		pods = append(pods, pod)
	}
}
