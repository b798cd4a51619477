package pinning

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"k8s.io/utils/cpuset"
)

// recorder keeps what the fakes were asked to do, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
	envs   [][]string
}

func (r *recorder) add(env []string, format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, a...))
	if env != nil {
		r.envs = append(r.envs, env)
	}
}

type fakeAffinity struct {
	r       *recorder
	fail    string // CPU list whose Set fails
	failGet bool
}

// fakeAll is every thread's affinity before the starter narrows it.
const fakeAll = "0-15"

func (f fakeAffinity) Get(tid int) (cpuset.CPUSet, error) {
	if f.failGet {
		return cpuset.New(), errors.New("operation not permitted")
	}
	return cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), nil
}

func (f fakeAffinity) Set(tid int, cpus cpuset.CPUSet) error {
	f.r.add(nil, "pin %d %s", tid, cpus)
	if cpus.String() == f.fail {
		return errors.New("invalid argument")
	}
	return nil
}

type fakeExecer struct {
	r         *recorder
	failStart string // path whose Start fails
	failExec  bool
}

func (f fakeExecer) Start(c Command) (int, error) {
	f.r.add(c.Env, "start %s %q", c.Path, c.Args)
	if c.Path == f.failStart {
		return 0, errors.New("no such file or directory")
	}
	return 100 + len(f.r.envs), nil
}

func (f fakeExecer) Exec(c Command) error {
	f.r.add(c.Env, "exec %s %q", c.Path, c.Args)
	if f.failExec {
		return errors.New("exec format error")
	}
	return nil
}

func (f fakeExecer) Kill(pid int) error {
	f.r.add(nil, "kill %d", pid)
	return nil
}

const twoExclusiveAndDefault = `[{"container": "app", "processes": [
	{"process": "/bin/a", "args": ["-x"], "pool": "exclusive_p", "cpus": 2},
	{"process": "/bin/b", "pool": "exclusive_p", "cpus": 1},
	{"process": "/bin/c", "args": ["1", "2"], "pool": "default"}]}]`

// restored is the event of restoring a thread's affinity after a fork or exec.
const restored = "pin 0 " + fakeAll

func environ(pinning string, more ...string) []string {
	return append([]string{"PATH=/bin", EnvContainer + "=app", EnvPinning + "=" + pinning}, more...)
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		environ   []string
		command   []string
		failPin   string
		failGet   bool
		failStart string
		failExec  bool
		want      []string
		wantErr   string
	}{
		{
			name:    "fork all but the last, exec the last",
			environ: environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2,3,5,6", "SHARED_CPUS=8-9"),
			want: []string{
				`pin 0 2-3`, `start /bin/a ["-x"]`, restored, `pin 0 5`, `start /bin/b []`, restored,
				`pin 0 6,8-9`, `exec /bin/c ["1" "2"]`, restored,
			},
		},
		{
			name:    "last process without a binary runs the container's command",
			environ: environ(`[{"container": "app", "processes": [{"pool": "shared_s", "cpus": 300, "args": ["--extra"]}]}]`, "SHARED_CPUS=8-9"),
			command: []string{"/app", "--serve"},
			want:    []string{`pin 0 8-9`, `exec /app ["--serve" "--extra"]`, restored},
		},
		{
			name: "default-pool container: not pinned",
			environ: environ(`[{"container": "app", "processes": [{"process": "/bin/a", "pool": "default"}, {"process": "/bin/b", ` +
				`"pool": "default"}]}]`),
			want: []string{`start /bin/a []`, `exec /bin/b []`},
		},
		{
			name:    "more CPUs asked than allocated: nothing starts",
			environ: environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2-3"),
			wantErr: `container "app": not enough CPUs: exclusive processes ask for 3 CPUs, the container has 2:`,
		},
		{
			name:      "a fork fails: the started ones are killed",
			environ:   environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2-5"),
			failStart: "/bin/b",
			want:      []string{`pin 0 2-3`, `start /bin/a ["-x"]`, restored, `pin 0 4`, `start /bin/b []`, restored, `kill 101`},
			wantErr:   `container "app": process 1 (/bin/b): no such file or directory`,
		},
		{
			name:     "the exec fails: the started ones are killed",
			environ:  environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2-5"),
			failExec: true,
			want: []string{`pin 0 2-3`, `start /bin/a ["-x"]`, restored, `pin 0 4`, `start /bin/b []`, restored, `pin 0 5`,
				`exec /bin/c ["1" "2"]`, restored, `kill 101`, `kill 102`},
			wantErr: `container "app": process 2 (/bin/c): exec format error`,
		},
		{
			name:    "pinning fails: the process does not start",
			environ: environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2-5"),
			failPin: "2-3",
			want:    []string{`pin 0 2-3`},
			wantErr: `container "app": process 0 (/bin/a): set CPU affinity to 2-3: invalid argument`,
		},
		{
			name:    "reading the affinity fails: nothing starts",
			environ: environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2-5"),
			failGet: true,
			wantErr: `container "app": process 0 (/bin/a): read CPU affinity: operation not permitted`,
		},
		{
			name:    "no container name",
			environ: []string{EnvPinning + "=[]"},
			wantErr: `PODFENCE_CONTAINER is not set: podfence start runs as the entrypoint wrapper the podfence agent sets up`,
		},
		{
			name:    "no annotation",
			environ: []string{EnvContainer + "=app"},
			wantErr: `container "app": PODFENCE_PINNING is not set or empty (want the pinning annotation's JSON)`,
		},
		{
			name:    "container not in the annotation",
			environ: environ(strings.ReplaceAll(twoExclusiveAndDefault, `"app"`, `"web"`)),
			wantErr: `container "app": PODFENCE_PINNING has no entry for this container (PODFENCE_PINNING names "web")`,
		},
		{
			name:    "bad annotation",
			environ: environ(`[{"container": "app"}]`),
			wantErr: `container "app": annotation PODFENCE_PINNING="[{\"container\": \"app\"}]": entry 0: container "app": has 0 processes`,
		},
		{
			name:    "bad CPU list",
			environ: environ(twoExclusiveAndDefault, "EXCLUSIVE_CPUS=2-x"),
			wantErr: `container "app": EXCLUSIVE_CPUS: cpu list "2-x": entry "2-x": "x" is not a CPU number`,
		},
		{
			name:    "no binary and no container command",
			environ: environ(`[{"container": "app", "processes": [{"pool": "default"}]}]`),
			wantErr: `container "app": the last process names no "process" and there is no container command after "--" to run instead`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			s := Starter{Affinity: fakeAffinity{r: r, fail: tc.failPin, failGet: tc.failGet}, Execer: fakeExecer{r: r,
				failStart: tc.failStart, failExec: tc.failExec}}
			err := s.Start(tc.environ, tc.command)
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Fatalf("error:\n got %v\nwant %s", err, tc.wantErr)
			}
			if !reflect.DeepEqual(r.events, tc.want) && len(r.events)+len(tc.want) > 0 {
				t.Errorf("events:\n got %q\nwant %q", r.events, tc.want)
			}
			for _, env := range r.envs {
				if !reflect.DeepEqual(env, tc.environ) {
					t.Errorf("a process got env %q, want the starter's %q", env, tc.environ)
				}
			}
		})
	}
}

func TestLookupFirstWins(t *testing.T) {
	env := lookup([]string{"A=1", "B", "A=2", "C=x=y"})
	if env("A") != "1" || env("B") != "" || env("C") != "x=y" {
		t.Errorf("lookup: A=%q B=%q C=%q; want 1, empty, x=y", env("A"), env("B"), env("C"))
	}
}
