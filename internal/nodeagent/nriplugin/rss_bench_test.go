package nriplugin_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildBinary builds the main package pkg (relative to the module root) into dir as the
// image does (hack/image.sh): static, tag grpcnotrace, trimmed, without symbols.
func buildBinary(b *testing.B, dir, pkg string) string {
	b.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-trimpath", "-ldflags", "-s -w", "-o", out,
		"github.com/podfence/podfence/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// procStatus returns the fields of /proc/<pid>/status named in keys, in kB.
func procStatus(b *testing.B, pid int, keys ...string) []float64 {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	out := make([]float64, len(keys))
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		for i, k := range keys {
			if len(f) == 3 && f[0] == k+":" {
				out[i], _ = strconv.ParseFloat(f[1], 64)
			}
		}
	}
	return out
}

// cpuTicks is a process's user+system CPU time in clock ticks.
func cpuTicks(b *testing.B, pid int) int {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	u, _ := strconv.Atoi(f[12])
	s, _ := strconv.Atoi(f[13])
	return u + s
}

// settle waits until pid has used no CPU for half a second (its checkpoint writes and
// collections after the last event are done), at most 30 s.
func settle(b *testing.B, pid int) {
	last, quiet := cpuTicks(b, pid), 0
	for end := time.Now().Add(30 * time.Second); quiet < 5 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		if now := cpuTicks(b, pid); now != last {
			last, quiet = now, 0
			continue
		}
		quiet++
	}
}

// rssRow is a process's resident memory in MiB: all of it, and its anonymous and
// file-backed (the binary's mapped pages) parts.
type rssRow struct{ all, anon, file float64 }

// binaryRSS starts bin with args, connected to rt, and returns its resident memory with no
// container and then at each of ks default-pool containers, each once it has settled.
func binaryRSS(b *testing.B, rt *runtime, bin string, args []string, ks ...int) []rssRow {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	rt.waitPlugins(1)
	pid := cmd.Process.Pid
	measure := func() rssRow {
		settle(b, pid)
		kB := procStatus(b, pid, "VmRSS", "RssAnon", "RssFile")
		return rssRow{kB[0] / 1024, kB[1] / 1024, kB[2] / 1024}
	}
	rows := []rssRow{measure()}
	have := 0
	for _, k := range ks {
		grow(b, rt, have, k, false)
		have = k
		rows = append(rows, measure())
	}
	return rows
}

// BenchmarkAgentRSS reports the resident memory of the podfence binary running `podfence
// agent` (built as the image builds it; device plugin, pod-resources, events, node info and
// core scheduling off, metrics on loopback) with 0, 1,000 and 5,000 default-pool
// containers, next to the smallest NRI plugin binary (nritest/nopplugin) in the same state,
// against the targets of 25 MB at 1,000 and 40 MB at 5,000 (MB = 10^6 bytes).
func BenchmarkAgentRSS(b *testing.B) {
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("no go command to build the binaries with: ", err)
	}
	bins := b.TempDir()
	agent := buildBinary(b, bins, "cmd/podfence")
	nop := buildBinary(b, bins, "internal/nodeagent/nriplugin/nritest/nopplugin")
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		b.Fatal(err)
	}
	poolsFile := filepath.Join(b.TempDir(), "poolconfig-bench.yaml")
	config := "pools:\n  default: {cpus: \"" + strings.TrimSpace(string(online)) + "\"}\n"
	if err := os.WriteFile(poolsFile, []byte(config), 0o644); err != nil {
		b.Fatal(err)
	}
	pf, base := newRuntime(b), newRuntime(b)
	ks := []int{1000, 5000}
	pfRSS := binaryRSS(b, pf, agent, []string{"agent", "--nri-socket", pf.sock, "--checkpoint-dir", b.TempDir(),
		"--pools", poolsFile, "--node-name", "bench", "--node-label", "bench=1", "--log-level", "warn",
		"--device-plugin-dir", "", "--pod-resources-socket", "", "--events=false", "--publish-node-info=false",
		"--coresched=false", "--metrics-address", "127.0.0.1:0", "--metrics-auth", "none",
		"--health-address", "127.0.0.1:0"}, ks...)
	nopRSS := binaryRSS(b, base, nop, []string{base.sock}, ks...)
	for b.Loop() {
	}
	targetMiB := map[int]float64{1000: 25e6 / (1 << 20), 5000: 40e6 / (1 << 20)}
	var w strings.Builder
	fmt.Fprintf(&w, "%-6s %-22s %-22s %6s  %s\n", "K", "podfence MiB (anon+file)", "nop MiB (anon+file)", "ratio", "target")
	for i, k := range append([]int{0}, ks...) {
		p, n := pfRSS[i], nopRSS[i]
		target := "-"
		if t, ok := targetMiB[k]; ok {
			target = fmt.Sprintf("< %.1f MiB: %s", t, met(p.all < t))
		}
		fmt.Fprintf(&w, "%-6d %5.1f (%4.1f + %4.1f)     %5.1f (%4.1f + %4.1f)     %6.2f  %s\n",
			k, p.all, p.anon, p.file, n.all, n.anon, n.file, p.all/n.all, target)
		b.ReportMetric(p.all, fmt.Sprintf("rss%d-MiB", k))
		b.ReportMetric(n.all, fmt.Sprintf("nop-rss%d-MiB", k))
	}
	b.Log("\n" + w.String())
}
