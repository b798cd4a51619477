package enforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/epc/enforce"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// sgxEPCPlugin does at CreateContainer what nri-plugins' sgx-epc plugin does
// (cmd/plugins/sgx-epc/sgx-epc.go, docs/memory/sgx-epc.md): it reads
// epc-limit.nri.io/container.<name>, epc-limit.nri.io/pod, then epc-limit.nri.io (the first
// present wins) as a decimal uint64, fails the container on a value that is not one, and
// for a value above 0 adds the unified resource misc.max "sgx_epc <value>".
type sgxEPCPlugin struct{}

func (sgxEPCPlugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment,
	[]*api.ContainerUpdate, error) {
	v, err := sgxEPCLimit(pod.GetAnnotations(), ctr.GetName())
	if err != nil {
		return nil, nil, err
	}
	adj := &api.ContainerAdjustment{}
	if v > 0 {
		adj.AddLinuxUnified("misc.max", "sgx_epc "+strconv.FormatUint(v, 10))
	}
	return adj, nil, nil
}

func sgxEPCLimit(annotations map[string]string, ctr string) (uint64, error) {
	for _, k := range []string{"epc-limit.nri.io/container." + ctr, "epc-limit.nri.io/pod", "epc-limit.nri.io"} {
		if s, ok := annotations[k]; ok {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("failed to parse annotation %s: %w", s, err)
			}
			return v, nil
		}
	}
	return 0, nil
}

// sgxEPCFixture reads testdata/nri-plugins-sgx-epc/annotations.json (package epc).
func sgxEPCFixture(t *testing.T) (docs map[string]string, cases []sgxEPCCase) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "nri-plugins-sgx-epc", "annotations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		DocsExample map[string]string
		Cases       []sgxEPCCase
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for i, c := range f.Cases {
		if string(c.Raw) == `"docsExample"` {
			f.Cases[i].Annotations = f.DocsExample
		} else if err := json.Unmarshal(c.Raw, &f.Cases[i].Annotations); err != nil {
			t.Fatal(err)
		}
	}
	return f.DocsExample, f.Cases
}

type sgxEPCCase struct {
	Name        string
	Raw         json.RawMessage `json:"annotations"`
	Annotations map[string]string
	Container   string
	MiscMax     string
	Error       string
}

// TestSGXEPCStandIn: the stand-in plugin answers every case of the fixture as the sgx-epc
// plugin does (its misc.max, or its error), so the tests below run beside that behaviour.
func TestSGXEPCStandIn(t *testing.T) {
	_, cases := sgxEPCFixture(t)
	for _, tc := range cases {
		p := pod("p1", tc.Annotations)
		adj, _, err := sgxEPCPlugin{}.CreateContainer(ctx, p, ctr("c1", p, tc.Container, ctrPath))
		got := adj.GetLinux().GetResources().GetUnified()["misc.max"]
		if errText := fmt.Sprint(err); got != tc.MiscMax || (tc.Error == "") != (err == nil) || err != nil && errText != tc.Error {
			t.Errorf("%s: misc.max %q, error %v; sgx-epc: %q, error %q", tc.Name, got, err, tc.MiscMax, tc.Error)
		}
	}
}

// TestBesideSGXEPC runs podfence and the sgx-epc stand-in in the real NRI runtime side, in
// both orders, on pods of the fixture. NRI lets one plugin own a unified resource per
// container: a second claim fails the container with NRI's message. podfence stands aside:
//   - sgx-epc first (lower index): podfence sees misc.max in the container and sets nothing;
//   - podfence first (sgx-epc's chart puts it at 90, podfence's default is 10): with
//     --epc-apply-at create both claim and the container fails, as the issue reports; with
//     start podfence claims nothing at CreateContainer, and at StartContainer finds sgx-epc's
//     misc.max in the container and stands aside, or, for a container sgx-epc leaves alone,
//     writes its own cap into the cgroup.
func TestBesideSGXEPC(t *testing.T) {
	docs, _ := sgxEPCFixture(t)
	conflict := `plugins "90-sgx-epc" and "10-podfence" both tried to set CgroupsUnified misc.max`
	for _, tc := range []struct {
		name       string
		sgxIdx     string
		at         epc.ApplyAt
		anns       map[string]string
		createErr  string // CreateContainer of c0 fails with this (NRI's conflict)
		wantMax    string // the runtime's misc.max of c0 after both plugins
		wantStart  string // misc.max podfence wrote into c0's cgroup at start ("": none)
		wantYield  float64
		wantLogged string
	}{
		{name: "sgx-epc first", sgxIdx: "05", anns: docs, wantMax: "sgx_epc 16384", wantYield: 1,
			wantLogged: `msg="SGX EPC limit left to another owner of misc.max" pod=ns/p1 container=c0 setBy="an NRI plugin that ran ` +
				`earlier, or the runtime" value="sgx_epc 16384" limit=16384 same=true`},
		{name: "sgx-epc first, apply at start", sgxIdx: "05", at: epc.AtStart, anns: docs, wantMax: "sgx_epc 16384", wantYield: 1},
		{name: "podfence first, apply at create: NRI refuses the second claim", sgxIdx: "90", anns: docs, createErr: conflict},
		{name: "podfence first, apply at start", sgxIdx: "90", at: epc.AtStart, anns: docs, wantMax: "sgx_epc 16384", wantYield: 1,
			wantLogged: `msg="SGX EPC limit left to another owner of misc.max" pod=ns/p1 container=c0 setBy="an NRI plugin that ran ` +
				`after the agent" value="sgx_epc 16384" limit=16384 same=true`},
		{name: "podfence first, apply at start, a quantity sgx-epc cannot read: it fails the container", sgxIdx: "90",
			at: epc.AtStart, anns: map[string]string{epc.AnnotationPod: "64Mi"},
			createErr: `failed to parse annotation 64Mi: strconv.ParseUint: parsing "64Mi": invalid syntax`},
		{name: "no sgx-epc, apply at start: podfence writes at StartContainer", at: epc.AtStart, anns: docs,
			wantStart: "sgx_epc 16384"},
		{name: "no sgx-epc, apply at create", anns: docs, wantMax: "sgx_epc 16384"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &node{root: cgroupstest.Tree(t, "v2"), k: &cgroupstest.Kernel{}, logs: &syncBuffer{}}
			n.Extension = enforce.New(enforce.Config{Root: n.root, ApplyAt: tc.at, FS: n.k}, nritest.Logger(n.logs))
			root, k := n.root, n.k
			rt := newRuntime(t)
			plugins := 1
			if tc.sgxIdx != "" {
				s, err := stub.New(sgxEPCPlugin{}, stub.WithSocketPath(rt.Socket), stub.WithPluginName("sgx-epc"),
					stub.WithPluginIdx(tc.sgxIdx))
				if err != nil {
					t.Fatal(err)
				}
				rt.serve(s.Run)
				plugins++
			}
			rt.runAgent(n.Extension)
			rt.waitPlugins(plugins)

			p := pod("p1", tc.anns)
			c := ctr("c1", p, "c0", ctrPath)
			rpl, err := rt.create(p, c)
			if tc.createErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.createErr) {
					t.Fatalf("CreateContainer error %v\nwant it to hold %s", err, tc.createErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := rpl.GetAdjust().GetLinux().GetResources().GetUnified()["misc.max"]
			if got != tc.wantMax {
				t.Errorf("the runtime's misc.max %q, want %q", got, tc.wantMax)
			}
			// The runtime creates the cgroup (writing the adjusted unified resources) and
			// relays StartContainer with the container as adjusted.
			dir := filepath.Join(root, ctrPath)
			if _, err := k.Mkdir(dir); err != nil {
				t.Fatal(err)
			}
			if got != "" {
				writeFile(t, filepath.Join(dir, "misc.max"), got+"\n")
			}
			c.Linux.Resources.Unified = rpl.GetAdjust().GetLinux().GetResources().GetUnified()
			if err := rt.StartContainer(ctx, &api.StartContainerRequest{Pod: p, Container: c}); err != nil {
				t.Fatal(err)
			}
			written := ""
			for _, w := range k.Writes() {
				written += w
			}
			if want := map[bool]string{true: dir + "/misc.max=" + tc.wantStart}[tc.wantStart != ""]; written != want {
				t.Errorf("podfence wrote %q, want %q", written, want)
			}
			if tc.wantStart != "" {
				if got := strings.TrimSpace(n.readFile(t, dir, "misc.max")); got != tc.wantStart {
					t.Errorf("cgroup misc.max %q, want %q", got, tc.wantStart)
				}
			}
			if got := value(t, n, "podfence_epc_yielded_containers", ""); got != tc.wantYield {
				t.Errorf("podfence_epc_yielded_containers %v, want %v", got, tc.wantYield)
			}
			if got := unenforced(t, n); got != 0 {
				t.Errorf("podfence_epc_unenforced_containers %v, want 0", got)
			}
			if d := n.Degraded(); len(d) != 0 {
				t.Errorf("degraded %+v", d)
			}
			if tc.wantLogged != "" && strings.Count(n.logs.String(), tc.wantLogged) != 1 {
				t.Errorf("log lacks, once, %s:\n%s", tc.wantLogged, n.logs.String())
			}
		})
	}
}
