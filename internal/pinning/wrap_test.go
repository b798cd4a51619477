package pinning

import (
	"reflect"
	"testing"
)

func TestWrap(t *testing.T) {
	procs := []Process{
		{Path: "/bin/dp", Args: []string{"-c", "1"}, Pool: "exclusive_a", CPUs: 1},
		{Pool: "exclusive_a", CPUs: 1, Args: []string{"--extra"}},
	}
	w, err := Wrap("/opt/podfence/bin/podfence", "app", []string{"/app", "--serve"}, procs)
	if err != nil {
		t.Fatal(err)
	}
	want := Wrapping{
		Mount: Mount{
			Destination: "/.podfence/podfence",
			Type:        "bind",
			Source:      "/opt/podfence/bin/podfence",
			Options:     []string{"rbind", "ro", "nosuid", "nodev"},
		},
		Args: []string{"/.podfence/podfence", "start", "--", "/app", "--serve"},
		Env: []EnvVar{
			{Name: "PODFENCE_PINNING",
				Value: `[{"container":"app","processes":[{"process":"/bin/dp","args":["-c","1"],"pool":"exclusive_a","cpus":1},{"process":"","args":["--extra"],"pool":"exclusive_a","cpus":1}]}]`},
			{Name: "PODFENCE_CONTAINER", Value: "app"},
		},
	}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("Wrap:\n got %+v\nwant %+v", w, want)
	}
}

func TestWrapRefuses(t *testing.T) {
	last := []Process{{Path: "/bin/x", Pool: "default"}}
	for _, tc := range []struct {
		name, binary, container string
		args                    []string
		procs                   []Process
		want                    string
	}{
		{name: "relative binary", binary: "podfence", container: "a", procs: last,
			want: `podfence binary "podfence": want an absolute host path`},
		{name: "no container", binary: "/p", procs: last, want: `wrap: container name is empty`},
		{name: "no process", binary: "/p", container: "a", want: `wrap container "a": no process to start`},
		{
			name: "nothing to exec", binary: "/p", container: "a", procs: []Process{{Pool: "default"}},
			want: `wrap container "a": the last process names no "process" and the container has no command to run instead`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Wrap(tc.binary, tc.container, tc.args, tc.procs)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestWrapThenStart runs what the agent sets up (Wrap's env and args, plus the CPUs the
// agent sets) through the starter, as the container would.
func TestWrapThenStart(t *testing.T) {
	spec, err := Parse(Key, `[{"container": "app", "processes": [
		{"process": "/bin/dp", "pool": "exclusive_a", "cpus": 1},
		{"process": "", "args": ["--extra"], "pool": "shared_s", "cpus": 200}]}]`)
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := spec.For("app")
	w, err := Wrap("/opt/podfence", "app", []string{"/app", "--serve"}, procs)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"EXCLUSIVE_CPUS=4,5", "SHARED_CPUS=0-1"}
	for _, e := range w.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	if w.Args[1] != "start" || w.Args[2] != "--" {
		t.Fatalf("args %q: want MountPath start -- ...", w.Args)
	}
	r := &recorder{}
	if err := (Starter{Affinity: fakeAffinity{r: r}, Execer: fakeExecer{r: r}}).Start(env, w.Args[3:]); err != nil {
		t.Fatal(err)
	}
	want := []string{`pin 0 4`, `start /bin/dp []`, restored, `pin 0 0-1`, `exec /app ["--serve" "--extra"]`, restored}
	if !reflect.DeepEqual(r.events, want) {
		t.Errorf("events:\n got %q\nwant %q", r.events, want)
	}
}
