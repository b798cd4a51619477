package main

import (
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// What Helm adds that deploy/ has not: labels and annotations that say which release and
// chart made an object, and checksum annotations that roll pods when a ConfigMap changes
// (kustomize renames the ConfigMap instead).
var (
	helmLabels             = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}
	helmAnnotationPrefixes = []string{"checksum/", "meta.helm.sh/", "helm.sh/"}
)

// stripHelm removes Helm's labels and annotations from every metadata map in v (the
// object's, and pod templates'); a labels or annotations map left empty is removed.
func stripHelm(v any) {
	switch v := v.(type) {
	case map[string]any:
		if meta, ok := v["metadata"].(map[string]any); ok {
			dropKeys(meta, "labels", func(k string) bool { return slices.Contains(helmLabels, k) })
			dropKeys(meta, "annotations", func(k string) bool { return hasAnyPrefix(k, helmAnnotationPrefixes) })
		}
		for _, e := range v {
			stripHelm(e)
		}
	case []any:
		for _, e := range v {
			stripHelm(e)
		}
	}
}

func dropKeys(meta map[string]any, field string, drop func(string) bool) {
	m, ok := meta[field].(map[string]any)
	if !ok {
		return
	}
	n := len(m)
	for k := range m {
		if drop(k) {
			delete(m, k)
		}
	}
	if len(m) == 0 && n > 0 {
		delete(meta, field)
	}
}

// parseYAMLData replaces each entry of a ConfigMap's data whose name ends in .yaml or .yml
// by its parsed value, so that comments and layout do not count, only content. An entry
// that does not parse is left as text.
func parseYAMLData(o Object) {
	if o.Key.Kind != "ConfigMap" || o.Key.Group != "" {
		return
	}
	data, ok := o.Body["data"].(map[string]any)
	if !ok {
		return
	}
	for name, text := range data {
		s, ok := text.(string)
		if !ok || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		var parsed any
		if err := yaml.Unmarshal([]byte(s), &parsed); err == nil {
			data[name] = parsed
		}
	}
}

// kustomizeHash matches the suffix kustomize's generators append to a ConfigMap or Secret
// name (a hash of the content, 10 characters).
var kustomizeHash = regexp.MustCompile(`^(.+)-[a-z0-9]{10}$`)

// renameGenerated gives want's generated ConfigMaps and Secrets named <name>-<hash> the
// name got uses, <name> (Helm's names are fixed), when got has that object and want has no
// other of that name, and changes every reference to them in want.
func renameGenerated(want, got []Object) {
	gotKeys := map[Key]bool{}
	for _, o := range got {
		gotKeys[o.Key] = true
	}
	wantKeys := map[Key]bool{}
	for _, o := range want {
		wantKeys[o.Key] = true
	}
	renames := map[string]string{}
	for i, o := range want {
		if o.Key.Group != "" || (o.Key.Kind != "ConfigMap" && o.Key.Kind != "Secret") {
			continue
		}
		m := kustomizeHash.FindStringSubmatch(o.Key.Name)
		if m == nil {
			continue
		}
		plain := o.Key
		plain.Name = m[1]
		if !gotKeys[plain] || wantKeys[plain] || gotKeys[o.Key] {
			continue
		}
		renames[o.Key.Name] = m[1]
		want[i].Key = plain
	}
	if len(renames) == 0 {
		return
	}
	for _, o := range want {
		replaceStrings(o.Body, renames)
	}
}

// replaceStrings replaces, in place, every string value in v that is a key of r by r's value.
func replaceStrings(v any, r map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok {
				if n, ok := r[s]; ok {
					v[k] = n
				}
				continue
			}
			replaceStrings(e, r)
		}
	case []any:
		for i, e := range v {
			if s, ok := e.(string); ok {
				if n, ok := r[s]; ok {
					v[i] = n
				}
				continue
			}
			replaceStrings(e, r)
		}
	}
}

// clearNamespace removes metadata.namespace of cluster-scoped objects (Key has none).
func clearNamespace(o Object) {
	if o.Key.Namespace != "" {
		return
	}
	if meta, ok := o.Body["metadata"].(map[string]any); ok {
		delete(meta, "namespace")
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// celFields hold CEL (ValidatingAdmissionPolicy, matchConditions), where whitespace between
// tokens does not count. kustomize writes a folded scalar (>-) with more-indented lines
// back as a literal with an extra blank line, which the chart, as the API server, reads
// without.
var celFields = []string{"expression", "messageExpression"}

// collapseCEL replaces each run of whitespace in every CEL field in v by one space.
func collapseCEL(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && slices.Contains(celFields, k) {
				v[k] = strings.Join(strings.Fields(s), " ")
				continue
			}
			collapseCEL(e)
		}
	case []any:
		for _, e := range v {
			collapseCEL(e)
		}
	}
}

// unwrapBase64 removes line breaks from base64 fields: a Secret's data and the caBundle of
// webhook entries. kustomize's secretGenerator wraps them at 76 characters; the API server
// decodes both forms to the same bytes.
func unwrapBase64(o Object) {
	unwrap := func(m map[string]any, k string) {
		if s, ok := m[k].(string); ok {
			m[k] = strings.NewReplacer("\n", "", "\r", "").Replace(s)
		}
	}
	switch {
	case o.Key.Group == "" && o.Key.Kind == "Secret":
		if data, ok := o.Body["data"].(map[string]any); ok {
			for k := range data {
				unwrap(data, k)
			}
		}
	case o.Key.Group == "admissionregistration.k8s.io":
		hooks, _ := o.Body["webhooks"].([]any)
		for _, h := range hooks {
			m, _ := h.(map[string]any)
			if cc, ok := m["clientConfig"].(map[string]any); ok {
				unwrap(cc, "caBundle")
			}
		}
	}
}
