package pools

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const smallConfig = "pools: {default: {cpus: \"0\"}}\n"

// sized is smallConfig padded with a YAML comment to exactly n bytes.
func sized(n int) string {
	pad := n - len(smallConfig) - 2
	return smallConfig + "#" + strings.Repeat("x", pad) + "\n"
}

func writeConfig(t testing.TB, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadRefusesOversizedConfig: a 10 MiB config, alone or in a directory, is refused with
// its path, size and the limit, without being read (the refusal allocates under 1 MiB; it
// cost 630 MB when the file was parsed).
func TestLoadRefusesOversizedConfig(t *testing.T) {
	dir := t.TempDir()
	big := sized(10 << 20)
	file := writeConfig(t, filepath.Join(dir, "poolconfig-big.yaml"), big)
	want := file + ": file is 10485760 bytes, over the limit of 1048576 bytes (1 MiB, the most a ConfigMap holds)"
	for _, path := range []string{file, dir} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		configs, err := Load(path)
		runtime.ReadMemStats(&after)
		if err == nil || err.Error() != want {
			t.Errorf("Load(%s) = %d configs, error %v\nwant error %s", path, len(configs), err, want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("Load(%s) allocated %d bytes to refuse a %d-byte config, want under 1 MiB", path, alloc, len(big))
		}
	}
}

// TestLoadSizeLimit: exactly MaxConfigBytes is accepted, one byte more is refused; in a
// directory the limit holds for the pool config files together.
func TestLoadSizeLimit(t *testing.T) {
	dir := t.TempDir()
	file := writeConfig(t, filepath.Join(dir, "poolconfig-a.yaml"), sized(MaxConfigBytes))
	for _, path := range []string{file, dir} {
		if _, err := Load(path); err != nil {
			t.Errorf("Load(%s) of exactly %d bytes: %v", path, MaxConfigBytes, err)
		}
	}
	writeConfig(t, file, sized(MaxConfigBytes+1))
	want := file + ": file is 1048577 bytes, over the limit of 1048576 bytes (1 MiB, the most a ConfigMap holds)"
	for _, path := range []string{file, dir} {
		if _, err := Load(path); err == nil || err.Error() != want {
			t.Errorf("Load(%s) of %d bytes: error %v\nwant %s", path, MaxConfigBytes+1, err, want)
		}
	}
	want = "p.yaml: config is 1048577 bytes, over the limit of 1048576 bytes (1 MiB, the most a ConfigMap holds)"
	if _, err := Parse("p.yaml", []byte(sized(MaxConfigBytes+1))); err == nil || err.Error() != want {
		t.Errorf("Parse of %d bytes: error %v\nwant %s", MaxConfigBytes+1, err, want)
	}
	half := MaxConfigBytes / 2
	writeConfig(t, file, sized(half))
	writeConfig(t, filepath.Join(dir, "poolconfig-b.yml"), sized(half+1))
	writeConfig(t, filepath.Join(dir, "other.yaml"), sized(half)) // not a pool config: not counted
	want = dir + ": pool config files total 1048577 bytes (poolconfig-a.yaml: 524288, poolconfig-b.yml: 524289), " +
		"over the limit of 1048576 bytes (1 MiB, the most a ConfigMap holds)"
	if _, err := Load(dir); err == nil || err.Error() != want {
		t.Errorf("Load(%s): error %v\nwant %s", dir, err, want)
	}
}

// TestLoaderParsesOnlyChanges: a Loader returns the same *Config for a file whose bytes did
// not change (no new parse) and parses it again once they do.
func TestLoaderParsesOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	a := writeConfig(t, filepath.Join(dir, "poolconfig-a.yaml"), smallConfig+"nodeSelector: {n: a}\n")
	b := writeConfig(t, filepath.Join(dir, "poolconfig-b.yaml"), smallConfig+"nodeSelector: {n: b}\n")
	var l Loader
	load := func() []*Config {
		t.Helper()
		configs, err := l.Load(dir)
		if err != nil || len(configs) != 2 {
			t.Fatalf("Load = %d configs, %v", len(configs), err)
		}
		return configs
	}
	first := load()
	again := load()
	if again[0] != first[0] || again[1] != first[1] {
		t.Errorf("unchanged files were parsed again")
	}
	writeConfig(t, b, smallConfig+"nodeSelector: {n: c}\n")
	changed := load()
	if changed[0] != first[0] || changed[1] == first[1] || changed[1].NodeSelector["n"] != "c" {
		t.Errorf("after a change to %s: configs %+v, %+v", b, changed[0], changed[1])
	}
	writeConfig(t, a, "pools: {}\n")
	if _, err := l.Load(dir); err == nil || !strings.Contains(err.Error(), a+": pools: no pools defined") {
		t.Errorf("Load after breaking %s: %v", a, err)
	}
}

// BenchmarkLoadOversized: refusing a 10 MiB pool config (it took 4.5 s and 617 MB to parse
// one of 350,000 pools before the limit).
func BenchmarkLoadOversized(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("pools:\n")
	for i := 0; sb.Len() < 10<<20; i++ {
		sb.WriteString("  exclusive_" + strconv.Itoa(i) + ": {cpus: \"" + strconv.Itoa(i%8192) + "\"}\n")
	}
	file := writeConfig(b, filepath.Join(b.TempDir(), "poolconfig-a.yaml"), sb.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(file); err == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkLoaderUnchanged: a reload tick of a 1 MiB config that did not change, against
// a plain Load that parses it.
func BenchmarkLoaderUnchanged(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("pools:\n")
	for i := 0; sb.Len() < MaxConfigBytes-100; i++ {
		sb.WriteString("  exclusive_" + strconv.Itoa(i) + ": {cpus: \"" + strconv.Itoa(i%8192) + "\"}\n")
	}
	file := writeConfig(b, filepath.Join(b.TempDir(), "poolconfig-a.yaml"), sb.String())
	for _, l := range []*Loader{nil, new(Loader)} {
		b.Run(map[bool]string{true: "Load", false: "Loader"}[l == nil], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = l.Load(file)
			}
		})
	}
}
