package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/observe/status"
	"github.com/podfence/podfence/internal/testwait"
	"github.com/podfence/podfence/podapi"
)

// statusPools split a 1-socket, 8-core SMT2 node (core c has threads 2c and 2c+1).
const statusPools = `
exclusiveCPUs: threads
pools:
  default:      {cpus: "0-1"}
  shared_s:     {cpus: "2-3"}
  exclusive_dp: {cpus: "4-11", hyperThreadingPolicy: multiThreaded}
  exclusive_rt: {cpus: "12-15", hyperThreadingPolicy: singleThreaded}
`

// TestStatusAgainstAgent runs the agent against the real NRI runtime side: /readyz before
// and after the runtime synchronises it, /state, and `podfence status` from the agent and,
// once it stopped, from its checkpoint.
func TestStatusAgainstAgent(t *testing.T) {
	dir := nritest.ShortDir(t) // short: the socket path is limited
	write(t, filepath.Join(dir, "poolconfig-a.yaml"), statusPools)
	logs := &syncBuffer{}
	cfg := nodeagent.Config{
		Connection:     nriplugin.Connection{Socket: filepath.Join(dir, "nri.sock"), PluginName: "podfence", PluginIndex: "10"},
		Pools:          filepath.Join(dir, "poolconfig-a.yaml"),
		NodeName:       "node-a",
		CheckpointDir:  filepath.Join(dir, "checkpoint"),
		Sysfs:          "../../internal/cpu/topology/testdata/sysfs/single-socket-smt-adjacent",
		CgroupRoot:     cgroupstest.Tree(t, "v2"),
		MetricsAddress: "127.0.0.1:0",
	}
	gate := make(chan struct{})
	var syncs atomic.Int32
	rt, err := adaptation.New("test-runtime", "1", func(ctx context.Context, cb adaptation.SyncCB) error {
		if syncs.Add(1) > 1 { // the runtime's start-up passes; the agent's waits for the test
			<-gate
		}
		_, err := cb(ctx, nil, nil)
		return err
	}, func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithSocketPath(cfg.Socket), adaptation.WithPluginPath(filepath.Join(dir, "none")))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil))) }()
	var once sync.Once
	var runErr error
	stop := func() error { once.Do(func() { cancel(); runErr = <-done }); return runErr }
	defer stop()

	addr := waitLog(t, logs, regexp.MustCompile(`msg="serving metrics" address=(\S+)`))
	base := "http://" + addr
	testwait.Eventually(t, "the agent to connect to the runtime", func() bool {
		return strings.Contains(logs.String(),
			`msg="connected to runtime"`)
	})
	if code, body := get(t, base+"/readyz"); code != 503 || body != "not ready: the container runtime has not synchronised the agent yet\n" {
		t.Errorf("/readyz before sync: %d %q", code, body)
	}
	close(gate)
	testwait.Eventually(t, "/readyz 200", func() bool { code, _ := get(t, base+"/readyz"); return code == 200 })
	rt.BlockPluginSync().Unblock()

	create(t, rt, "telco", "router", map[string]string{podapi.AnnotationCPUPools: `{"fwd": {"exclusive_dp": 4}, "stats": {"shared_s": 250}}`,
		"epc-limit.nri.io/container.fwd": "1Mi"}, "fwd", "stats")
	create(t, rt, "telco", "packet-gen", map[string]string{podapi.AnnotationCPUPools: `{"gen": {"exclusive_dp": 3}}`}, "gen")
	create(t, rt, "telco", "rt-loop", map[string]string{podapi.AnnotationCPUPools: `{"loop": {"exclusive_rt": 2}}`}, "loop")
	create(t, rt, "shop", "web", nil, "nginx")

	code, body := get(t, base+"/state")
	var r status.Report
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
		t.Fatalf("/state: %d %v\n%s", code, err, body)
	}
	if !r.Ready || r.Node != "node-a" || r.Source != "agent" || len(r.Pools) != 4 || len(r.Containers) != 5 ||
		r.Kernel.Cgroup.Version != "v2" || !r.Kernel.SGXEPC.Available || r.Extensions["epc"] == nil ||
		r.Extensions["coresched"] == nil {
		t.Errorf("/state: %s", body)
	}

	text := runCmd(t, "status", "--address", addr, "--timeout", noTimeout)
	t.Logf("podfence status:\n%s", text)
	for _, want := range []string{
		"Node node-a: 1 socket, 1 NUMA node, 8 cores, 16 CPUs (SMT2), 1 L3 group\n",
		"From: agent (ready) at ",
		"  misc/sgx_epc     yes  capacity 128Mi\n",
		"exclusive_dp: exclusive, multiThreaded, CPUs 4-11: 7 of 8 given, 2 containers\n" +
			"  socket 0 NUMA 0  core  4   6   8  10\n" +
			"                     t0  4A  6A  8B 10B\n" +
			"                     t1  5A  7A  9B 11.\n" +
			"  A=telco/router/fwd  B=telco/packet-gen/gen\n",
		"exclusive_rt: exclusive, singleThreaded, CPUs 12-15: 2 of 4 given, 2 idled, 1 container\n" +
			"  socket 0 NUMA 0  core 12  14\n" +
			"                     t0 12A 14A\n" +
			"                     t1 13~ 15~\n",
		"  telco/router/stats 250m\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks\n%s", want)
		}
	}
	// The pods' group, with the cookie's state unless ok. A node that cannot make cookies
	// (no SMT or no core scheduling) keeps no group for pods that do not ask for one.
	var cs struct{ Supported bool }
	if err := json.Unmarshal(r.Extensions["coresched"], &cs); err != nil {
		t.Fatal(err)
	}
	group := "-"
	if cs.Supported {
		group = "ns:telco"
		if st := r.Containers[1].CookieState; st != "ok" && st != "" && st != "none" {
			group += " (" + st + ")"
		}
	}
	for _, row := range [][]string{
		{"telco/router", "fwd", "exclusive_dp", "4-7", "-", group, "1Mi", "1Mi"},
		{"telco/rt-loop", "loop", "exclusive_rt", "12,14", "13,15", group, "-", "-"},
		{"telco/router", "stats", "shared_s (250m)", "2-3", "-", group, "-", "-"},
	} {
		if !hasFields(text, strings.Fields(strings.Join(row, " "))...) {
			t.Errorf("status lacks the row %q", row)
		}
	}
	var fromJSON status.Report
	if err := json.Unmarshal([]byte(runCmd(t, "status", "--address", addr, "--timeout", noTimeout, "-o", "json")),
		&fromJSON); err != nil || len(fromJSON.Containers) != 5 {
		t.Errorf("status -o json: %v, %d containers", err, len(fromJSON.Containers))
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	text = runCmd(t, "status", "--address", addr, "--timeout", "1s", "--checkpoint-dir", cfg.CheckpointDir, "--pools", cfg.Pools,
		"--sysfs", cfg.Sysfs, "--cgroup-root", cfg.CgroupRoot, "--node-name", "node-a")
	for _, want := range []string{"From: checkpoint " + cfg.CheckpointDir, "  A=telco/router/fwd  B=telco/packet-gen/gen\n",
		"                     t1 13~ 15~\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("status from the checkpoint lacks %q:\n%s", want, text)
		}
	}
}

// create creates and starts containers ctrs of a new pod through the runtime. Container fwd
// has the cgroup of the captured tree's systemd container: misc.current 1 MiB.
func create(t *testing.T, rt *adaptation.Adaptation, ns, name string, annotations map[string]string, ctrs ...string) {
	t.Helper()
	pod := &api.PodSandbox{Id: name, Uid: "uid-" + name, Name: name, Namespace: ns, Annotations: annotations}
	for _, c := range ctrs {
		path := "/kubepods/pod" + pod.Uid + "/" + c
		if c == "fwd" {
			path = cgroupstest.ContainerSystemd
		}
		ctr := &api.Container{Id: name + "-" + c, PodSandboxId: pod.Id, Name: c,
			Linux: &api.LinuxContainer{CgroupsPath: path, Resources: &api.LinuxResources{}}}
		if _, err := rt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr}); err != nil {
			t.Fatalf("create %s/%s %s: %v", ns, name, c, err)
		}
		if err := rt.StartContainer(context.Background(), &api.StartContainerRequest{Pod: pod, Container: ctr}); err != nil {
			t.Fatalf("start %s/%s %s: %v", ns, name, c, err)
		}
	}
}

// noTimeout is podfence status's --timeout in tests that expect an answer from the agent:
// longer than any test run, so that a loaded machine gets the same answer as an idle one.
const noTimeout = "1h"

func runCmd(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.Execute(); err != nil {
		t.Fatalf("podfence %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitLog(t *testing.T, logs *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	testwait.Eventually(t, "a log line matching "+re.String(), func() bool { m = re.FindStringSubmatch(logs.String()); return m != nil })
	return m[1]
}

func hasFields(text string, fields ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) {
	nritest.QuietLogs() // the NRI runtime side's library logger is global
	os.Exit(m.Run())
}

type syncBuffer = nritest.LogBuffer
