package podapi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/podapi"
)

func TestParseCPUPools(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        string // fmt of the result: container → request
		wantErr     string
	}{
		{name: "numbers", value: `{"app": {"exclusive_dp": 2, "shared_caas": 500}}`,
			want: "map[app:exclusive_dp=2,shared_caas=500]"},
		{name: "quantity strings", value: `{"app": {"exclusive_dp": "2", "shared_caas": "1k"}}`,
			want: "map[app:exclusive_dp=2,shared_caas=1k]"},
		{name: "resource names of both domains", value: `{"a": {"podfence.io/exclusive_x": 1}, "b": {"nokia.k8s.io/shared_y": 10}}`,
			want: "map[a:exclusive_x=1 b:shared_y=10]"},
		{name: "exponent", value: `{"app": {"shared_caas": 5e2}}`, want: "map[app:shared_caas=500]"},
		{name: "several containers, one empty", value: `{"a": {"exclusive_x": 1}, "b": {}}`, want: "map[a:exclusive_x=1 b:]"},
		{name: "empty object", value: `{}`, want: "map[]"},
		{name: "white space", value: " \n{\"a\": {\"exclusive_x\": 1}}\n", want: "map[a:exclusive_x=1]"},

		{name: "empty", value: ``, wantErr: "decode JSON: EOF"},
		{name: "null", value: `null`, wantErr: "not a JSON object"},
		{name: "array", value: `[1]`, wantErr: "decode JSON: json: cannot unmarshal array"},
		{name: "amounts not under a container", value: `{"exclusive_x": 1}`, wantErr: "cannot unmarshal number"},
		{name: "trailing data", value: `{} {}`, wantErr: "data after the object"},
		{name: "empty container name", value: `{"": {"exclusive_x": 1}}`, wantErr: "empty container name"},
		{name: "zero", value: `{"a": {"exclusive_x": 0}}`, wantErr: `container "a" pool "exclusive_x": amount "0" must be above 0`},
		{name: "negative string", value: `{"a": {"shared_y": "-5"}}`, wantErr: `amount "-5" must be above 0`},
		{name: "boolean", value: `{"a": {"shared_y": true}}`, wantErr: `amount true is neither a number nor a quantity string`},
		{name: "bad quantity", value: `{"a": {"shared_y": "lots"}}`, wantErr: `amount "lots" is not a quantity`},
		{name: "quantity too costly to parse (hangs resource.ParseQuantity)", value: `{"a": {"shared_y": "1e-999999999"}}`,
			wantErr: `amount "1e-999999999" is not a quantity: quantity "1e-999999999" has an exponent of more than 3 digits`},
		{name: "foreign domain", value: `{"a": {"example.com/x": 1}}`, wantErr: `pool "example.com/x" is not a pool name`},
		{name: "bad pool name", value: `{"a": {"-x": 1}}`, wantErr: `pool "-x" is not a pool name`},
		{name: "same pool twice", value: `{"a": {"exclusive_x": 1, "podfence.io/exclusive_x": 1}}`, wantErr: `pool "exclusive_x" is named twice`},
		{name: "too long", value: `{"a": {}, "b": "` + strings.Repeat("x", 70000) + `"}`,
			wantErr: "value is 70018 bytes, over the limit of 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := podapi.ParseCPUPools(tc.value)
			if tc.wantErr != "" {
				checkAnnotationError(t, err, podapi.AnnotationCPUPools, tc.wantErr, `want JSON {"<container>": {"<pool>": <amount>}}`)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
}

func TestParseExclusiveCPUs(t *testing.T) {
	for _, tc := range []struct{ value, want, wantErr string }{
		{value: "4-5,12", want: "4-5,12"},
		{value: " 7 ", want: "7"},
		{value: "", wantErr: "no CPUs"},
		{value: "4-", wantErr: `cpu list "4-"`},
		{value: "99999", wantErr: "99999"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			got, err := podapi.ParseExclusiveCPUs(tc.value)
			if tc.wantErr != "" {
				checkAnnotationError(t, err, podapi.AnnotationExclusiveCPUs, tc.wantErr, `want a non-empty Linux CPU list such as "4-5,12"`)
				return
			}
			if err != nil || got.String() != tc.want {
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func checkAnnotationError(t *testing.T, err error, key string, wants ...string) {
	t.Helper()
	var ae *podapi.AnnotationError
	if !errors.As(err, &ae) || ae.Key != key {
		t.Fatalf("error %v, want an *AnnotationError for %s", err, key)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if !strings.HasPrefix(err.Error(), "annotation "+key+"=") {
		t.Errorf("error %q does not start by naming the annotation", err)
	}
}

func FuzzParseCPUPools(f *testing.F) {
	for _, s := range []string{`{"app": {"exclusive_dp": 2, "shared_caas": 500}}`, `{"a": {"nokia.k8s.io/x": "1.5"}}`,
		`{"a": {"x": 1e400}}`, `{"a": {"x": "9223372036854775807k"}}`, `{}`, `null`, `{"a": null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := podapi.ParseCPUPools(v)
		if err != nil {
			var ae *podapi.AnnotationError
			if !errors.As(err, &ae) || ae.Value != v {
				t.Fatalf("error %v is not an *AnnotationError with the value", err)
			}
			return
		}
		for ctr, req := range got {
			if ctr == "" {
				t.Fatal("empty container name accepted")
			}
			checkRequest(t, req)
		}
	})
}

func checkRequest(t *testing.T, req plan.Request) {
	for pool, q := range req {
		if pool == "" || strings.Contains(pool, "/") {
			t.Fatalf("pool name %q", pool)
		}
		if q.Sign() <= 0 {
			t.Fatalf("pool %q amount %s not above 0", pool, q.String())
		}
	}
}

func FuzzParseExclusiveCPUs(f *testing.F) {
	for _, s := range []string{"4-5,12", "0", "", "8191", "1-0", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		cpus, err := podapi.ParseExclusiveCPUs(v)
		if err == nil && cpus.IsEmpty() {
			t.Fatalf("%q: no CPUs and no error", v)
		}
	})
}
