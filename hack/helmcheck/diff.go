package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// FieldDiff is one field whose value differs between two objects. Path is the field, as in
// kubectl explain (spec.template.spec.containers[agent].args[5]; a list element is named by
// its name field when both sides have the same one there). Absent marks a side without the
// field.
type FieldDiff struct {
	Path      string
	Want, Got any
	// WantAbsent, GotAbsent: the field is not there at all (not null).
	WantAbsent, GotAbsent bool
}

func (d FieldDiff) String() string {
	side := func(v any, absent bool) string {
		if absent {
			return "(absent)"
		}
		return brief(v)
	}
	return fmt.Sprintf("%s: kustomize %s, chart %s", d.Path, side(d.Want, d.WantAbsent), side(d.Got, d.GotAbsent))
}

// Diff returns every field where got differs from want, in path order.
func Diff(want, got any) []FieldDiff {
	var out []FieldDiff
	diff("", want, got, &out)
	return out
}

func diff(path string, want, got any, out *[]FieldDiff) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := join(path, k)
			wv, win := w[k]
			gv, gin := g[k]
			switch {
			case !win:
				*out = append(*out, FieldDiff{Path: p, WantAbsent: true, Got: gv})
			case !gin:
				*out = append(*out, FieldDiff{Path: p, Want: wv, GotAbsent: true})
			default:
				diff(p, wv, gv, out)
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		for i := range max(len(w), len(g)) {
			switch {
			case i >= len(w):
				*out = append(*out, FieldDiff{Path: index(path, i, nil, g[i]), WantAbsent: true, Got: g[i]})
			case i >= len(g):
				*out = append(*out, FieldDiff{Path: index(path, i, w[i], nil), Want: w[i], GotAbsent: true})
			default:
				diff(index(path, i, w[i], g[i]), w[i], g[i], out)
			}
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		*out = append(*out, FieldDiff{Path: path, Want: want, Got: got})
	}
}

// join appends a map key to a path, bracketed when it holds a dot or slash (data keys such
// as poolconfig-example.yaml, annotation keys).
func join(path, key string) string {
	if strings.ContainsAny(key, "./[]") {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// index names list element i: by its name field when both sides have the same, else by i.
func index(path string, i int, want, got any) string {
	name := func(v any) string {
		m, _ := v.(map[string]any)
		s, _ := m["name"].(string)
		return s
	}
	wn, gn := name(want), name(got)
	switch {
	case wn != "" && (wn == gn || got == nil):
		return path + "[" + wn + "]"
	case gn != "" && want == nil:
		return path + "[" + gn + "]"
	}
	return path + "[" + strconv.Itoa(i) + "]"
}

// brief is v as compact JSON, cut at 160 bytes.
func brief(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const limit = 160
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}
