// Package dashboard reads the Grafana dashboards in deploy/grafana, for the tests that check
// them against the agent's metrics.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Panel is one dashboard panel with its queries.
type Panel struct {
	ID      int
	Type    string
	Title   string
	Targets []struct{ Expr string }
}

// Dashboard is what the tests read of a dashboard.
type Dashboard struct {
	UID     string
	Title   string
	Panels  []Panel
	Queries []string // every "expr", "query" and "definition" string, variables included
}

// Read reads and decodes a dashboard JSON file.
func Read(path string) (Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Dashboard{}, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return Dashboard{}, fmt.Errorf("%s: %w", path, err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return Dashboard{}, fmt.Errorf("%s: %w", path, err)
	}
	d.Queries = queries(doc)
	return d, nil
}

// PanelExprs returns each panel's queries joined by " ; ", in panel order.
func (d Dashboard) PanelExprs() []string {
	out := make([]string, 0, len(d.Panels))
	for _, p := range d.Panels {
		var e []string
		for _, tg := range p.Targets {
			e = append(e, tg.Expr)
		}
		out = append(out, strings.Join(e, " ; "))
	}
	return out
}

// MetricNames returns the podfence metric names in PromQL expressions, sorted, once each.
func MetricNames(exprs []string) []string {
	re := regexp.MustCompile(`\bpodfence_[a-z0-9_]+`)
	var out []string
	for _, e := range exprs {
		out = append(out, re.FindAllString(e, -1)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func queries(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				out = append(out, s)
			}
			out = append(out, queries(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, queries(x)...)
		}
	}
	return out
}
