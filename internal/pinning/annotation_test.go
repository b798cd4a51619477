package pinning

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/podfence/podfence/podapi"
)

// cpuPoolerExample is CPU-Pooler's deployment/cpu-test.yaml style of annotation.
const cpuPoolerExample = `[{
  "container": "cputestcontainer",
  "processes": [
    {"process": "/bin/sh", "args": ["-c", "/thread_busyloop -n \"Process \"1"], "cpus": 1, "pool": "exclusive_caas"},
    {"process": "/bin/sh", "args": ["-c", "/thread_busyloop -n \"Process \"2"], "pool": "shared_caas", "cpus": 100}
  ]}]`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  Spec
	}{
		{name: "empty array", value: `[]`, want: Spec{Containers: []Container{}}},
		{
			name:  "CPU-Pooler example",
			value: cpuPoolerExample,
			want: Spec{Containers: []Container{{Name: "cputestcontainer", Processes: []Process{
				{Path: "/bin/sh", Args: []string{"-c", `/thread_busyloop -n "Process "1`}, Pool: "exclusive_caas", CPUs: 1},
				{Path: "/bin/sh", Args: []string{"-c", `/thread_busyloop -n "Process "2`}, Pool: "shared_caas", CPUs: 100},
			}}}},
		},
		{
			name: "default pool: cpus optional, args optional",
			value: `[{"container": "a", "processes": [{"process": "x", "pool": "default"}, {"process": "y", "pool": "other", "cpus": ` +
				`0, "args": []}]}]`,
			want: Spec{Containers: []Container{{Name: "a", Processes: []Process{
				{Path: "x", Pool: "default"}, {Path: "y", Pool: "other"},
			}}}},
		},
		{
			name: "last process runs the container's command",
			value: `[{"container": "a", "processes": [{"process": "", "args": ["-v"], "pool": "exclusive_a", "cpus": 2}]}, ` +
				`{"container": "b", "processes": [{"pool": "shared_s", "cpus": "250"}]}]`,
			want: Spec{Containers: []Container{
				{Name: "a", Processes: []Process{{Args: []string{"-v"}, Pool: "exclusive_a", CPUs: 2}}},
				{Name: "b", Processes: []Process{{Pool: "shared_s", CPUs: 250}}},
			}},
		},
		{
			name:  "several default pool names",
			value: `[{"container": "a", "processes": [{"process": "x", "pool": "default"}, {"process": "y", "pool": "mgmt"}]}]`,
			want:  Spec{Containers: []Container{{Name: "a", Processes: []Process{{Path: "x", Pool: "default"}, {Path: "y", Pool: "mgmt"}}}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Key, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const prefix = "annotation podfence.io/cpus="
	for _, tc := range []struct {
		name, value, want string
	}{
		{name: "empty", value: ``, want: "truncated or empty JSON"},
		{name: "not JSON", value: `[{]`, want: "invalid JSON at byte 3: invalid character ']' looking for beginning of object key string"},
		{name: "object", value: `{"container": "a"}`, want: "the annotation: got a JSON object, want an array"},
		{name: "trailing data", value: `[] []`, want: "data after the JSON array"},
		{name: "unknown field", value: `[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a", "cpu": 1}]}]`,
			want: `json: unknown field "cpu"`},
		{name: "cpus wrong type", value: `[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a", "cpus": [1]}]}]`,
			want: "processes.cpus: got a JSON array, want number"},
		{name: "no container name", value: `[{"processes": [{"process": "x", "pool": "default"}]}]`,
			want: `entry 0: "container" is missing or empty (want the container's name)`},
		{name: "no processes", value: `[{"container": "a"}]`, want: `entry 0: container "a": has 0 processes (want 1 to 256)`},
		{name: "duplicate container",
			value: `[{"container": "a", "processes": [{"process": "x", "pool": "default"}]}, {"container": "a", "processes": ` +
				`[{"process": "y", "pool": "default"}]}]`, want: `entry 1: container "a" has more than one entry (want one per container)`},
		{name: "empty process not last",
			value: `[{"container": "a", "processes": [{"pool": "default"}, {"process": "y", "pool": ` +
				`"default"}]}]`, want: `entry 0: container "a": process 0: "process" is missing or empty (want a binary; only the last ` +
				`process may omit it to run the container's own command)`},
		{name: "bad pool name", value: `[{"container": "a", "processes": [{"process": "x", "pool": "exclusive a", "cpus": 1}]}]`,
			want: `entry 0: container "a": process 0: pool "exclusive a": want a pool name`},
		{name: "empty pool", value: `[{"container": "a", "processes": [{"process": "x", "cpus": 1}]}]`,
			want: `process 0: pool "": want a pool name`},
		{name: "exclusive cpus missing", value: `[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a"}]}]`,
			want: `process 0: pool "exclusive_a": cpus missing: want a whole number of CPUs from 1 to 8192`},
		{name: "exclusive cpus zero",
			value: `[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a", "cpus": ` +
				`0}]}]`, want: `cpus 0: want a whole number of CPUs from 1 to 8192`},
		{name: "fractional cpus", value: `[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a", "cpus": 1.5}]}]`,
			want: `cpus 1.5: want a whole number of CPUs from 1 to 8192`},
		{name: "shared cpus too large",
			value: `[{"container": "a", "processes": [{"process": "x", "pool": "shared_a", "cpus": ` +
				`9000000}]}]`, want: `pool "shared_a": cpus 9000000: want a whole number of millicpu (1000 = one CPU) from 1 to 8192000`},
		{name: "negative default cpus", value: `[{"container": "a", "processes": [{"process": "x", "pool": "default", "cpus": -1}]}]`,
			want: `cpus -1: want a whole number (ignored for the default pool) from 0 to 8192`},
		{name: "two shared pools",
			value: `[{"container": "a", "processes": [{"process": "x", "pool": "shared_a", "cpus": 1}, {"process": "y", "pool": ` +
				`"shared_b", "cpus": 1}]}]`, want: `another process names shared pool "shared_a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(Key, tc.value)
			var ae *podapi.AnnotationError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an *AnnotationError", err)
			}
			if ae.Key != Key || ae.Value != tc.value {
				t.Errorf("AnnotationError names %q=%q, want %q=%q", ae.Key, ae.Value, Key, tc.value)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tc.want) {
				t.Errorf("error:\n got %s\nwant %s...%s", msg, prefix, tc.want)
			}
		})
	}
}

func TestAnnotationErrorTruncatesLongValues(t *testing.T) {
	value := "[" + strings.Repeat(" ", 300) + "x]"
	_, err := Parse(CPUPoolerKey, value)
	if msg := err.Error(); strings.Contains(msg, strings.Repeat(" ", 200)) || !strings.Contains(msg,
		`…"`) || !strings.HasPrefix(msg, "annotation nokia.k8s.io/cpus=") {
		t.Errorf("error %q: want the value cut at 200 bytes", msg)
	}
}

func TestFromAnnotations(t *testing.T) {
	one := func(name string) string {
		return `[{"container": "` + name + `", "processes": [{"process": "x", "pool": "default"}]}]`
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		wantOK      bool
		wantName    string
		wantErrKey  string
	}{
		{name: "none", annotations: map[string]string{"other": "x"}},
		{name: "podfence", annotations: map[string]string{Key: one("p")}, wantOK: true, wantName: "p"},
		{name: "CPU-Pooler", annotations: map[string]string{CPUPoolerKey: one("n")}, wantOK: true, wantName: "n"},
		{name: "podfence wins", annotations: map[string]string{Key: one("p"), CPUPoolerKey: one("n")}, wantOK: true, wantName: "p"},
		{name: "bad value names its key", annotations: map[string]string{CPUPoolerKey: "nope"}, wantOK: true, wantErrKey: CPUPoolerKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, ok, err := FromAnnotations(tc.annotations)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			var ae *podapi.AnnotationError
			if tc.wantErrKey != "" {
				if !errors.As(err, &ae) || ae.Key != tc.wantErrKey {
					t.Fatalf("error %v: want an *AnnotationError for %s", err, tc.wantErrKey)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, found := spec.For(tc.wantName); tc.wantOK && !found {
				t.Errorf("spec %+v has no container %q", spec, tc.wantName)
			}
		})
	}
}

func TestSpecFor(t *testing.T) {
	spec, err := Parse(Key, cpuPoolerExample)
	if err != nil {
		t.Fatal(err)
	}
	if procs, ok := spec.For("cputestcontainer"); !ok || len(procs) != 2 {
		t.Errorf("For(cputestcontainer) = %v, %v; want 2 processes", procs, ok)
	}
	if procs, ok := spec.For("other"); ok || procs != nil {
		t.Errorf("For(other) = %v, %v; want nil, false", procs, ok)
	}
}

func TestEncodeRoundTrips(t *testing.T) {
	spec, err := Parse(Key, cpuPoolerExample)
	if err != nil {
		t.Fatal(err)
	}
	enc := Encode(spec.Containers...)
	const want = `[{"container":"cputestcontainer","processes":[{"process":"/bin/sh","args":["-c","/thread_busyloop -n ` +
		`\"Process \"1"],"pool":"exclusive_caas","cpus":1},{"process":"/bin/sh","args":["-c","/thread_busyloop -n \"Process ` +
		`\"2"],"pool":"shared_caas","cpus":100}]}]`
	if enc != want {
		t.Errorf("Encode:\n got %s\nwant %s", enc, want)
	}
	again, err := Parse(Key, enc)
	if err != nil || !reflect.DeepEqual(again, spec) {
		t.Errorf("Parse(Encode(spec)) = %+v, %v; want %+v", again, err, spec)
	}
	if got := Encode(Container{Name: "a",
		Processes: []Process{{Pool: "default"}}}); got != `[{"container":"a","processes":[{"process":"","args":[],"pool":"default","cpus":0}]}]` {
		t.Errorf("Encode writes nil args as %s; want []", got)
	}
}
