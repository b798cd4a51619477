package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
)

// checkWebhookTLS checks that the webhook's TLS material in objs holds together: Secret
// secretName has tls.crt, tls.key (a pair) and ca.crt; every entry of the webhook
// configurations carries ca.crt as its caBundle; and the certificate verifies against it
// for the name the API server calls, <service>.<namespace>.svc.
func checkWebhookTLS(objs []Object, secretName string) error {
	var data map[string]any
	var hooks []map[string]any
	for _, o := range objs {
		switch {
		case o.Key.Group == "" && o.Key.Kind == "Secret" && o.Key.Name == secretName:
			data, _ = o.Body["data"].(map[string]any)
		case o.Key.Group == "admissionregistration.k8s.io" &&
			(o.Key.Kind == "MutatingWebhookConfiguration" || o.Key.Kind == "ValidatingWebhookConfiguration"):
			list, _ := o.Body["webhooks"].([]any)
			for _, h := range list {
				if m, ok := h.(map[string]any); ok {
					hooks = append(hooks, m)
				}
			}
		}
	}
	if data == nil {
		return fmt.Errorf("no secret %s with data", secretName)
	}
	field := func(k string) ([]byte, error) {
		s, _ := data[k].(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("secret %s: data[%s]: want base64 PEM (%v)", secretName, k, err)
		}
		return b, nil
	}
	certPEM, err := field("tls.crt")
	if err != nil {
		return err
	}
	keyPEM, err := field("tls.key")
	if err != nil {
		return err
	}
	caPEM, err := field("ca.crt")
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("secret %s: tls.crt and tls.key: %w", secretName, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("secret %s: tls.crt: %w", secretName, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("secret %s: ca.crt: no PEM certificate", secretName)
	}
	if len(hooks) == 0 {
		return errors.New("no webhook entries")
	}
	for _, h := range hooks {
		name, _ := h["name"].(string)
		cc, _ := h["clientConfig"].(map[string]any)
		bundle, _ := cc["caBundle"].(string)
		b, err := base64.StdEncoding.DecodeString(bundle)
		if err != nil || !bytes.Equal(b, caPEM) {
			return fmt.Errorf("webhook %s: caBundle is not the ca.crt of Secret %s", name, secretName)
		}
		svc, _ := cc["service"].(map[string]any)
		svcName, _ := svc["name"].(string)
		svcNS, _ := svc["namespace"].(string)
		dns := svcName + "." + svcNS + ".svc"
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: dns, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return fmt.Errorf("webhook %s: the certificate of Secret %s for %s: %w", name, secretName, dns, err)
		}
	}
	return nil
}

// maskTLS replaces the data of Secret secretName and every caBundle by a placeholder: made
// independently, they differ by design.
func maskTLS(objs []Object, secretName string) {
	const placeholder = "<generated>"
	for _, o := range objs {
		switch {
		case o.Key.Group == "" && o.Key.Kind == "Secret" && o.Key.Name == secretName:
			if data, ok := o.Body["data"].(map[string]any); ok {
				for k := range data {
					data[k] = placeholder
				}
			}
		case o.Key.Group == "admissionregistration.k8s.io":
			list, _ := o.Body["webhooks"].([]any)
			for _, h := range list {
				m, _ := h.(map[string]any)
				if cc, ok := m["clientConfig"].(map[string]any); ok {
					if _, has := cc["caBundle"]; has {
						cc["caBundle"] = placeholder
					}
				}
			}
		}
	}
}
