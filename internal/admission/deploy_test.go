package admission

import (
	"os"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/manifest"
)

// TestDeployConfigs reads the webhook configurations of deploy/webhook strictly as the API
// types and checks what the README promises: pod CREATE only, v1 reviews, no side effects,
// this server's paths, Fail where correctness needs it, the own namespace excluded. The
// namespace is a ${NAMESPACE} placeholder that deploy/kustomization.yaml fills (see
// TestDeployNamespaceInOnePlace).
func TestDeployConfigs(t *testing.T) {
	const ns = "ns-under-test"
	read := func(name string, into any) {
		b, err := os.ReadFile("../../deploy/webhook/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.NewReplacer("${CA_BUNDLE}", "Q0E=", "${NAMESPACE}", ns).Replace(string(b)))
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	read("mutating.yaml", &m)
	read("validating.yaml", &v)
	type hook struct {
		name, path string
		policy     admissionregistrationv1.FailurePolicyType
		common     admissionregistrationv1.ValidatingWebhook
	}
	var hooks []hook
	for _, w := range m.Webhooks {
		hooks = append(hooks, hook{w.Name, PathMutate, *w.FailurePolicy, admissionregistrationv1.ValidatingWebhook{
			ClientConfig: w.ClientConfig, Rules: w.Rules, SideEffects: w.SideEffects, NamespaceSelector: w.NamespaceSelector,
			AdmissionReviewVersions: w.AdmissionReviewVersions, MatchConditions: w.MatchConditions}})
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v, want IfNeeded", w.Name, w.ReinvocationPolicy)
		}
	}
	for _, w := range v.Webhooks {
		hooks = append(hooks, hook{w.Name, PathValidate, *w.FailurePolicy, w})
	}
	want := map[string]admissionregistrationv1.FailurePolicyType{"pools.podfence.io": "Fail", "profiles.podfence.io": "Ignore",
		"pods.podfence.io": "Fail"}
	for _, h := range hooks {
		w := h.common
		if p, ok := want[h.name]; !ok || p != h.policy {
			t.Errorf("%s: failurePolicy %s, want %s", h.name, h.policy, p)
		}
		if s := w.ClientConfig.Service; s == nil || s.Path == nil || *s.Path != h.path || s.Namespace != ns || s.Name != "podfence-webhook" ||
			string(w.ClientConfig.CABundle) != "CA" {
			t.Errorf("%s: clientConfig %+v: want service ${NAMESPACE}/podfence-webhook, path %s and the CA bundle", h.name, w.ClientConfig, h.path)
		}
		if r := w.Rules; len(r) != 1 || !slices.Equal(r[0].Operations, []admissionregistrationv1.OperationType{"CREATE"}) ||
			!slices.Equal(r[0].Resources, []string{"pods"}) || !slices.Equal(r[0].APIGroups, []string{""}) {
			t.Errorf("%s: rules %+v: want pod CREATE", h.name, r)
		}
		if *w.SideEffects != admissionregistrationv1.SideEffectClassNone || !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) {
			t.Errorf("%s: sideEffects %s, versions %v", h.name, *w.SideEffects, w.AdmissionReviewVersions)
		}
		if e := w.NamespaceSelector.MatchExpressions; len(e) != 1 || e[0].Key != "kubernetes.io/metadata.name" ||
			e[0].Operator != "NotIn" || len(e[0].Values) == 0 || e[0].Values[0] != ns {
			t.Errorf("%s: namespaceSelector %+v: want ${NAMESPACE} excluded, first", h.name, w.NamespaceSelector)
		}
		if len(w.MatchConditions) != 1 {
			t.Errorf("%s: %d match conditions, want 1", h.name, len(w.MatchConditions))
		}
	}
	// Every pod goes to exactly one mutating entry; the validating one sees at least the first's.
	carries := m.Webhooks[0].MatchConditions[0].Expression
	if got := m.Webhooks[1].MatchConditions[0].Expression; got != "!("+carries+")" {
		t.Errorf("the profiles entry's condition is not the negation of the pools entry's:\n%s", got)
	}
	if got := v.Webhooks[0].MatchConditions[0].Expression; !strings.HasPrefix(got, carries+" ||") {
		t.Errorf("the validating condition does not extend the pools entry's:\n%s", got)
	}
	if _, err := LoadProfiles("../../deploy/webhook/coresched-profiles.yaml"); err != nil {
		t.Error(err)
	}
}

// TestDeployWebhookAlerts reads deploy/prometheus/webhook-alerts.yaml as alerts.yaml's test
// does (internal/nodeagent): each rule an alert Podfence… with an expression, a severity and
// a summary, and the serving certificate's expiry covered for hack/certs.sh (the webhook's
// own metric) and for cert-manager (its metric).
// TODO: once the webhook serves podfence_webhook_certificate_not_after_seconds, check here
// that it registers every podfence_ metric these rules name.
func TestDeployWebhookAlerts(t *testing.T) {
	b, err := os.ReadFile("../../deploy/prometheus/webhook-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("webhook-alerts.yaml: %v", err)
	}
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if !strings.HasPrefix(r.Alert, "Podfence") || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want an alert Podfence…, an expr, a severity and a summary", r)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	for _, metric := range []string{"podfence_webhook_certificate_not_after_seconds", "certmanager_certificate_expiration_timestamp_seconds"} {
		if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, metric) }) {
			t.Errorf("no rule on %s", metric)
		}
	}
}

// TestDeployResources: every container of deploy/, built with every component (init
// containers included), sets CPU and memory requests and a memory limit
// (manifest.CheckResources; hack/helmcheck checks the chart's renderings the same way).
func TestDeployResources(t *testing.T) {
	dir := copyDeploy(t)
	editKustomization(t, dir, map[string]string{`(?m)^(\s*)- certs\b.*$`: "${1}- cert-manager",
		`(?m)^(\s*)# - extender$`: "${1}- extender", `(?m)^(\s*)# - admission-policy$`: "${1}- admission-policy",
		`(?m)^(\s*)# - agent-privileged\b.*$`: "${1}- agent-privileged", `(?m)^(\s*)# - dra\b.*$`: "${1}- dra"})
	workloads := 0
	for _, o := range splitObjects(t, kustomizeBuilder(t)(t, dir)) {
		if err := manifest.CheckResources(o.raw); err != nil {
			t.Error(err)
		}
		if slices.Contains([]string{"DaemonSet", "Deployment"}, o.kind) {
			workloads++
		}
	}
	if workloads < 3 {
		t.Errorf("%d DaemonSets and Deployments in the build, want the agent's, the webhook's and the scheduler's", workloads)
	}
}

// TestDeployMetricsTLS: with cert-manager, the agents serve a certificate Prometheus can
// verify: Certificate podfence-agent-metrics (its DNS name, from the CA Issuer) into the
// Secret the agent DaemonSet mounts for --metrics-cert and --metrics-key; scrape.yaml's agent
// job verifies it (ca_file, server_name that name) instead of skipping verification.
func TestDeployMetricsTLS(t *testing.T) {
	dir := copyDeploy(t)
	editKustomization(t, dir, map[string]string{`(?m)^(\s*)- certs\b.*$`: "${1}- cert-manager"})
	var cert struct {
		Spec struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
			IssuerRef  struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"issuerRef"`
		} `json:"spec"`
	}
	var ds appsv1.DaemonSet
	for _, o := range splitObjects(t, kustomizeBuilder(t)(t, dir)) {
		switch {
		case o.kind == "Certificate" && o.name == "podfence-agent-metrics":
			if err := yaml.Unmarshal(o.raw, &cert); err != nil {
				t.Fatal(err)
			}
		case o.kind == "DaemonSet" && o.name == "podfence-agent":
			decode(t, o, &ds)
		}
	}
	if cert.Spec.SecretName == "" || len(cert.Spec.DNSNames) != 1 || cert.Spec.IssuerRef.Name != "podfence-webhook-ca" {
		t.Fatalf("Certificate podfence-agent-metrics: %+v; want one DNS name, a Secret, Issuer podfence-webhook-ca", cert.Spec)
	}
	agent := ds.Spec.Template.Spec.Containers[0]
	certFile, keyFile := flagValue(t, agent.Args, "--metrics-cert"), flagValue(t, agent.Args, "--metrics-key")
	var mounted string
	for _, m := range agent.VolumeMounts {
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == cert.Spec.SecretName {
				mounted = m.MountPath
			}
		}
	}
	if mounted == "" || certFile != mounted+"/tls.crt" || keyFile != mounted+"/tls.key" {
		t.Errorf("agent: --metrics-cert %q --metrics-key %q, Secret %s mounted at %q; want its tls.crt and tls.key",
			certFile, keyFile, cert.Spec.SecretName, mounted)
	}
	b, err := os.ReadFile("../../deploy/prometheus/scrape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var scrape struct {
		ScrapeConfigs []struct {
			JobName   string         `json:"job_name"`
			TLSConfig map[string]any `json:"tls_config"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &scrape); err != nil {
		t.Fatal(err)
	}
	for _, j := range scrape.ScrapeConfigs {
		if j.JobName != "podfence-agent" {
			continue
		}
		if j.TLSConfig["insecure_skip_verify"] == true || j.TLSConfig["ca_file"] == nil || j.TLSConfig["server_name"] != cert.Spec.DNSNames[0] {
			t.Errorf("scrape.yaml podfence-agent tls_config %v: want ca_file and server_name %s, verification on", j.TLSConfig, cert.Spec.DNSNames[0])
		}
		return
	}
	t.Error("scrape.yaml: no job podfence-agent")
}
