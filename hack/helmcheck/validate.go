package main

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/podfence/podfence/internal/manifest"
)

// strictDecoder decodes the built-in kinds of client-go's scheme, refusing unknown and
// duplicate fields and values of the wrong type: the API types' schema, without a server.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// Validation is what Validate found for one object.
type Validation struct {
	Key Key
	// Checked: decoded strictly as its API type. False for kinds outside the built-in
	// scheme (cert-manager, prometheus-operator), of which only the key is checked.
	Checked bool
	Err     error
}

// Validate decodes each object strictly as its API type and checks its namespace: every
// namespaced object must name namespace (a rendering applied with kubectl lands there),
// no cluster-scoped one may name any. podfence's own ConfigMaps must hold files podfence
// reads (checkContent); every container requests CPU and memory and has a memory limit
// (manifest.CheckResources).
func Validate(objs []Object, namespace string) []Validation {
	out := make([]Validation, 0, len(objs))
	for _, o := range objs {
		v := Validation{Key: o.Key}
		meta, _ := o.Body["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		switch clustered := slices.Contains(clusterScoped, o.Key.Kind); {
		case clustered && ns != "":
			v.Err = fmt.Errorf("metadata.namespace %q on a cluster-scoped %s: want none", ns, o.Key.Kind)
		case !clustered && ns != namespace:
			v.Err = fmt.Errorf("metadata.namespace %q: want %q", ns, namespace)
		}
		if v.Err == nil {
			v.Checked, v.Err = decodeStrict(o.Raw)
		}
		if v.Err == nil {
			v.Err = checkContent(o)
		}
		if v.Err == nil {
			v.Err = manifest.CheckResources(o.Raw)
		}
		out = append(out, v)
	}
	return out
}

// decodeStrict decodes doc as its registered type; checked is false when the scheme does
// not know the kind.
func decodeStrict(doc []byte) (checked bool, err error) {
	_, _, err = strictDecoder.Decode(doc, nil, nil)
	switch {
	case runtime.IsNotRegisteredError(err):
		return false, nil
	case err != nil:
		return true, fmt.Errorf("as its API type: %w", err)
	}
	return true, nil
}
