package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// pemOf encodes one PEM block.
func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// newChain makes a CA and a serving certificate for dns, signed by it; PEM.
func newChain(t *testing.T, dns string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caTmpl, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("CERTIFICATE", caDER), pemOf("CERTIFICATE", leafDER), pemOf("EC PRIVATE KEY", keyDER)
}

// webhookObjects is a Secret tls and a webhook configuration calling Service ns/svc with
// caBundle bundle (PEM).
func webhookObjects(t *testing.T, ca, cert, key, bundle string) []Object {
	t.Helper()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	return mustParse(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: ns}
data: {tls.crt: %s, tls.key: %s, ca.crt: %s}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: w}
webhooks:
  - name: a.example
    clientConfig:
      service: {namespace: ns, name: svc, path: /validate}
      caBundle: %s
`, b64(cert), b64(key), b64(ca), b64(bundle)))
}

func TestCheckWebhookTLS(t *testing.T) {
	ca, cert, key := newChain(t, "svc.ns.svc")
	otherCA, otherCert, otherKey := newChain(t, "svc.ns.svc")
	movedCA, movedCert, movedKey := newChain(t, "svc.other.svc")
	for _, tc := range []struct {
		name                  string
		ca, cert, key, bundle string
		err                   string
	}{
		{name: "a chain that holds", ca: ca, cert: cert, key: key, bundle: ca},
		{name: "caBundle of another CA", ca: ca, cert: cert, key: key, bundle: otherCA,
			err: "webhook a.example: caBundle is not the ca.crt of Secret tls"},
		{name: "certificate of another CA", ca: ca, cert: otherCert, key: otherKey, bundle: ca,
			err: "webhook a.example: the certificate of Secret tls for svc.ns.svc: x509: certificate signed by unknown authority"},
		{name: "key of another certificate", ca: ca, cert: cert, key: otherKey, bundle: ca,
			err: "secret tls: tls.crt and tls.key: tls: private key does not match public key"},
		{name: "certificate for another namespace", ca: movedCA, cert: movedCert, key: movedKey, bundle: movedCA,
			err: "webhook a.example: the certificate of Secret tls for svc.ns.svc: x509: certificate is valid for svc.other.svc, not svc.ns.svc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWebhookTLS(webhookObjects(t, tc.ca, tc.cert, tc.key, tc.bundle), "tls")
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
	if err := checkWebhookTLS(webhookObjects(t, ca, cert, key, ca), "other"); err == nil || err.Error() != "no secret other with data" {
		t.Errorf("no such Secret: %v", err)
	}
}

// TestCompareGeneratedTLS: with GeneratedTLS, two sides with different chains compare
// equal when each holds together, and not when one does not.
func TestCompareGeneratedTLS(t *testing.T) {
	ca1, cert1, key1 := newChain(t, "svc.ns.svc")
	ca2, cert2, key2 := newChain(t, "svc.ns.svc")
	opts := Options{GeneratedTLS: "tls"}
	if r := Compare(webhookObjects(t, ca1, cert1, key1, ca1), webhookObjects(t, ca2, cert2, key2, ca2), opts); !r.OK() {
		t.Errorf("two chains that hold: %+v", r)
	}
	r := Compare(webhookObjects(t, ca1, cert1, key1, ca1), webhookObjects(t, ca2, cert2, key2, ca1), opts)
	if r.OK() || len(r.TLS) != 1 || !strings.HasPrefix(r.TLS[0].Error(), "chart: webhook a.example: caBundle is not") {
		t.Errorf("the chart's caBundle of another CA: %+v", r)
	}
	if r := Compare(webhookObjects(t, ca1, cert1, key1, ca1), webhookObjects(t, ca2, cert2, key2, ca2), Options{}); r.OK() {
		t.Errorf("two chains without GeneratedTLS compare equal")
	}
}
