package admission

import (
	"os"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// TestDeployConfigs reads the webhook configurations of deploy/webhook strictly as the API
// types and checks what the README promises: pod CREATE only, v1 reviews, no side effects,
// this server's paths, Fail where correctness needs it, the own namespace excluded.
func TestDeployConfigs(t *testing.T) {
	read := func(name string, into any) {
		b, err := os.ReadFile("../../deploy/webhook/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "${CA_BUNDLE}", "Q0E="))
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
		if s := w.ClientConfig.Service; s == nil || s.Path == nil || *s.Path != h.path || string(w.ClientConfig.CABundle) != "CA" {
			t.Errorf("%s: clientConfig %+v: want service path %s and the CA bundle", h.name, w.ClientConfig, h.path)
		}
		if r := w.Rules; len(r) != 1 || !slices.Equal(r[0].Operations, []admissionregistrationv1.OperationType{"CREATE"}) ||
			!slices.Equal(r[0].Resources, []string{"pods"}) || !slices.Equal(r[0].APIGroups, []string{""}) {
			t.Errorf("%s: rules %+v: want pod CREATE", h.name, r)
		}
		if *w.SideEffects != admissionregistrationv1.SideEffectClassNone || !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) {
			t.Errorf("%s: sideEffects %s, versions %v", h.name, *w.SideEffects, w.AdmissionReviewVersions)
		}
		if e := w.NamespaceSelector.MatchExpressions; len(e) != 1 || e[0].Key != "kubernetes.io/metadata.name" ||
			e[0].Operator != "NotIn" || !slices.Contains(e[0].Values, "podfence-system") {
			t.Errorf("%s: namespaceSelector %+v: want podfence-system excluded", h.name, w.NamespaceSelector)
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
