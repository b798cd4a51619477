package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// Options say which differences between the kustomize base (want) and the chart (got) are
// expected.
type Options struct {
	// KustomizeOnly and ChartOnly name objects ("Kind name") that only one side has.
	KustomizeOnly, ChartOnly []string
	// GeneratedTLS names the webhook's TLS Secret when the two sides made their certificates
	// independently: each side's chain is checked (checkWebhookTLS), then its Secret data and
	// caBundles are not compared.
	GeneratedTLS string
}

// Report is what Compare found.
type Report struct {
	Missing []Key // in the kustomize base, not in the chart
	Extra   []Key // in the chart, not in the kustomize base
	Fields  []ObjectDiff
	TLS     []error // a side whose generated TLS material does not hold together
	Matched int     // objects found equal
}

// ObjectDiff is an object both sides have, with the fields that differ.
type ObjectDiff struct {
	Key    Key
	Fields []FieldDiff
}

// OK reports whether nothing differs beyond what Options allow.
func (r Report) OK() bool {
	return len(r.Missing) == 0 && len(r.Extra) == 0 && len(r.Fields) == 0 && len(r.TLS) == 0
}

// Compare normalises want and got (in place: see normalise.go) and compares them object by
// object.
func Compare(want, got []Object, opts Options) Report {
	var r Report
	if opts.GeneratedTLS != "" {
		for _, side := range []struct {
			name string
			objs []Object
		}{{"kustomize", want}, {"chart", got}} {
			if err := checkWebhookTLS(side.objs, opts.GeneratedTLS); err != nil {
				r.TLS = append(r.TLS, fmt.Errorf("%s: %w", side.name, err))
			}
			maskTLS(side.objs, opts.GeneratedTLS)
		}
	}
	renameGenerated(want, got)
	for _, objs := range [][]Object{want, got} {
		for _, o := range objs {
			clearNamespace(o)
			stripHelm(o.Body)
			parseYAMLData(o)
			collapseCEL(o.Body)
			unwrapBase64(o)
		}
	}
	gotByKey := map[Key]Object{}
	for _, o := range got {
		gotByKey[o.Key] = o
	}
	wantKeys := map[Key]bool{}
	for _, w := range want {
		wantKeys[w.Key] = true
		g, ok := gotByKey[w.Key]
		if !ok {
			if !allowed(opts.KustomizeOnly, w.Key) {
				r.Missing = append(r.Missing, w.Key)
			}
			continue
		}
		if d := Diff(w.Body, g.Body); len(d) > 0 {
			r.Fields = append(r.Fields, ObjectDiff{Key: w.Key, Fields: d})
		} else {
			r.Matched++
		}
	}
	for _, g := range got {
		if !wantKeys[g.Key] && !allowed(opts.ChartOnly, g.Key) {
			r.Extra = append(r.Extra, g.Key)
		}
	}
	sortKeys := func(a, b Key) int { return cmp.Compare(a.String(), b.String()) }
	slices.SortFunc(r.Missing, sortKeys)
	slices.SortFunc(r.Extra, sortKeys)
	slices.SortFunc(r.Fields, func(a, b ObjectDiff) int { return sortKeys(a.Key, b.Key) })
	return r
}

// allowed reports whether k is one of the "Kind name" entries.
func allowed(list []string, k Key) bool {
	return slices.Contains(list, k.Kind+" "+k.Name)
}

// Print writes the report, one line per difference.
func (r Report) Print(w io.Writer) {
	for _, k := range r.Missing {
		fmt.Fprintf(w, "%s: in the kustomize base, not in the chart\n", k)
	}
	for _, k := range r.Extra {
		fmt.Fprintf(w, "%s: in the chart, not in the kustomize base\n", k)
	}
	for _, o := range r.Fields {
		for _, f := range o.Fields {
			fmt.Fprintf(w, "%s: %s\n", o.Key, f)
		}
	}
	for _, err := range r.TLS {
		fmt.Fprintf(w, "webhook TLS: %v\n", err)
	}
}
