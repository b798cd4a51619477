package extender

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/coresched"
)

const deployDir = "../../deploy/extender/"

// schedulerConfig is the part of kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration
// that deploy/extender sets (k8s.io/kube-scheduler/config/v1 would add component-base to
// go.mod); decoded strictly, so a misspelt field fails.
type schedulerConfig struct {
	metav1.TypeMeta `json:",inline"`
	LeaderElection  struct {
		LeaderElect *bool `json:"leaderElect"`
	} `json:"leaderElection"`
	Profiles []struct {
		SchedulerName *string `json:"schedulerName"`
	} `json:"profiles"`
	Extenders []struct {
		URLPrefix        string          `json:"urlPrefix"`
		FilterVerb       string          `json:"filterVerb"`
		PreemptVerb      string          `json:"preemptVerb"`
		PrioritizeVerb   string          `json:"prioritizeVerb"`
		Weight           int64           `json:"weight"`
		BindVerb         string          `json:"bindVerb"`
		EnableHTTPS      bool            `json:"enableHTTPS"`
		TLSConfig        *map[string]any `json:"tlsConfig"`
		HTTPTimeout      metav1.Duration `json:"httpTimeout"`
		NodeCacheCapable bool            `json:"nodeCacheCapable"`
		Ignorable        bool            `json:"ignorable"`
	} `json:"extenders"`
}

// deployDocs returns the YAML documents of deploy/extender/name.
func deployDocs(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(deployDir + name)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// TestDeployExtender reads deploy/extender strictly as the API types: kube-scheduler's
// configuration reaches this extender (its verbs are this handler's routes, its URL the
// sidecar's --listen, which needs no TLS), and the pod and its RBAC are as small as the
// README says.
func TestDeployExtender(t *testing.T) {
	var cfg schedulerConfig
	if err := yaml.UnmarshalStrict(deployDocs(t, "scheduler-config.yaml")[0], &cfg); err != nil {
		t.Fatalf("scheduler-config.yaml: %v", err)
	}
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName == nil || *cfg.Profiles[0].SchedulerName != "podfence-scheduler" {
		t.Errorf("profiles %+v: want one, podfence-scheduler", cfg.Profiles)
	}
	if le := cfg.LeaderElection.LeaderElect; le == nil || *le {
		t.Errorf("leaderElect %v: want false (one replica, Recreate)", le)
	}
	if len(cfg.Extenders) != 1 {
		t.Fatalf("%d extenders, want 1", len(cfg.Extenders))
	}
	e := cfg.Extenders[0]
	u, err := url.Parse(e.URLPrefix)
	if err != nil || u.Scheme != "http" || e.EnableHTTPS || e.TLSConfig != nil || cfg.Kind != "KubeSchedulerConfiguration" ||
		cfg.APIVersion != "kubescheduler.config.k8s.io/v1" {
		t.Errorf("urlPrefix %q (https %v): want plain http to the sidecar", e.URLPrefix, e.EnableHTTPS)
	}
	if !e.NodeCacheCapable || !e.Ignorable || e.Weight < 1 || e.HTTPTimeout.Duration <= 0 || e.BindVerb != "" || e.PreemptVerb != "" {
		t.Errorf("extender %+v: want nodeCacheCapable, ignorable, a weight and a timeout, no bind or preempt", e)
	}
	// Each verb is a route of this handler that answers a request like kube-scheduler's.
	h := NewHandler(NewCache(coresched.ByNamespace, quiet()), coresched.ByNamespace, quiet())
	names := []string{"node-a"}
	args, _ := json.Marshal(extenderv1.ExtenderArgs{NodeNames: &names, Pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}})
	for _, verb := range []string{e.FilterVerb, e.PrioritizeVerb} {
		r := httptest.NewRequest(http.MethodPost, strings.TrimSuffix(u.Path, "/")+"/"+verb, bytes.NewReader(args))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if verb == "" || w.Code != http.StatusOK {
			t.Errorf("verb %q: %d %s", verb, w.Code, w.Body)
		}
	}

	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(deployDocs(t, "scheduler.yaml")[0], &d); err != nil {
		t.Fatalf("scheduler.yaml: %v", err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %v, strategy %s: want 1, Recreate (no leader election)", d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	pod := d.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want non-root", sc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("the scheduler pod shares a host namespace: the extender's loopback would be the node's")
	}
	var listen string
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
			!*sc.ReadOnlyRootFilesystem || sc.Privileged != nil && *sc.Privileged || sc.Capabilities == nil ||
			!slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s: securityContext %+v: want no privilege escalation, a read-only root, all capabilities dropped", c.Name, sc)
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--listen="); ok {
				listen = v
			}
		}
		if c.Name == "kube-scheduler" && (len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap == nil ||
			pod.Volumes[0].ConfigMap.Name != "podfence-scheduler-config" || len(c.VolumeMounts) != 1 ||
			!slices.Contains(c.Command, "--config="+c.VolumeMounts[0].MountPath+"/config.yaml")) {
			t.Errorf("kube-scheduler: command %v, mounts %+v, volumes %+v: want --config from ConfigMap podfence-scheduler-config",
				c.Command, c.VolumeMounts, pod.Volumes)
		}
	}
	if listen != u.Host {
		t.Errorf("the extender listens on %q, kube-scheduler calls %q", listen, u.Host)
	}
	if insecure, err := CheckListen(Config{Address: listen}); err != nil || insecure {
		t.Errorf("--listen %s: %v (plain HTTP allowed only with --insecure-listen: %v); want loopback", listen, err, insecure)
	}

	// RBAC: the pod's ServiceAccount; the extender may list and watch pods and nodes, nothing
	// more; the subjects leave the namespace to kustomize.
	var sa string
	var role *rbacv1.ClusterRole
	bound := map[string]bool{}
	for _, doc := range deployDocs(t, "rbac.yaml") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ServiceAccount":
			var s corev1.ServiceAccount
			if err := yaml.UnmarshalStrict(doc, &s); err != nil {
				t.Fatal(err)
			}
			sa = s.Name
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(doc, role); err != nil {
				t.Fatal(err)
			}
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				t.Fatal(err)
			}
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Namespace != "" {
				t.Errorf("%s: subjects %+v: want one ServiceAccount, its namespace left to kustomize", b.Name, b.Subjects)
			}
			bound[b.RoleRef.Name] = len(b.Subjects) == 1 && b.Subjects[0].Name == pod.ServiceAccountName
		default:
			t.Errorf("rbac.yaml: unexpected %s", meta.Kind)
		}
	}
	if sa == "" || sa != pod.ServiceAccountName {
		t.Errorf("ServiceAccount %q, the pod runs as %q", sa, pod.ServiceAccountName)
	}
	if role == nil || !bound[role.Name] || !bound["system:kube-scheduler"] || !bound["system:volume-scheduler"] {
		t.Fatalf("bindings %v: want the extender's ClusterRole, system:kube-scheduler and system:volume-scheduler bound to the pod's ServiceAccount", bound)
	}
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Verbs, []string{"list", "watch"}) ||
			len(r.ResourceNames) != 0 || len(r.NonResourceURLs) != 0 {
			t.Errorf("%s: rule %+v: want list and watch in the core group only", role.Name, r)
		}
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods", "nodes"}) {
		t.Errorf("%s: rules %+v: want pods and nodes (the informers of Watch)", role.Name, role.Rules)
	}
}
