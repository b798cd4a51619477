package epc_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/podfence/podfence/internal/epc"
)

// sgxEPCCase is a case of testdata/nri-plugins-sgx-epc/annotations.json: the annotations of
// a pod, a container's name, and what nri-plugins' sgx-epc plugin does with them.
type sgxEPCCase struct {
	Name        string
	Annotations json.RawMessage // an object, or the name of a shared one ("docsExample")
	Container   string
	MiscMax     string
	Error       string
	Podfence    *struct{ MiscMax, Why string }
}

// TestSGXEPCAnnotations: podfence reads nri-plugins sgx-epc's annotations as that plugin
// does (its example and the cases its code decides), and sets the misc.max it sets.
func TestSGXEPCAnnotations(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "nri-plugins-sgx-epc", "annotations.json"))
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
	if len(f.Cases) == 0 || len(f.DocsExample) != 3 {
		t.Fatalf("fixture: %d cases, docs example %v", len(f.Cases), f.DocsExample)
	}
	for _, tc := range f.Cases {
		ann := f.DocsExample
		if string(tc.Annotations) != `"docsExample"` {
			ann = nil
			if err := json.Unmarshal(tc.Annotations, &ann); err != nil {
				t.Fatalf("%s: %v", tc.Name, err)
			}
		}
		want, wantErr := tc.MiscMax, tc.Error != ""
		if tc.Podfence != nil {
			if tc.Podfence.Why == "" {
				t.Errorf("%s: a difference without its reason", tc.Name)
			}
			want, wantErr = tc.Podfence.MiscMax, false
		}
		l, _, err := epc.Resolve(ann, tc.Container)
		got := ""
		if l.IsSet() {
			got = l.MiscMax()
		}
		if (err != nil) != wantErr || got != want {
			t.Errorf("%s: misc.max %q, error %v; want %q, error %v", tc.Name, got, err, want, wantErr)
		}
	}
}
