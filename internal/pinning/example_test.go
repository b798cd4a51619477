package pinning_test

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/pinning"
)

func ExamplePlan() {
	spec, err := pinning.Parse(pinning.Key, `[{"container": "app", "processes": [
		{"process": "/bin/dp",  "args": ["-c", "1"], "pool": "exclusive_caas", "cpus": 2},
		{"process": "/bin/ctl", "args": [],          "pool": "shared_caas",    "cpus": 200},
		{"process": "/bin/app", "args": ["--serve"], "pool": "exclusive_caas", "cpus": 1}]}]`)
	if err != nil {
		fmt.Println(err)
		return
	}
	procs, _ := spec.For("app")
	assign, err := pinning.Plan(procs, cpuset.New(2, 3, 4), cpuset.New(6, 7))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range assign {
		fmt.Println(a.Process.Path, a.Process.Pool, a.CPUs)
	}

	_, err = pinning.Plan(procs, cpuset.New(2, 3), cpuset.New(6, 7))
	fmt.Println(err)
	// Output:
	// /bin/dp exclusive_caas 2-3
	// /bin/ctl shared_caas 6-7
	// /bin/app exclusive_caas 4
	// not enough CPUs: exclusive processes ask for 3 CPUs, the container has 2: lower their cpus in the annotation or raise the container's exclusive pool request
}

func ExampleWrap() {
	procs := []pinning.Process{
		{Path: "/bin/sidecar", Pool: "exclusive_caas", CPUs: 1},
		{Pool: "exclusive_caas", CPUs: 1}, // the container's own command
	}
	w, err := pinning.Wrap("/opt/podfence/podfence", "app", []string{"/app", "--serve"}, procs)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Mount.Type, w.Mount.Source, "->", w.Mount.Destination, w.Mount.Options)
	fmt.Printf("%q\n", w.Args)
	for _, e := range w.Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	// Output:
	// bind /opt/podfence/podfence -> /.podfence/podfence [rbind ro nosuid nodev]
	// ["/.podfence/podfence" "start" "--" "/app" "--serve"]
	// PODFENCE_PINNING=[{"container":"app","processes":[{"process":"/bin/sidecar","args":[],"pool":"exclusive_caas","cpus":1},{"process":"","args":[],"pool":"exclusive_caas","cpus":1}]}]
	// PODFENCE_CONTAINER=app
}
