package admission

import (
	"encoding/json"
	"slices"
	"strings"
)

// Op is one JSON patch operation (RFC 6902): add, replace or remove.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"` // a JSON pointer (RFC 6901)
	Value any    `json:"value"`
}

// MarshalJSON leaves out the value of a remove, and keeps an empty one of the others.
func (o Op) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	type plain Op
	return json.Marshal(plain(o))
}

// escapeToken escapes a key as one JSON pointer token: "~" first, then "/".
func escapeToken(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// mapOps returns the ops that turn the string map at path (current holds its value) into
// one where every key of set has its value and no key of remove is. An empty map may be
// absent from the document (omitempty), so it is added whole. Keys are handled in sorted
// order, so the patch is deterministic.
func mapOps(path string, current, set map[string]string, remove []string) []Op {
	if len(current) == 0 {
		if len(set) == 0 {
			return nil
		}
		return []Op{{Op: "add", Path: path, Value: set}}
	}
	var ops []Op
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + escapeToken(k)
		switch v, ok := current[k]; {
		case !ok:
			ops = append(ops, Op{Op: "add", Path: p, Value: set[k]})
		case v != set[k]:
			ops = append(ops, Op{Op: "replace", Path: p, Value: set[k]})
		}
	}
	remove = slices.Sorted(slices.Values(remove))
	for _, k := range remove {
		if _, ok := current[k]; ok {
			ops = append(ops, Op{Op: "remove", Path: path + "/" + escapeToken(k)})
		}
	}
	return ops
}
