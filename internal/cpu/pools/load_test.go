package pools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configMapDir lays out dir as the kubelet mounts a ConfigMap volume: the entries live in a
// timestamped directory, ..data links to it, and each key is a symlink through ..data.
func configMapDir(t *testing.T, dir string, entries map[string]string) {
	t.Helper()
	const stamp = "..2026_01_02_03_04_05.000000001"
	if err := os.Mkdir(filepath.Join(dir, stamp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stamp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name, text := range entries {
		if err := os.WriteFile(filepath.Join(dir, stamp, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func sources(configs []*Config) string {
	var s []string
	for _, c := range configs {
		s = append(s, c.Source)
	}
	return strings.Join(s, " ")
}

func TestLoad(t *testing.T) {
	cmDir := t.TempDir()
	configMapDir(t, cmDir, map[string]string{
		"poolconfig-b.yml":  "pools: {default: {cpus: 0}}\nnodeSelector: {nodeType: b}\n",
		"poolconfig-a.yaml": "pools: {default: {cpus: 1}}\nnodeSelector: {nodeType: a}\n",
		"other.json":        "{}",
	})
	anyName := filepath.Join(t.TempDir(), "pools.conf")
	if err := os.WriteFile(anyName, []byte("pools: {default: {cpus: 0}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string // sources, in order
	}{
		{name: "directory of files", path: "testdata", want: "testdata/poolconfig-caas.yaml testdata/poolconfig-dpdk.yml"},
		{name: "one file", path: "testdata/poolconfig-dpdk.yml", want: "testdata/poolconfig-dpdk.yml"},
		{name: "one file with any name", path: anyName, want: anyName},
		{name: "ConfigMap volume", path: cmDir, want: cmDir + "/poolconfig-a.yaml " + cmDir + "/poolconfig-b.yml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			configs, err := Load(tt.path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := sources(configs); got != tt.want {
				t.Errorf("sources %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path to load
		want  string                                // DIR stands for the temp dir
	}{{
		name:  "missing path",
		setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") },
		want:  "load pool configs: stat DIR/nope: no such file or directory",
	}, {
		name:  "empty directory",
		setup: func(t *testing.T, dir string) string { return dir },
		want:  "no pool config in DIR: want files named poolconfig-*.yaml or poolconfig-*.yml, but it is empty",
	}, {
		name: "only other names",
		setup: func(t *testing.T, dir string) string {
			configMapDir(t, dir, map[string]string{"poolconfig-a.json": "{}", "pools.yaml": "{}"})
			return dir
		},
		want: "no pool config in DIR: want files named poolconfig-*.yaml or poolconfig-*.yml, but it holds poolconfig-a.json, pools.yaml",
	}, {
		name: "broken symlink",
		setup: func(t *testing.T, dir string) string {
			if err := os.Symlink("..data/poolconfig-a.yaml", filepath.Join(dir, "poolconfig-a.yaml")); err != nil {
				t.Fatal(err)
			}
			return dir
		},
		want: "load pool config: open DIR/poolconfig-a.yaml: no such file or directory",
	}, {
		name: "directory with a config name",
		setup: func(t *testing.T, dir string) string {
			if err := os.Mkdir(filepath.Join(dir, "poolconfig-a.yaml"), 0o755); err != nil {
				t.Fatal(err)
			}
			return dir
		},
		want: "load pool config: open DIR/poolconfig-a.yaml: not a regular file (a directory): refused",
	}, {
		name: "every bad file is reported",
		setup: func(t *testing.T, dir string) string {
			configMapDir(t, dir, map[string]string{
				"poolconfig-a.yaml": "pools: {exclusive_a: {cpus: 2-5}, shared_a: {cpus: 4-7}}",
				"poolconfig-b.yaml": "pools: {default: {cpus: 0}}",
				"poolconfig-c.yaml": "pools: {default: {cpus: 0, hyperThreadingPolicy: no}}",
			})
			return dir
		},
		want: `DIR/poolconfig-a.yaml: pool "shared_a": cpus "4-7": CPUs 4-5 are also in pool "exclusive_a" (a CPU belongs to at ` +
			`most one pool)` + "\n" +
			`DIR/poolconfig-c.yaml: pool "default": hyperThreadingPolicy "no": unknown policy (allowed: singleThreaded, ` +
			`multiThreaded; unset means singleThreaded)`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			configs, err := Load(tt.setup(t, dir))
			if err == nil {
				t.Fatalf("Load succeeded: %s", sources(configs))
			}
			if got, want := err.Error(), strings.ReplaceAll(tt.want, "DIR", dir); got != want {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
