package pools

import (
	"testing"
)

func TestParseIsolation(t *testing.T) {
	cfg, err := Parse("poolconfig-a.yaml", []byte(`pools:
  default: {cpus: "0"}
  exclusive_rt: {cpus: "2-3", irqLoadBalancing: disable, cpuLoadBalancing: disable, isolatedCPUs: require, isolationPolicy: required}
  exclusive_dp: {cpus: "4-5", irqLoadBalancing: enable}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Isolation{
		"default":      {},
		"exclusive_rt": {IRQLoadBalancing: Disable, CPULoadBalancing: Disable, IsolatedCPUs: RequireIsolated, Policy: Required},
		"exclusive_dp": {IRQLoadBalancing: Enable},
	}
	for _, p := range cfg.Pools {
		if p.Isolation != want[p.Name] {
			t.Errorf("pool %s: isolation %+v, want %+v", p.Name, p.Isolation, want[p.Name])
		}
		if p.Isolation.Any() != (p.Name == "exclusive_rt") {
			t.Errorf("pool %s: Any() = %v", p.Name, p.Isolation.Any())
		}
	}
}

func TestParseIsolationErrors(t *testing.T) {
	const src = "poolconfig-a.yaml: "
	for _, tc := range []struct{ name, yaml, want string }{
		{"irqLoadBalancing value", `pools: {exclusive_a: {cpus: "1", irqLoadBalancing: "off"}}`,
			`pool "exclusive_a": irqLoadBalancing "off": unknown value (allowed: disable, enable; unset means enable ` +
				`(each pod may still ask with annotation podfence.io/irq-load-balancing: disable))`},
		{"cpuLoadBalancing value", `pools: {exclusive_a: {cpus: "1", cpuLoadBalancing: "true"}}`,
			`pool "exclusive_a": cpuLoadBalancing "true": unknown value (allowed: disable, enable; unset means enable ` +
				`(each pod may still ask with annotation podfence.io/cpu-load-balancing: disable))`},
		{"isolatedCPUs value", `pools: {exclusive_a: {cpus: "1", isolatedCPUs: only}}`,
			`pool "exclusive_a": isolatedCPUs "only": unknown value (allowed: prefer, require; unset means CPUs the kernel ` +
				`isolated are taken as any other)`},
		{"isolationPolicy value", `pools: {exclusive_a: {cpus: "1", isolationPolicy: strict}}`,
			`pool "exclusive_a": isolationPolicy "strict": unknown value (allowed: best-effort, required; unset means best-effort)`},
		{"on a shared pool", `pools: {shared_a: {cpus: "1", irqLoadBalancing: disable}}`,
			`pool "shared_a": irqLoadBalancing "disable": only an exclusive pool keeps CPUs alone (a shared pool shares its ` +
				`CPUs; leave irqLoadBalancing unset, or name the pool exclusive...)`},
		{"on the default pool", `pools: {default: {cpus: "1", isolatedCPUs: prefer}}`,
			`pool "default": isolatedCPUs "prefer": only an exclusive pool keeps CPUs alone (a default pool shares its ` +
				`CPUs; leave isolatedCPUs unset, or name the pool exclusive...)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("poolconfig-a.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != src+tc.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, src+tc.want)
			}
		})
	}
}
