package admission

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/pools"
)

// Pool configs for the DRA tests: exclusive_d and shared_s are requested through DRA where
// they are declared; exclusive_m is a DRA pool on one kind of node and a device-plugin pool
// on another.
const (
	draNodes = `
pools:
  default:     {cpus: "0"}
  shared_s:    {cpus: "1", requestAPI: dra}
  exclusive_d: {cpus: "2-3", requestAPI: dra}
  exclusive_m: {cpus: "4-5", requestAPI: dra}
nodeSelector: {nodeType: dra}
`
	dpNodes = `
pools:
  default:     {cpus: "0"}
  exclusive_m: {cpus: "4-5"}
nodeSelector: {nodeType: dp}
`
)

func draConfig(t *testing.T) *Config {
	t.Helper()
	var cfg Config
	for i, y := range []string{draNodes, dpNodes} {
		pc, err := pools.Parse("poolconfig-"+string(rune('a'+i))+".yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Pools = append(cfg.Pools, pc)
	}
	return &cfg
}

// TestDRAPoolAsResource: a pod asking a DRA pool as an extended resource is refused by
// /mutate and /validate alike, naming the pool and the DeviceClass to claim instead; a pool
// some node offers through the device plugin is asked as before; without pool configs the
// webhook does not know, and says nothing.
func TestDRAPoolAsResource(t *testing.T) {
	const rule = `is requested through DRA (requestAPI: dra in its pool config), not as an extended resource: no device plugin ` +
		`advertises it; ask for it with a ResourceClaim of DeviceClass `
	for _, tc := range []struct {
		name string
		cfg  *Config
		res  []string
		want string // "" admitted
	}{
		{name: "exclusive DRA pool", cfg: draConfig(t), res: []string{"podfence.io/exclusive_d=2"},
			want: `container "app": resource podfence.io/exclusive_d=2: pool "exclusive_d" ` + rule + "exclusive-cpus.podfence.io"},
		{name: "shared DRA pool, CPU-Pooler domain", cfg: draConfig(t), res: []string{"nokia.k8s.io/shared_s=500"},
			want: `container "app": resource nokia.k8s.io/shared_s=500: pool "shared_s" ` + rule + "shared-cpus.podfence.io"},
		{name: "a device-plugin pool on other nodes", cfg: draConfig(t), res: []string{"podfence.io/exclusive_m=1"}},
		{name: "no pool configs", cfg: &Config{}, res: []string{"podfence.io/exclusive_d=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("s", ctr("app", tc.res...))
			_, _, merr := Mutate(pod, tc.cfg)
			if tc.want == "" {
				if merr != nil {
					t.Errorf("Mutate: %v; want admitted", merr)
				}
				return
			}
			if merr == nil || merr.Error() != tc.want {
				t.Errorf("Mutate: %v\nwant %s", merr, tc.want)
			}
			if verr := Validate(pod, tc.cfg); verr == nil || !strings.Contains(verr.Error(), tc.want) {
				t.Errorf("Validate: %v\nwant %s", verr, tc.want)
			}
		})
	}
}
