package pools

import (
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

func TestTypeOf(t *testing.T) {
	tests := []struct {
		name string
		want allocation.PoolType
	}{
		{"exclusive_caas", allocation.TypeExclusive},
		{"exclusive", allocation.TypeExclusive},
		{"exclusivepool", allocation.TypeExclusive}, // CPU-Pooler matches the bare prefix
		{"shared_caas", allocation.TypeShared},
		{"shared", allocation.TypeShared},
		{"default", allocation.TypeDefault},
		{"reserved", allocation.TypeDefault},
		{"Exclusive_caas", allocation.TypeDefault}, // prefixes are case-sensitive
		{"my_exclusive", allocation.TypeDefault},
		{"", allocation.TypeDefault},
	}
	for _, tt := range tests {
		if got := TypeOf(tt.name); got != tt.want {
			t.Errorf("TypeOf(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNodeLookups(t *testing.T) {
	cfg := mustParse(t, "poolconfig-a.yaml", "exclusiveCPUs: threads\npools: {exclusive_a: {cpus: 2-5}, shared_a: {cpus: 6-7}}")
	node, err := Resolve(cfg, newTopo(t, 4, 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		lookup func() (Pool, bool)
		want   string // pool name, "" when not found
	}{
		{name: "Pool", lookup: func() (Pool, bool) { return node.Pool("shared_a") }, want: "shared_a"},
		{name: "Pool of the made default", lookup: func() (Pool, bool) { return node.Pool("default") }, want: "default"},
		{name: "Pool not there", lookup: func() (Pool, bool) { return node.Pool("exclusive_b") }},
		{name: "Shared", lookup: node.Shared, want: "shared_a"},
		{name: "PoolOf exclusive CPU", lookup: func() (Pool, bool) { return node.PoolOf(5) }, want: "exclusive_a"},
		{name: "PoolOf unpooled CPU", lookup: func() (Pool, bool) { return node.PoolOf(1) }, want: "default"},
		{name: "PoolOf absent CPU", lookup: func() (Pool, bool) { return node.PoolOf(8) }},
		{name: "Shared on a node without one", lookup: (&Node{Pools: node.Pools[:2]}).Shared},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := tt.lookup()
			if p.Name != tt.want || ok != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", p.Name, ok, tt.want)
			}
		})
	}
}

func TestResourceNames(t *testing.T) {
	tests := []struct {
		name, pool string
		ok         bool
	}{
		{name: "podfence.io/exclusive_caas", pool: "exclusive_caas", ok: true},
		{name: "nokia.k8s.io/exclusive_caas", pool: "exclusive_caas", ok: true}, // CPU-Pooler's own example
		{name: "nokia.k8s.io/shared_caas", pool: "shared_caas", ok: true},
		{name: "nokia.k8s.io/default", pool: "default", ok: true},
		{name: "example.com/exclusive_caas"},
		{name: "exclusive_caas"},
		{name: "podfence.io/"},
		{name: "podfence.io/a/b"},
		{name: "podfence.io/bad name"},
		{name: "podfence.io/-a"},
		{name: "cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, ok := ParseResourceName(tt.name)
			if pool != tt.pool || ok != tt.ok {
				t.Errorf("ParseResourceName(%q) = %q, %v; want %q, %v", tt.name, pool, ok, tt.pool, tt.ok)
			}
			if ok {
				if back, _ := ParseResourceName(ResourceName(pool)); back != pool {
					t.Errorf("ResourceName(%q) = %q does not parse back", pool, ResourceName(pool))
				}
			}
		})
	}
	if got := ResourceName("exclusive_caas"); got != "podfence.io/exclusive_caas" {
		t.Errorf("ResourceName = %q", got)
	}
	if d := Domains(); len(d) != 2 || d[0] != DefaultDomain || d[1] != "nokia.k8s.io" {
		t.Errorf("Domains() = %q", d)
	}
}
