package pools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"go.yaml.in/yaml/v2"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// rawConfig and rawPool mirror the YAML. Scalars decode into strings with their text as
// written (CPU-Pooler uses the same YAML 1.1 decoder); Extra catches unknown fields so that
// errors can name them.
type rawConfig struct {
	Pools            map[string]*rawPool `yaml:"pools"`
	NodeSelector     map[string]string   `yaml:"nodeSelector"`
	ResourceBaseName string              `yaml:"resourceBaseName"` // CPU-Pooler's
	ExclusiveCPUs    string              `yaml:"exclusiveCPUs"`    // podfence's choices
	UnpooledCPUs     string              `yaml:"unpooledCPUs"`
	SelectorMatch    string              `yaml:"nodeSelectorMatch"`
	Extra            map[string]any      `yaml:",inline"`
}

type rawPool struct {
	CPUs     string `yaml:"cpus"`
	HTPolicy string `yaml:"hyperThreadingPolicy"`
	PoolType string `yaml:"pooltype"`   // early CPU-Pooler configs; ignored as CPU-Pooler ignores it
	API      string `yaml:"requestAPI"` // podfence's: devicePlugin (default) or dra
	// podfence's isolation choices (Isolation)
	IRQLoadBalancing string         `yaml:"irqLoadBalancing"`
	CPULoadBalancing string         `yaml:"cpuLoadBalancing"`
	IsolatedCPUs     string         `yaml:"isolatedCPUs"`
	IsolationPolicy  string         `yaml:"isolationPolicy"`
	Extra            map[string]any `yaml:",inline"`
}

// The fields a config and a pool may have, for errors about unknown ones.
const (
	configFields = "pools, nodeSelector, resourceBaseName, exclusiveCPUs, unpooledCPUs, nodeSelectorMatch"
	poolFields   = "cpus, hyperThreadingPolicy, pooltype, requestAPI, irqLoadBalancing, cpuLoadBalancing, isolatedCPUs, isolationPolicy"
)

// Parse reads one pool config document and validates it (see Config.Validate). source names
// the input in errors. Unknown fields, duplicate keys, further YAML documents and input over
// MaxConfigBytes are errors. Every problem found is returned, each a *ConfigError, joined
// with errors.Join.
func Parse(source string, data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, tooBig(source, fmt.Sprintf("config is %d bytes", len(data)))
	}
	var raw rawConfig
	more, err := decodeOne(data, &raw)
	if err != nil {
		return nil, &ConfigError{Source: source, Reason: yamlReason(err), Err: err}
	}
	if more {
		return nil, &ConfigError{Source: source, Reason: "holds more than one YAML document (want one pool config per file)"}
	}
	cfg := &Config{Source: source, NodeSelector: raw.NodeSelector, ResourceBaseName: raw.ResourceBaseName,
		ExclusiveCPUs: orDefault(ExclusiveCPUs(raw.ExclusiveCPUs), Cores), UnpooledCPUs: orDefault(UnpooledCPUs(raw.UnpooledCPUs), Unused),
		SelectorMatch: orDefault(SelectorMatch(raw.SelectorMatch), AnyLabel)}
	var errs []error
	unknown := func(pool string, extra map[string]any, allowed string) {
		for _, field := range sortedKeys(extra) {
			reason := "unknown field (allowed: " + allowed + ")"
			if _, err := topology.ParseCPUList(field); err == nil && pool != "" && extra[field] == nil {
				reason += `; in {...} a CPU list with commas must be quoted, as in {cpus: "0-3,8"}`
			}
			errs = append(errs, &ConfigError{Source: source, Pool: pool, Field: field, Reason: reason})
		}
	}
	unknown("", raw.Extra, configFields)
	for _, name := range sortedKeys(raw.Pools) {
		rp := raw.Pools[name]
		if rp == nil { // "name:" with no value
			rp = &rawPool{}
		}
		unknown(name, rp.Extra, poolFields)
		if rp.PoolType != "" && rp.PoolType != string(TypeOf(name)) {
			cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("pool %q: pooltype %q is ignored, as CPU-Pooler ignores it: "+
				"the name makes the pool %s (names starting %q are exclusive, %q shared, any other default)",
				name, rp.PoolType, TypeOf(name), exclusivePrefix, sharedPrefix))
		}
		cpus, err := topology.ParseCPUList(rp.CPUs)
		if err != nil {
			errs = append(errs, &ConfigError{Source: source, Pool: name, Field: "cpus", Value: rp.CPUs,
				Reason: innerText(err), Err: err})
			continue
		}
		ht := HTPolicy(rp.HTPolicy)
		if ht == "" {
			ht = SingleThreaded // CPU-Pooler's default
		}
		cfg.Pools = append(cfg.Pools, Pool{Name: name, Type: TypeOf(name), CPUs: cpus, HTPolicy: ht,
			API: orDefault(RequestAPI(rp.API), DevicePlugin), Isolation: parseIsolation(rp)})
	}
	if len(errs) == 0 || len(cfg.Pools) > 0 {
		errs = append(errs, cfg.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// orDefault is v, or def when v is empty.
func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// decodeOne decodes the first YAML document of data into v (an empty input is an empty
// document) and reports whether a non-empty document follows.
func decodeOne(data []byte, v any) (more bool, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.SetStrict(true)
	if err := dec.Decode(v); err == io.EOF {
		return false, nil
	} else if err != nil {
		return false, err // the decoder must not be used after an error
	}
	var next any
	if err := dec.Decode(&next); err == io.EOF {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("second document: %w", err)
	}
	return next != nil, nil
}

// yamlReason turns a YAML error into text for operators, naming the schema instead of Go types.
func yamlReason(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return "invalid YAML: " + strings.Replace(err.Error(), "yaml: ", "", 1)
	}
	names := strings.NewReplacer(
		"map[string]*pools.rawPool", "pools (a mapping of pool names to pools)",
		"map[string]string", "nodeSelector (a mapping of node labels to values)",
		"type pools.rawPool", "the pool",
		"type pools.rawConfig", "the config",
		"pools.rawPool", "a pool (a mapping with "+poolFields+")",
		"pools.rawConfig", "a pool config (a mapping with "+configFields+")",
		"!!seq", "a list", "!!map", "a mapping", "!!str", "a string",
		"into string", "into a string",
	)
	return "does not match the pool config format: " + names.Replace(strings.Join(te.Errors, "; "))
}

// innerText drops the outer context of a wrapped error, which the caller already gives.
func innerText(err error) string {
	if inner := errors.Unwrap(err); inner != nil {
		return inner.Error()
	}
	return err.Error()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
