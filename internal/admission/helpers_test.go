package admission

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podfence/podfence/internal/cpu/pools"
)

// Two pool configs for two kinds of node, and the profiles of the tests.
const (
	poolsDP = `pools:
  exclusive_dp: {cpus: "4-7"}
  shared_caas: {cpus: "2-3"}
  default: {cpus: "0-1"}
nodeSelector: {nodeType: dp}
`
	poolsRT = `pools:
  exclusive_rt: {cpus: "2-3"}
  shared_web: {cpus: "1"}
  default: {cpus: "0"}
nodeSelector: {nodeType: rt}
`
	profilesYAML = `- name: telco-dataplane
  namespaces: [telco]
  podSelector: {matchLabels: {tier: dataplane}}
  group: dataplane
- name: batch
  namespaces: [batch]
  policy: exclusive
- namespaces: [tenant-a, tenant-a-dev]
  podSelector:
    matchExpressions: [{key: tier, operator: NotIn, values: [debug]}]
  group: tenant-a
`
)

// testConfig is the Config of the tests: both pool configs and the profiles.
func testConfig(t testing.TB) *Config {
	t.Helper()
	var cfg Config
	for i, y := range []string{poolsDP, poolsRT} {
		pc, err := pools.Parse("poolconfig-"+string(rune('a'+i))+".yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Pools = append(cfg.Pools, pc)
	}
	ps, err := ParseProfiles("profiles.yaml", []byte(profilesYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Profiles = ps
	return &cfg
}

// ctr builds a container; each res is "name=quantity" for a limit, "req name=quantity"
// for a request.
func ctr(name string, res ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example/app:1"}
	for _, r := range res {
		list := &c.Resources.Limits
		if rest, ok := strings.CutPrefix(r, "req "); ok {
			list, r = &c.Resources.Requests, rest
		}
		n, q, _ := strings.Cut(r, "=")
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[corev1.ResourceName(n)] = resource.MustParse(q)
	}
	return c
}

// testPod builds a pod in namespace ns; kv pairs are "annotation:key=value",
// "label:key=value", "init" to make the next containers init containers, or "sidecar" to
// make them native sidecars (init containers with restartPolicy Always).
func testPod(ns string, items ...any) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
	init, sidecar := false, false
	for _, it := range items {
		switch v := it.(type) {
		case corev1.Container:
			if sidecar {
				always := corev1.ContainerRestartPolicyAlways
				v.RestartPolicy = &always
			}
			if init {
				p.Spec.InitContainers = append(p.Spec.InitContainers, v)
			} else {
				p.Spec.Containers = append(p.Spec.Containers, v)
			}
		case string:
			kind, kv, _ := strings.Cut(v, ":")
			k, val, _ := strings.Cut(kv, "=")
			switch kind {
			case "init":
				init, sidecar = true, false
			case "sidecar":
				init, sidecar = true, true
			case "annotation":
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations[k] = val
			case "label":
				if p.Labels == nil {
					p.Labels = map[string]string{}
				}
				p.Labels[k] = val
			}
		}
	}
	return p
}

// reviewJSON wraps a pod into an AdmissionReview for a pod CREATE, as the API server sends it.
func reviewJSON(t testing.TB, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return reviewOf(t, "705ab4f5-6393-11e8-b7cc-42010a800002", pod.Namespace, raw)
}

// reviewOf wraps a pod's JSON into an AdmissionReview for a pod CREATE with request uid uid.
func reviewOf(t testing.TB, uid types.UID, ns string, podJSON []byte) []byte {
	t.Helper()
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: uid,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns, Operation: admissionv1.Create},
	}
	r.Request.Object.Raw = podJSON
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTestServer serves testHandler with cfg over HTTPS.
func newTestServer(t testing.TB, cfg *Config) *httptest.Server {
	srv := httptest.NewTLSServer(testHandler(func() *Config { return cfg }, discardLog()))
	t.Cleanup(srv.Close)
	return srv
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// post sends body to path and returns the status and body; a 200 body is decoded as a review.
func post(t testing.TB, srv *httptest.Server, path string, body []byte) (int, string, *admissionv1.AdmissionResponse) {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b), nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("response %s: %v", b, err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("response is not an AdmissionReview v1 with a response: %s", b)
	}
	return resp.StatusCode, string(b), out.Response
}

// applyPatch applies a JSON patch to the pod and returns the result.
func applyPatch(t testing.TB, pod *corev1.Pod, patch []byte) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(patch) > 0 {
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			t.Fatalf("decode patch %s: %v", patch, err)
		}
		if doc, err = p.Apply(doc); err != nil {
			t.Fatalf("apply patch %s: %v", patch, err)
		}
	}
	var out corev1.Pod
	if err := json.Unmarshal(doc, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1, valid for an hour, and its
// key into dir.
func writeCert(t testing.TB, dir, cn string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	return writeCertUntil(t, dir, cn, time.Now().Add(time.Hour))
}

// writeCertUntil is writeCert for a certificate that expires at notAfter.
func writeCertUntil(t testing.TB, dir, cn string, notAfter time.Time) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY",
		Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}
