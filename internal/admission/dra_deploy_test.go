package admission

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/nodeagent"
)

// draBuild builds a copy of deploy/ (namespace movedNamespace) with cert-manager and the
// component dra.
func draBuild(t *testing.T) []object {
	t.Helper()
	dir := copyDeploy(t)
	editKustomization(t, dir, map[string]string{`(?m)^(\s*)- certs\b.*$`: "${1}- cert-manager",
		`(?m)^(\s*)# - dra\b.*$`: "${1}- dra"})
	return splitObjects(t, kustomizeBuilder(t)(t, dir))
}

// TestDRAComponentDaemonSet: the component adds DaemonSet podfence-dra with its own service
// account, on the agent's nodes (nodeSelector, tolerations), from the agent's image, with
// NODE_NAME, no host namespaces, every capability dropped, writable mounts only for what it
// writes, a grant store that is the agent's --dra-state-dir default inside the agent's own
// /var/lib/podfence, and the agent's checkpoint dir read-only. The agent pod is unchanged.
func TestDRAComponentDaemonSet(t *testing.T) {
	var ds, agentDS appsv1.DaemonSet
	for _, o := range draBuild(t) {
		switch {
		case o.kind == "DaemonSet" && o.name == "podfence-dra":
			decode(t, o, &ds)
		case o.kind == "DaemonSet" && o.name == "podfence-agent":
			decode(t, o, &agentDS)
		}
	}
	spec, aspec := ds.Spec.Template.Spec, agentDS.Spec.Template.Spec
	if len(spec.Containers) != 1 || spec.Containers[0].Name != "podfence-dra" || len(aspec.Containers) != 1 {
		t.Fatalf("DaemonSet podfence-dra containers %v, agent's %v: want podfence-dra alone, the agent alone",
			containerNames(spec.Containers), containerNames(aspec.Containers))
	}
	agent, drv := aspec.Containers[0], spec.Containers[0]
	if spec.ServiceAccountName != "podfence-dra" || aspec.ServiceAccountName != "podfence-agent" ||
		spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		t.Errorf("service accounts: driver %q, agent %q; want podfence-dra (its token mounted) and podfence-agent",
			spec.ServiceAccountName, aspec.ServiceAccountName)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("host namespaces: network %v, pid %v, ipc %v; want none", spec.HostNetwork, spec.HostPID, spec.HostIPC)
	}
	if !reflect.DeepEqual(spec.NodeSelector, aspec.NodeSelector) || !reflect.DeepEqual(spec.Tolerations, aspec.Tolerations) ||
		spec.PriorityClassName != aspec.PriorityClassName {
		t.Errorf("driver on %v (tolerations %v, priority %q), agent on %v (%v, %q): want the same nodes",
			spec.NodeSelector, spec.Tolerations, spec.PriorityClassName, aspec.NodeSelector, aspec.Tolerations, aspec.PriorityClassName)
	}
	if drv.Image != agent.Image || !slices.Equal(drv.Command, []string{"/usr/local/bin/podfence-dra"}) {
		t.Errorf("image %q command %v, want the agent's image %q and /usr/local/bin/podfence-dra", drv.Image, drv.Command, agent.Image)
	}
	if len(drv.Env) != 1 || drv.Env[0].Name != "NODE_NAME" || drv.Env[0].ValueFrom == nil ||
		drv.Env[0].ValueFrom.FieldRef == nil || drv.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName", drv.Env)
	}
	sc := drv.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("securityContext %+v: want unprivileged, no escalation, read-only root, every capability dropped, none added", sc)
	}
	hostPaths := func(vs []corev1.Volume) map[string]string {
		out := map[string]string{}
		for _, v := range vs {
			if v.HostPath != nil {
				out[v.Name] = v.HostPath.Path
			}
		}
		return out
	}
	hostPath, agentHostPath := hostPaths(spec.Volumes), hostPaths(aspec.Volumes)
	var writable, readOnly []string
	mountOf := map[string]string{} // host path → where the driver sees it
	for _, m := range drv.VolumeMounts {
		if m.ReadOnly {
			readOnly = append(readOnly, m.Name)
		} else {
			writable = append(writable, m.Name)
		}
		mountOf[hostPath[m.Name]] = m.MountPath
	}
	if want := []string{"kubelet-plugins", "kubelet-registry", "cdi", "dra-state"}; !slices.Equal(writable, want) {
		t.Errorf("writable mounts %v, want %v", writable, want)
	}
	if want := []string{"checkpoint", "pools", "sys", "cgroup"}; !slices.Equal(readOnly, want) {
		t.Errorf("read-only mounts %v, want %v", readOnly, want)
	}
	// The agent's record of the layout in force, at the driver's --pools-in-force default.
	agentCheckpoint := flagValue(t, agent.Args, "--checkpoint-dir")
	if hostPath["checkpoint"] != agentCheckpoint || mountOf[agentCheckpoint] != "/var/lib/podfence/checkpoint" ||
		!strings.HasPrefix(agentCheckpoint+"/", agentHostPath["checkpoint"]+"/") {
		t.Errorf("checkpoint: host %s at %s; want the agent's --checkpoint-dir %s (under its host %s) at /var/lib/podfence/checkpoint",
			hostPath["checkpoint"], mountOf[hostPath["checkpoint"]], agentCheckpoint, agentHostPath["checkpoint"])
	}
	for _, p := range []string{"/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/run/cdi"} {
		if mountOf[p] != p {
			t.Errorf("host %s is mounted at %q, want the same path", p, mountOf[p])
		}
	}
	state := flagValue(t, drv.Args, "--state-dir")
	claims := filepath.Join(state, "claims") // the driver's grant store (driver.ClaimsDir)
	if claims != nodeagent.DefaultDRAStateDir || flagValue(t, agent.Args, "--dra-state-dir") != "" {
		t.Errorf("driver grants in %s; the agent reads %s (its default, no --dra-state-dir): want the same", claims,
			nodeagent.DefaultDRAStateDir)
	}
	if hostPath["dra-state"] != state || mountOf[state] != state {
		t.Errorf("dra-state: host %s mounted at %s, want both %s", hostPath["dra-state"], mountOf[state], state)
	}
	agentSees := false
	for _, m := range agent.VolumeMounts {
		agentSees = agentSees || strings.HasPrefix(state+"/", m.MountPath+"/") && agentHostPath[m.Name] == m.MountPath
	}
	if !agentSees {
		t.Errorf("the agent does not see the host's %s at the same path", state)
	}
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// flagValue returns the value of --name=value in args ("" when absent).
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestDRAComponentRBAC: the driver's ClusterRole is what its kubelet plugin needs and no
// more (no get or patch of slices: the slice controller lists, watches, creates, updates and
// deletes), bound to its own service account in podfence's namespace; the agent's service
// account has no right on ResourceSlices or claims.
func TestDRAComponentRBAC(t *testing.T) {
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	var accounts []string
	objs := draBuild(t)
	for _, o := range objs {
		switch {
		case o.kind == "ClusterRole" && o.name == "podfence-dra":
			decode(t, o, &role)
		case o.kind == "ClusterRoleBinding" && o.name == "podfence-dra":
			decode(t, o, &binding)
		case o.kind == "ServiceAccount":
			accounts = append(accounts, o.namespace+"/"+o.name)
		case o.kind == "ClusterRole":
			var r rbacv1.ClusterRole
			decode(t, o, &r)
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "resource.k8s.io") || slices.Contains(rule.APIGroups, "*") {
					t.Errorf("ClusterRole %s grants %v on %v of resource.k8s.io; want only podfence-dra to", r.Name, rule.Verbs, rule.Resources)
				}
			}
		}
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"},
			Verbs: []string{"list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
	}
	got, _ := yaml.Marshal(role.Rules)
	if w, _ := yaml.Marshal(want); string(got) != string(w) {
		t.Errorf("ClusterRole podfence-dra rules:\n%s\nwant\n%s", got, w)
	}
	if binding.RoleRef.Name != "podfence-dra" || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "podfence-dra" ||
		binding.Subjects[0].Namespace != movedNamespace {
		t.Errorf("ClusterRoleBinding podfence-dra: %+v %+v, want podfence-dra to podfence-dra in %s", binding.RoleRef,
			binding.Subjects, movedNamespace)
	}
	if !slices.Contains(accounts, movedNamespace+"/podfence-dra") {
		t.Errorf("service accounts %v: want podfence-dra in %s", accounts, movedNamespace)
	}
}

// The node the DeviceClasses are tried on: 2 sockets x 4 cores x 2 threads (core c has
// threads c and c+8), whole-core and one-thread DRA pools, a DRA shared pool, a device-plugin
// pool, and 128 MiB of SGX EPC.
const (
	draTopology = "sockets=2,cores=4,threads=2"
	draLayout   = `
pools:
  default:     {cpus: "0"}
  shared_s:    {cpus: "1,9", requestAPI: dra}
  exclusive_w: {cpus: "2-5", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  exclusive_t: {cpus: "6", requestAPI: dra}
  exclusive_p: {cpus: "7"}
`
)

// draDevices is what the driver publishes for the test node.
func draDevices(t *testing.T) []resourceapi.Device {
	t.Helper()
	topo, err := topology.Synthetic(draTopology)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("test", []byte(draLayout))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := dra.NewInventory(topo, layout, 128<<20)
	if err != nil {
		t.Fatal(err)
	}
	return inv.Devices()
}

// matching returns the names of the devices that every CEL expression selects, tried in
// order until one does not.
func matching(t *testing.T, devices []resourceapi.Device, exprs ...string) []string {
	t.Helper()
	var progs []dracel.CompilationResult
	for _, e := range exprs {
		r := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true}).CompileCELExpression(e, dracel.Options{})
		if r.Error != nil {
			t.Fatalf("CEL %q: %v", e, r.Error)
		}
		progs = append(progs, r)
	}
	var names []string
	for _, d := range devices {
		in := dracel.Device{Driver: dra.DriverName, Attributes: d.Attributes, Capacity: d.Capacity,
			AllowMultipleAllocations: d.AllowMultipleAllocations}
		all := true
		for _, p := range progs { // in order, as the allocator: the class's first, then the request's
			ok, _, err := p.DeviceMatches(context.Background(), in)
			if err != nil {
				t.Fatalf("CEL %q on device %s: %v", p.Expression, d.Name, err)
			}
			if all = ok; !ok {
				break
			}
		}
		if all {
			names = append(names, d.Name)
		}
	}
	return names
}

// classSelectors returns each DeviceClass's CEL expressions, by name.
func classSelectors(t *testing.T, objs []object) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, o := range objs {
		if o.kind != "DeviceClass" {
			continue
		}
		var c resourceapi.DeviceClass
		decode(t, o, &c)
		for _, s := range c.Spec.Selectors {
			out[c.Name] = append(out[c.Name], s.CEL.Expression)
		}
	}
	return out
}

// TestDRADeviceClasses: each DeviceClass selects exactly its kind of the driver's devices:
// the exclusive units, the shared pool, the EPC.
func TestDRADeviceClasses(t *testing.T) {
	devices := draDevices(t)
	classes := classSelectors(t, draBuild(t))
	byPrefix := func(prefix string) []string {
		var names []string
		for _, d := range devices {
			if strings.HasPrefix(d.Name, prefix) {
				names = append(names, d.Name)
			}
		}
		return names
	}
	for class, want := range map[string][]string{
		"exclusive-cpus.podfence.io": byPrefix("cpu-"),
		"shared-cpus.podfence.io":    byPrefix("shared-"),
		"sgx-epc.podfence.io":        {dra.EPCDevice},
	} {
		exprs, ok := classes[class]
		if !ok {
			t.Errorf("no DeviceClass %s in the build", class)
			continue
		}
		if got := matching(t, devices, exprs...); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("DeviceClass %s selects %v, want %v", class, got, want)
		}
	}
	if len(classes) != 3 {
		t.Errorf("DeviceClasses %v, want the three", classes)
	}
}

// TestDRAExamples: deploy/dra/examples.yaml decodes strictly as its API types, its claims name
// the component's DeviceClasses, the whole-core template selects the whole cores of the
// multiThreaded pool only (each with the standard NUMA attribute its constraint matches),
// and README.md shows every example as it is in the file.
func TestDRAExamples(t *testing.T) {
	text, err := os.ReadFile("../../deploy/dra/examples.yaml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	classes := classSelectors(t, draBuild(t))
	devices := draDevices(t)
	templates := 0
	for _, o := range splitObjects(t, text) {
		body := regexp.MustCompile(`(?m)^#.*\n`).ReplaceAllString(string(o.raw), "")
		if !strings.Contains(string(readme), strings.TrimSpace(body)) {
			t.Errorf("README.md does not show %s as examples.yaml has it", o)
		}
		switch o.kind {
		case "Pod":
			var p corev1.Pod
			decode(t, o, &p)
			continue
		case "ResourceClaimTemplate":
		default:
			t.Errorf("%s: unexpected kind", o)
			continue
		}
		templates++
		var tmpl resourceapi.ResourceClaimTemplate
		decode(t, o, &tmpl)
		for _, r := range tmpl.Spec.Spec.Devices.Requests {
			exprs, ok := classes[r.Exactly.DeviceClassName]
			if !ok {
				t.Fatalf("%s: request %s names DeviceClass %q, which the component does not have", o, r.Name, r.Exactly.DeviceClassName)
			}
			for _, s := range r.Exactly.Selectors {
				exprs = append(exprs, s.CEL.Expression)
			}
			got := matching(t, devices, exprs...)
			if o.name == "four-cpus-whole-cores" && !slices.Equal(got, []string{"cpu-2", "cpu-3", "cpu-4", "cpu-5"}) {
				t.Errorf("%s selects %v, want the whole cores cpu-2 to cpu-5", o, got)
			}
			if len(got) == 0 {
				t.Errorf("%s: request %s selects no device", o, r.Name)
			}
		}
		for _, c := range tmpl.Spec.Spec.Devices.Constraints {
			for _, d := range devices {
				if _, ok := d.Attributes[resourceapi.QualifiedName(*c.MatchAttribute)]; !ok && strings.HasPrefix(d.Name, "cpu-") {
					t.Errorf("%s: device %s lacks %s, which the constraint matches", o, d.Name, *c.MatchAttribute)
				}
			}
		}
	}
	if templates != 3 {
		t.Errorf("%d ResourceClaimTemplates, want 3 (whole cores, shared, EPC)", templates)
	}
}
