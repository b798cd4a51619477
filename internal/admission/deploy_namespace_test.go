package admission

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The namespace deploy/kustomization.yaml ships with, and the one the test moves podfence to.
const (
	shippedNamespace = "podfence-system"
	movedNamespace   = "pf-moved"
)

// TestDeployNamespaceInOnePlace builds a copy of deploy/ whose kustomization.yaml says
// namespace: pf-moved, and checks that nothing still names podfence-system and that every
// reference to the namespace follows: the namespaced objects, the Namespace, the ServiceAccount
// subjects of the bindings, the Service and the namespace exclusion of the webhook
// configurations, the serving certificate's DNS names (hack/certs.sh's, or cert-manager's
// Certificate and inject-ca-from). Once with hack/certs.sh's component, once with cert-manager
// and the extender.
//
// It runs kustomize as kubectl does (`kubectl kustomize`, or a kustomize binary): $KUSTOMIZE,
// $KUBECTL, kustomize or kubectl on PATH, or the kubectl test/e2e/node caches. Without one it
// is skipped.
func TestDeployNamespaceInOnePlace(t *testing.T) {
	build := kustomizeBuilder(t)
	t.Run("certs", func(t *testing.T) {
		for _, tool := range []string{"bash", "openssl"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("hack/certs.sh needs %s: %v", tool, err)
			}
		}
		dir := copyDeploy(t)
		// As an operator would: certs.sh reads the namespace from the kustomization its
		// output directory is in, and writes the component that loads its files.
		cmd := exec.Command("bash", "../../hack/certs.sh", "-o", filepath.Join(dir, "certs"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/certs.sh: %v\n%s", err, out)
		}
		checkMoved(t, build(t, dir), false)
	})
	t.Run("cert-manager+extender", func(t *testing.T) {
		dir := copyDeploy(t)
		editKustomization(t, dir, map[string]string{`(?m)^(\s*)- certs\b.*$`: "${1}- cert-manager", `(?m)^(\s*)# ?- extender\b.*$`: "${1}- extender"})
		checkMoved(t, build(t, dir), true)
	})
}

// copyDeploy copies deploy/ (without certs/) to a temporary directory and moves its
// namespace to movedNamespace; it returns the copy.
func copyDeploy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "deploy")
	src := "../../deploy"
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		switch {
		case d.IsDir() && rel == "certs":
			return filepath.SkipDir // hack/certs.sh's output: made anew where needed
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	editKustomization(t, dst, map[string]string{`(?m)^namespace: ` + shippedNamespace + `$`: "namespace: " + movedNamespace})
	return dst
}

// editKustomization replaces each regexp's single match in dir/kustomization.yaml.
func editKustomization(t *testing.T, dir string, edits map[string]string) {
	t.Helper()
	p := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for re, repl := range edits {
		r := regexp.MustCompile(re)
		if n := len(r.FindAll(b, -1)); n != 1 {
			t.Fatalf("deploy/kustomization.yaml: %d lines match %s, want 1", n, re)
		}
		b = r.ReplaceAll(b, []byte(repl))
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kustomizeBuilder returns a function that renders a kustomization directory with kustomize's
// own library (the one kubectl embeds, v5: components, replacements, ServiceAccount subjects).
func kustomizeBuilder(t *testing.T) func(*testing.T, string) []byte {
	t.Helper()
	return func(t *testing.T, dir string) []byte {
		t.Helper()
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		out, err := m.AsYaml()
		if err != nil {
			t.Fatalf("kustomize build %s: YAML: %v", dir, err)
		}
		return out
	}
}

// object is one rendered manifest: its kind, name and namespace, and its YAML.
type object struct {
	kind, name, namespace string
	annotations           map[string]string
	raw                   []byte
}

func (o object) String() string { return o.kind + " " + o.namespace + "/" + o.name }

// The kinds of deploy/ that have no namespace.
var clusterScoped = []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
	"ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterIssuer"}

func splitObjects(t *testing.T, out []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered object: %v\n%s", err, doc)
		}
		objs = append(objs, object{meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace, meta.Metadata.Annotations, []byte(doc)})
	}
	return objs
}

// decode reads o strictly into the API type into.
func decode(t *testing.T, o object, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.raw, into); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
}

// checkMoved checks a build of deploy/ with namespace movedNamespace.
func checkMoved(t *testing.T, out []byte, certManager bool) {
	t.Helper()
	for i, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, shippedNamespace) || strings.Contains(line, "${") {
			t.Errorf("rendered line %d still names %s or a placeholder: %s", i+1, shippedNamespace, strings.TrimSpace(line))
		}
	}
	objs := splitObjects(t, out)
	byKind := map[string][]object{}
	has := func(kind, name string) bool {
		return slices.ContainsFunc(byKind[kind], func(o object) bool { return o.name == name })
	}
	for _, o := range objs {
		byKind[o.kind] = append(byKind[o.kind], o)
		// kustomize's built-in schema predates ValidatingAdmissionPolicy (and knows no CRD):
		// it gives them the namespace too, which the API server drops for a cluster-scoped
		// object. Only another namespace would be wrong.
		switch {
		case slices.Contains(clusterScoped, o.kind) && o.namespace != "" && o.namespace != movedNamespace:
			t.Errorf("%s: a cluster-scoped object with another namespace", o)
		case !slices.Contains(clusterScoped, o.kind) && o.namespace != movedNamespace:
			t.Errorf("%s: namespace %q, want %s", o, o.namespace, movedNamespace)
		}
	}
	if ns := byKind["Namespace"]; len(ns) != 1 || ns[0].name != movedNamespace {
		t.Errorf("Namespace objects %v, want one, %s", ns, movedNamespace)
	}

	// The bindings name the ServiceAccounts where they are.
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range byKind[kind] {
			var b rbacv1.ClusterRoleBinding
			decode(t, o, &b)
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && (s.Namespace != movedNamespace || !has("ServiceAccount", s.Name)) {
					t.Errorf("%s: subject %s/%s: want a ServiceAccount of this build in %s", o, s.Namespace, s.Name, movedNamespace)
				}
			}
		}
	}
	// The workloads run as ServiceAccounts of this build.
	for _, kind := range []string{"Deployment", "DaemonSet"} {
		for _, o := range byKind[kind] {
			var spec corev1.PodSpec
			if kind == "Deployment" {
				var d appsv1.Deployment
				decode(t, o, &d)
				spec = d.Spec.Template.Spec
			} else {
				var d appsv1.DaemonSet
				decode(t, o, &d)
				spec = d.Spec.Template.Spec
			}
			if !has("ServiceAccount", spec.ServiceAccountName) {
				t.Errorf("%s: serviceAccountName %q is not in the build", o, spec.ServiceAccountName)
			}
		}
	}

	// The webhook configurations call the Service where it is and exclude that namespace.
	var caBundle []byte
	var secret corev1.Secret
	if s := byKind["Secret"]; len(s) == 1 && s[0].name == "podfence-webhook-tls" {
		decode(t, s[0], &secret)
		caBundle = secret.Data["ca.crt"]
	}
	if !has("Service", "podfence-webhook") {
		t.Errorf("no Service podfence-webhook")
	}
	var hooks []admissionregistrationv1.ValidatingWebhook // the fields both kinds share
	for _, o := range append(byKind["MutatingWebhookConfiguration"], byKind["ValidatingWebhookConfiguration"]...) {
		if o.kind == "MutatingWebhookConfiguration" {
			var m admissionregistrationv1.MutatingWebhookConfiguration
			decode(t, o, &m)
			for _, w := range m.Webhooks {
				hooks = append(hooks, admissionregistrationv1.ValidatingWebhook{Name: w.Name, ClientConfig: w.ClientConfig,
					NamespaceSelector: w.NamespaceSelector})
			}
		} else {
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			decode(t, o, &v)
			hooks = append(hooks, v.Webhooks...)
		}
		inject := o.annotations["cert-manager.io/inject-ca-from"]
		switch {
		case certManager && inject != movedNamespace+"/podfence-webhook":
			t.Errorf("%s: cert-manager.io/inject-ca-from %q, want %s/podfence-webhook", o, inject, movedNamespace)
		case !certManager && inject != "":
			t.Errorf("%s: cert-manager.io/inject-ca-from %q without cert-manager", o, inject)
		}
	}
	if len(hooks) != 3 {
		t.Errorf("%d webhook entries, want 3", len(hooks))
	}
	for _, w := range hooks {
		if s := w.ClientConfig.Service; s == nil || s.Namespace != movedNamespace || s.Name != "podfence-webhook" {
			t.Errorf("%s: service %+v, want %s/podfence-webhook", w.Name, s, movedNamespace)
		}
		if e := w.NamespaceSelector.MatchExpressions; len(e) != 1 || e[0].Key != "kubernetes.io/metadata.name" ||
			e[0].Operator != "NotIn" || !slices.Contains(e[0].Values, movedNamespace) {
			t.Errorf("%s: namespaceSelector %+v: want %s excluded", w.Name, w.NamespaceSelector, movedNamespace)
		}
		switch {
		case certManager && len(w.ClientConfig.CABundle) != 0:
			t.Errorf("%s: a caBundle with cert-manager (its cainjector fills it)", w.Name)
		case !certManager && (len(caBundle) == 0 || !bytes.Equal(w.ClientConfig.CABundle, caBundle)):
			t.Errorf("%s: caBundle is not the Secret's ca.crt", w.Name)
		}
	}

	// The serving certificate is for the Service's names in the new namespace.
	wantDNS := []string{"podfence-webhook." + movedNamespace + ".svc", "podfence-webhook." + movedNamespace + ".svc.cluster.local"}
	if certManager {
		if len(byKind["Secret"]) != 0 {
			t.Errorf("Secrets %v in the build: cert-manager writes podfence-webhook-tls", byKind["Secret"])
		}
		var found bool
		for _, o := range byKind["Certificate"] {
			var c struct {
				Spec struct {
					SecretName string   `json:"secretName"`
					DNSNames   []string `json:"dnsNames"`
					IssuerRef  struct{ Kind, Name string }
				}
			}
			if err := yaml.Unmarshal(o.raw, &c); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			if !has(c.Spec.IssuerRef.Kind, c.Spec.IssuerRef.Name) {
				t.Errorf("%s: issuer %s %s is not in the build", o, c.Spec.IssuerRef.Kind, c.Spec.IssuerRef.Name)
			}
			if o.name != "podfence-webhook" {
				continue
			}
			found = true
			if c.Spec.SecretName != "podfence-webhook-tls" {
				t.Errorf("%s: secretName %q, want the webhook's podfence-webhook-tls", o, c.Spec.SecretName)
			}
			for _, d := range wantDNS {
				if !slices.Contains(c.Spec.DNSNames, d) {
					t.Errorf("%s: dnsNames %v, want %s", o, c.Spec.DNSNames, d)
				}
			}
		}
		if !found {
			t.Errorf("no Certificate podfence-webhook")
		}
		return
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatalf("Secret podfence-webhook-tls: no PEM tls.crt")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range wantDNS {
		if !slices.Contains(cert.DNSNames, d) {
			t.Errorf("hack/certs.sh's certificate names %v, want %s", cert.DNSNames, d)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatal("ca.crt: no certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: wantDNS[0]}); err != nil {
		t.Errorf("the serving certificate does not verify against the caBundle for %s: %v", wantDNS[0], err)
	}
}
