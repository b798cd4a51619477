package pools

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// poolsText writes pools one per line as "name type cpus htPolicy", for comparisons.
func poolsText(pools []Pool) string {
	var b strings.Builder
	for _, p := range pools {
		b.WriteString(p.Name + " " + string(p.Type) + " " + p.CPUs.String() + " " + string(p.HTPolicy) + "\n")
	}
	return b.String()
}

func TestParse(t *testing.T) {
	caas, err := os.ReadFile("testdata/poolconfig-caas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		yaml      string
		wantPools string
		wantSel   string
		// wantConfig is "resourceBaseName exclusiveCPUs unpooledCPUs nodeSelectorMatch warnings";
		// empty means "- cores unused any".
		wantConfig string
	}{{
		name: "CPU-Pooler example",
		yaml: string(caas),
		wantPools: "default default 0-1 singleThreaded\n" +
			"exclusive_caas exclusive 2-5 singleThreaded\n" +
			"shared_caas shared 6-7 singleThreaded\n",
		wantSel: "nodeType=caas",
	}, {
		name: "CPU-Pooler's fields: resourceBaseName, and pooltype (ignored, warned when it disagrees with the name)",
		yaml: "resourceBaseName: \"nokia.k8s.io\"\npools:\n  cpupool1: {cpus: \"4,5\", pooltype: \"exclusive\"}\n" +
			"  sharedpool: {cpus: \"1\", pooltype: \"shared\"}\n",
		wantPools: "cpupool1 default 4-5 singleThreaded\n" + "sharedpool shared 1 singleThreaded\n",
		wantConfig: "nokia.k8s.io cores unused any " + `pool "cpupool1": pooltype "exclusive" is ignored, as CPU-Pooler ignores ` +
			`it: the name makes the pool default (names starting "exclusive" are exclusive, "shared" shared, any other default)`,
	}, {
		name:       "podfence's choices",
		yaml:       "exclusiveCPUs: threads\nunpooledCPUs: default\nnodeSelectorMatch: all\npools: {default: {cpus: 0}}",
		wantPools:  "default default 0 singleThreaded\n",
		wantConfig: "- threads default all ",
	}, {
		name:      "a single CPU as a YAML number",
		yaml:      "pools: {exclusive_a: {cpus: 3}}",
		wantPools: "exclusive_a exclusive 3 singleThreaded\n",
	}, {
		name:      "CPU list with spaces, repeats and unsorted entries",
		yaml:      `pools: {default: {cpus: " 7, 0-2 ,1,5-6 "}}`,
		wantPools: "default default 0-2,5-7 singleThreaded\n",
	}, {
		name: "type from the name prefix, as CPU-Pooler: no underscore needed",
		yaml: "pools: {exclusive: {cpus: 1}, exclusiveRT: {cpus: 2}, shared: {cpus: 3}, reserved: {cpus: 0}}",
		wantPools: "exclusive exclusive 1 singleThreaded\n" + "exclusiveRT exclusive 2 singleThreaded\n" +
			"reserved default 0 singleThreaded\n" + "shared shared 3 singleThreaded\n",
	}, {
		name:      "label values keep their text (yes is not true)",
		yaml:      "pools: {default: {cpus: 0}}\nnodeSelector: {fast: yes, zone: 01}",
		wantPools: "default default 0 singleThreaded\n",
		wantSel:   "fast=yes zone=01",
	}, {
		name:      "a document start marker and a trailing empty document",
		yaml:      "# comment\n---\npools: {default: {cpus: 0}}\n---\n",
		wantPools: "default default 0 singleThreaded\n",
	}, {
		name:      "anchors and aliases",
		yaml:      "pools:\n  exclusive_a: &p {cpus: 2, hyperThreadingPolicy: singleThreaded}\n  default: {cpus: 0}\n",
		wantPools: "default default 0 singleThreaded\n" + "exclusive_a exclusive 2 singleThreaded\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("poolconfig-a.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := poolsText(cfg.Pools); got != tt.wantPools {
				t.Errorf("pools:\n%s\nwant:\n%s", got, tt.wantPools)
			}
			var sel []string
			for _, k := range sortedKeys(cfg.NodeSelector) {
				sel = append(sel, k+"="+cfg.NodeSelector[k])
			}
			if got := strings.Join(sel, " "); got != tt.wantSel {
				t.Errorf("nodeSelector %q, want %q", got, tt.wantSel)
			}
			if cfg.Source != "poolconfig-a.yaml" {
				t.Errorf("source %q", cfg.Source)
			}
			want := tt.wantConfig
			if want == "" {
				want = "- cores unused any "
			}
			domain := cfg.ResourceBaseName
			if domain == "" {
				domain = "-"
			}
			if got := fmt.Sprintf("%s %s %s %s %s", domain, cfg.ExclusiveCPUs, cfg.UnpooledCPUs, cfg.SelectorMatch,
				strings.Join(cfg.Warnings, "\n")); got != want {
				t.Errorf("config:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestParseRequestAPI(t *testing.T) {
	cfg, err := Parse("poolconfig-a.yaml", []byte(`pools: {exclusive_a: {cpus: 2-3, requestAPI: dra}, `+
		`exclusive_b: {cpus: 4, requestAPI: devicePlugin}, shared_a: {cpus: 5}, default: {cpus: 0-1}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"default": false, "exclusive_a": true, "exclusive_b": false, "shared_a": false}
	for _, p := range cfg.Pools {
		if p.ViaDRA() != want[p.Name] || p.API == "" {
			t.Errorf("pool %s: API %q, ViaDRA %v; want ViaDRA %v", p.Name, p.API, p.ViaDRA(), want[p.Name])
		}
	}
}

func TestParseErrors(t *testing.T) {
	const src = "poolconfig-a.yaml: "
	tests := []struct {
		name string
		yaml string
		want string // the whole error text, without the leading src
	}{
		// CPU lists: the ParseCPUList message, after the pool and the value.
		{name: "CPU list with a word", yaml: `pools: {exclusive_a: {cpus: "0-3,x"}}`,
			want: `pool "exclusive_a": cpus "0-3,x": entry "x": "x" is not a CPU number (want N or N-M, N a decimal from 0 to 8191)`},
		{name: "CPU range backwards", yaml: `pools: {exclusive_a: {cpus: "5-2"}}`,
			want: `pool "exclusive_a": cpus "5-2": entry "5-2": range end 2 is below its start 5`},
		{name: "CPU ID too large", yaml: `pools: {exclusive_a: {cpus: "0-99999"}}`,
			want: `pool "exclusive_a": cpus "0-99999": entry "0-99999": CPU 99999 is above the largest CPU ID allowed (8191)`},
		{name: "CPU list in hex", yaml: `pools: {exclusive_a: {cpus: 0x10}}`,
			want: `pool "exclusive_a": cpus "0x10": entry "0x10": "0x10" is not a CPU number (want N or N-M, N a decimal from 0 to 8191)`},
		{name: "empty CPU list", yaml: `pools: {exclusive_a: {cpus: ""}}`,
			want: `pool "exclusive_a": cpus: no CPUs (cpus is empty or missing; want a CPU list such as "2-5,8")`},
		{name: "missing CPU list", yaml: `pools: {exclusive_a: {hyperThreadingPolicy: singleThreaded}}`,
			want: `pool "exclusive_a": cpus: no CPUs (cpus is empty or missing; want a CPU list such as "2-5,8")`},
		{name: "pool with no body", yaml: "pools:\n  exclusive_a:\n",
			want: `pool "exclusive_a": cpus: no CPUs (cpus is empty or missing; want a CPU list such as "2-5,8")`},

		// Relations between pools.
		{name: "overlapping pools", yaml: `pools: {exclusive_a: {cpus: 2-5}, shared_a: {cpus: 4-7}}`,
			want: `pool "shared_a": cpus "4-7": CPUs 4-5 are also in pool "exclusive_a" (a CPU belongs to at most one pool)`},
		{name: "one CPU in two pools", yaml: `pools: {default: {cpus: 0-2}, exclusive_a: {cpus: 2-5}}`,
			want: `pool "exclusive_a": cpus "2-5": CPU 2 is also in pool "default" (a CPU belongs to at most one pool)`},
		{name: "two shared pools", yaml: `pools: {shared_a: {cpus: 1}, shared_b: {cpus: 2}}`,
			want: `pool "shared_b": more than one shared pool (also "shared_a"): a node has at most one; pool names that start with ` +
				`"shared" make shared pools`},
		{name: "two default-type pools", yaml: `pools: {default: {cpus: 0}, reserved: {cpus: 1}}`,
			want: `pool "reserved": more than one default-type pool (also "default"): a node has at most one; pool names that start ` +
				`with neither "exclusive" nor "shared" make default-type pools`},

		// Fields and names.
		{name: "unknown hyperThreadingPolicy", yaml: `pools: {exclusive_a: {cpus: 1, hyperThreadingPolicy: single}}`,
			want: `pool "exclusive_a": hyperThreadingPolicy "single": unknown policy (allowed: singleThreaded, multiThreaded; unset ` +
				`means singleThreaded)`},
		{name: "unknown requestAPI", yaml: `pools: {exclusive_a: {cpus: 1, requestAPI: DRA}}`,
			want: `pool "exclusive_a": requestAPI "DRA": unknown value (allowed: devicePlugin, dra; unset means devicePlugin)`},
		{name: "default pool through DRA", yaml: `pools: {default: {cpus: 0, requestAPI: dra}}`,
			want: `pool "default": requestAPI "dra": a default-type pool is not requested (allowed: devicePlugin, or leave it ` +
				`unset; only exclusive and shared pools are requested through DRA)`},
		{name: "policy is case-sensitive", yaml: `pools: {exclusive_a: {cpus: 1, hyperThreadingPolicy: SingleThreaded}}`,
			want: `pool "exclusive_a": hyperThreadingPolicy "SingleThreaded": unknown policy (allowed: singleThreaded, multiThreaded; ` +
				`unset means singleThreaded)`},
		{name: "pool name with a space", yaml: `pools: {"exclusive a": {cpus: 1}}`,
			want: `pool name "exclusive a": has the character ' ' (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 ` +
				`characters, so that podfence.io/<pool> is a valid extended resource name)`},
		{name: "pool name with a slash", yaml: `pools: {"nokia.k8s.io/exclusive_a": {cpus: 1}}`,
			want: `pool name "nokia.k8s.io/exclusive_a": has the character '/' (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at ` +
				`most 63 characters, so that podfence.io/<pool> is a valid extended resource name)`},
		{name: "pool name ending in a dash", yaml: `pools: {exclusive-: {cpus: 1}}`,
			want: `pool name "exclusive-": must start and end with a letter or digit (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, ` +
				`at most 63 characters, so that podfence.io/<pool> is a valid extended resource name)`},
		{name: "empty pool name", yaml: `pools: {"": {cpus: 1}}`,
			want: `pool name: is empty (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters, so that ` +
				`podfence.io/<pool> is a valid extended resource name)`},
		{name: "null pool name", yaml: `pools: {~: {cpus: 1}}`,
			want: `pool name: is empty (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters, so that ` +
				`podfence.io/<pool> is a valid extended resource name)`},
		{name: "pool name too long", yaml: "pools: {exclusive_" + strings.Repeat("x", 54) + ": {cpus: 1}}",
			want: `pool name "exclusive_` + strings.Repeat("x",
				54) + `": is 64 characters long (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters, so that ` +
				`podfence.io/<pool> is a valid extended resource name)`},
		{name: "no pools: empty file", yaml: "",
			want: `pools: no pools defined (want at least one, such as pools: {default: {cpus: "0-1"}})`},
		{name: "no pools: empty mapping", yaml: "pools: {}\nnodeSelector: {nodeType: caas}",
			want: `pools: no pools defined (want at least one, such as pools: {default: {cpus: "0-1"}})`},
		{name: "unknown field in a pool", yaml: `pools: {exclusive_a: {cpu: 1}}`,
			want: `pool "exclusive_a": cpu: unknown field (allowed: cpus, hyperThreadingPolicy, pooltype, requestAPI, irqLoadBalancing, cpuLoadBalancing, isolatedCPUs, isolationPolicy)` + "\n" +
				src + `pool "exclusive_a": cpus: no CPUs (cpus is empty or missing; want a CPU list such as "2-5,8")`},
		{name: "unquoted CPU list with commas in a flow mapping", yaml: `pools: {shared_a: {cpus: 0-3,8}}`,
			want: `pool "shared_a": 8: unknown field (allowed: cpus, hyperThreadingPolicy, pooltype, requestAPI, irqLoadBalancing, cpuLoadBalancing, isolatedCPUs, isolationPolicy); in {...} a CPU list with commas must be ` +
				`quoted, as in {cpus: "0-3,8"}`},
		{name: "unknown top-level field", yaml: "pools: {default: {cpus: 0}}\nnodeselector: {a: b}",
			want: `nodeselector: unknown field (allowed: pools, nodeSelector, resourceBaseName, exclusiveCPUs, unpooledCPUs, ` +
				`nodeSelectorMatch)`},
		{name: "unknown exclusiveCPUs", yaml: "exclusiveCPUs: physical\npools: {default: {cpus: 0}}",
			want: `exclusiveCPUs "physical": unknown value (allowed: cores, threads; unset means cores)`},
		{name: "unknown unpooledCPUs", yaml: "unpooledCPUs: shared\npools: {default: {cpus: 0}}",
			want: `unpooledCPUs "shared": unknown value (allowed: unused, default; unset means unused)`},
		{name: "unknown nodeSelectorMatch", yaml: "nodeSelectorMatch: every\npools: {}",
			want: `nodeSelectorMatch "every": unknown value (allowed: any, all; unset means any)` + "\n" +
				src + `pools: no pools defined (want at least one, such as pools: {default: {cpus: "0-1"}})`},
		{name: "resourceBaseName not a domain", yaml: "resourceBaseName: Nokia/k8s\npools: {default: {cpus: 0}}",
			want: `resourceBaseName "Nokia/k8s": not a domain name: a lowercase RFC 1123 subdomain must consist of lower case ` +
				`alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex ` +
				`used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (want the domain of the ` +
				`pools' extended resources, such as nokia.k8s.io)`},

		// YAML.
		{name: "YAML syntax", yaml: "pools: {default: {cpus: 0}",
			want: `invalid YAML: line 1: did not find expected ',' or '}'`},
		{name: "duplicate pool", yaml: "pools:\n  default: {cpus: 0}\n  default: {cpus: 1}\n",
			want: `does not match the pool config format: line 3: key "default" already set in map`},
		{name: "duplicate field", yaml: "pools:\n  default: {cpus: 0, cpus: 1}\n",
			want: `does not match the pool config format: line 2: field cpus already set in the pool`},
		{name: "pools is a list", yaml: "pools: [default]",
			want: `does not match the pool config format: line 1: cannot unmarshal a list into pools (a mapping of pool names to pools)`},
		{name: "pool is a string", yaml: "pools: {default: 0-1}",
			want: "does not match the pool config format: line 1: cannot unmarshal a string `0-1` into a pool (a mapping with cpus, " +
				"hyperThreadingPolicy, pooltype, requestAPI, irqLoadBalancing, cpuLoadBalancing, isolatedCPUs, isolationPolicy)"},
		{name: "cpus is a list", yaml: "pools: {default: {cpus: [0, 1]}}",
			want: `does not match the pool config format: line 1: cannot unmarshal a list into a string`},
		{name: "nodeSelector is a list", yaml: "pools: {default: {cpus: 0}}\nnodeSelector: [a]",
			want: `does not match the pool config format: line 2: cannot unmarshal a list into nodeSelector (a mapping of node labels to values)`},
		{name: "the document is a list", yaml: "- pools: {}",
			want: `does not match the pool config format: line 1: cannot unmarshal a list into a pool config (a mapping with pools, ` +
				`nodeSelector, resourceBaseName, exclusiveCPUs, unpooledCPUs, nodeSelectorMatch)`},
		{name: "two documents", yaml: "pools: {default: {cpus: 0}}\n---\npools: {default: {cpus: 1}}\n",
			want: `holds more than one YAML document (want one pool config per file)`},
		{name: "bad second document", yaml: "pools: {default: {cpus: 0}}\n---\npools: {\n",
			want: `invalid YAML: second document: line 3: did not find expected node content`},

		// Everything at once: every problem, in pool order.
		{name: "several problems", yaml: `pools: {default: {cpus: ""}, exclusive_a: {cpus: "1-x"}, shared_a: {cpus: 1, hyperThreadingPolicy: x}}`,
			want: `pool "exclusive_a": cpus "1-x": entry "1-x": "x" is not a CPU number (want N or N-M, N a decimal from 0 to 8191)` + "\n" +
				src + `pool "default": cpus: no CPUs (cpus is empty or missing; want a CPU list such as "2-5,8")` + "\n" +
				src + `pool "shared_a": hyperThreadingPolicy "x": unknown policy (allowed: singleThreaded, multiThreaded; unset means singleThreaded)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("poolconfig-a.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with pools:\n%s", poolsText(cfg.Pools))
			}
			if got, want := err.Error(), src+tt.want; got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *ConfigError", err)
			}
		})
	}
}

func TestConfigErrorFields(t *testing.T) {
	_, err := Parse("poolconfig-a.yaml", []byte(`pools: {exclusive_a: {cpus: "0-3,x"}}`))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *ConfigError", err)
	}
	want := ConfigError{Source: "poolconfig-a.yaml", Pool: "exclusive_a", Field: "cpus", Value: "0-3,x",
		Reason: `entry "x": "x" is not a CPU number (want N or N-M, N a decimal from 0 to 8191)`}
	if got := *ce; got.Source != want.Source || got.Pool != want.Pool || got.Field != want.Field ||
		got.Value != want.Value || got.Reason != want.Reason {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if ce.Err == nil || !strings.Contains(ce.Err.Error(), `cpu list "0-3,x"`) {
		t.Errorf("Err %v: want the ParseCPUList error, wrapped", ce.Err)
	}
	if !errors.Is(err, ce.Err) {
		t.Error("errors.Is does not reach the ParseCPUList error")
	}
}
