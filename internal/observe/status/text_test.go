package status_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/observe/status"
)

// TestWriteText checks the report's key lines: every grid row and legend of the example, the
// kernel features and the container rows with what the extensions set.
func TestWriteText(t *testing.T) {
	var out bytes.Buffer
	if err := status.WriteText(&out, exampleReport(t)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Node node-a: 2 sockets, 2 NUMA nodes, 16 cores, 32 CPUs (SMT2), 2 L3 groups\n",
		"From: agent (ready) at 2026-07-01 10:00:00Z\n",
		"  SMT              yes  2 threads per core, smt/control on\n",
		"  core scheduling  no   kernel without core scheduling (CONFIG_SCHED_CORE)\n",
		"  cgroup           v2   driver systemd\n",
		"  misc/sgx_epc     yes  capacity 1Gi\n",
		// exclusive_dp: two containers on whole cores of NUMA 0, NUMA 1 free.
		"exclusive_dp: exclusive, multiThreaded, CPUs 4-11,20-27: 7 of 16 given, 2 containers\n" +
			"  socket 0 NUMA 0  core  4   5   6   7\n" +
			"                     t0  4A  5A  6B  7B\n" +
			"                     t1 20A 21A 22B 23.\n" +
			"  socket 1 NUMA 1  core  8   9  10  11\n" +
			"                     t0  8.  9. 10. 11.\n" +
			"                     t1 24. 25. 26. 27.\n" +
			"  A=telco/dpdk-router/fwd  B=telco/packet-gen/gen\n",
		// exclusive_rt: singleThreaded, the siblings of the given CPUs idle.
		"exclusive_rt: exclusive, singleThreaded, CPUs 12-15,28-31: 2 of 8 given, 2 idled, 1 container\n" +
			"  socket 1 NUMA 1  core 12  13  14  15\n" +
			"                     t0 12A 13A 14. 15.\n" +
			"                     t1 28~ 29~ 30. 31.\n",
		"shared_caas: shared, CPUs 2-3,18-19: 800 of 4000 millicpu granted (20%), 3 containers\n",
		"  shop/billing/app 500m, shop/billing/log-shipper 200m, telco/dpdk-router/stats 100m\n",
		"default: default, CPUs 0-1,16-17: 1 container\n",
		"                     t0  0*  1*\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks\n%s\nreport:\n%s", want, text)
		}
	}
	rows := map[string][]string{ // container → its row's fields
		"fwd":  {"telco/dpdk-router", "fwd", "exclusive_dp", "4-5,20-21", "-", "telco", "64Mi", "12Mi"},
		"loop": {"telco/rt-control", "loop", "exclusive_rt", "12-13", "28-29", "rt", "(unsupported)", "-", "-"},
		"app":  {"shop/billing", "app", "shared_caas", "(500m)", "2-3,18-19", "-", "-", "-", "-"},
	}
	for ctr, want := range rows {
		if !hasRow(text, want) {
			t.Errorf("no container row %s %q in\n%s", ctr, want, text)
		}
	}
	if !strings.Contains(text, "More from extensions sandbox: see -o json.") {
		t.Errorf("the unknown section is not mentioned:\n%s", text)
	}
}

// TestWriteTextFromJSON: a report read back from /state prints the same.
func TestWriteTextFromJSON(t *testing.T) {
	r := exampleReport(t)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back status.Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var direct, decoded bytes.Buffer
	if err := status.WriteText(&direct, r); err != nil {
		t.Fatal(err)
	}
	if err := status.WriteText(&decoded, back); err != nil {
		t.Fatal(err)
	}
	if direct.String() != decoded.String() {
		t.Errorf("from JSON:\n%s\ndirect:\n%s", decoded.String(), direct.String())
	}
}

func TestWriteTextMarks(t *testing.T) {
	r := exampleReport(t)
	r.Source, r.Ready = "agent", false
	r.Containers[0].EPC = &status.EPCContainer{LimitBytes: 3 << 19}
	r.Kernel.SGXEPC = status.Feature{Detail: "no misc controller"}
	var out bytes.Buffer
	if err := status.WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"From: agent (not ready: not synchronised by the runtime yet)",
		"1.5Mi (not enforced)",
		"  misc/sgx_epc     no   no misc controller\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	r.Pools[0].CPUs = "x"
	if err := status.WriteText(&out, r); err == nil || !strings.Contains(err.Error(), `pool exclusive_dp: cpus "x"`) {
		t.Errorf("bad pool CPUs: error %v", err)
	}
}

// hasRow reports whether a line of text has exactly the fields want.
func hasRow(text string, want []string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}
