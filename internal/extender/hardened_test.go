package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/testwait"
)

// testHandler serves the extender API over the cache of server(): a, b, old published.
func testHandler(t testing.TB) http.Handler {
	t.Helper()
	c := NewCache(coresched.ByNamespace, quiet())
	c.SetNode(testNode("a", "supported", 16, 32))
	c.SetNode(testNode("b", "supported", 16, 32))
	c.SetNode(testNode("old", "unsupported", 8, 16))
	c.SetPod(testPod("shop", "w1", "a", 500, coresched.LabelGroup, "web"))
	return NewHandler(c, coresched.ByNamespace, quiet())
}

func jsonPost(path string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// serveBounded serves one request, failing the test (testwait.Deadline) when there is no
// answer: a quantity that got through to resource.ParseQuantity may never return.
func serveBounded(t testing.TB, h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		done <- rec
	}()
	return testwait.Receive(t, done, "an answer to "+r.Method+" "+r.URL.Path)
}

const bounds = "is too costly to parse: want at most 1000 characters and an exponent of at most 3 digits"

// TestCostlyQuantityRefused: a quantity too costly to parse in the pod, as a string or a
// bare number, is refused with 400 naming the field, at once. In a node's capacity it is
// never parsed (of a Node only its name, label and annotation are decoded): the request is
// answered at once.
func TestCostlyQuantityRefused(t *testing.T) {
	h := testHandler(t)
	nodes := func(capacity string) string {
		return `"Nodes":{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"status":{"capacity":` + capacity + `}}]}`
	}
	podWith := func(cpu string) string {
		return `{"metadata":{"name":"p","namespace":"shop"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":` + cpu + `}}}]}}`
	}
	const limit = `Pod.spec.containers[0].resources.limits["cpu"]`
	for _, tc := range []struct{ name, body, path, text string }{
		{"pod, string", `{"Pod":` + podWith(`"1e-999999999"`) + `,"NodeNames":["a"]}`, limit, "1e-999999999"},
		{"pod, bare number", `{"Pod":` + podWith(`1e-999999999`) + `,"NodeNames":["a"]}`, limit, "1e-999999999"},
		{"pod, 5 exponent digits", `{"Pod":` + podWith(`"1e-99999"`) + `,"NodeNames":["a"]}`, limit, "1e-99999"},
		{"pod, overhead", `{"Pod":{"spec":{"overhead":{"memory":"1E+999999999"}}},"NodeNames":["a"]}`,
			`Pod.spec.overhead["memory"]`, "1E+999999999"},
		{"node capacity, string", `{"Pod":` + webPod + `,` + nodes(`{"cpu":"1e-999999999"}`) + `}`, "", ""},
		{"node capacity, bare number", `{"Pod":` + webPod + `,` + nodes(`{"memory":1e-999999999}`) + `}`, "", ""},
	} {
		for _, path := range []string{"/filter", "/prioritize"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				rec := serveBounded(t, h, jsonPost(path, []byte(tc.body)))
				if tc.path == "" {
					if rec.Code != http.StatusOK {
						t.Errorf("status %d, body %s; want 200", rec.Code, rec.Body)
					}
					return
				}
				want := fmt.Sprintf("ExtenderArgs field %s: the quantity %q %s", tc.path, tc.text, bounds)
				if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusBadRequest || got != want {
					t.Errorf("status %d, body\n%s\nwant 400,\n%s", rec.Code, got, want)
				}
			})
		}
	}
}

// TestTrailingData: anything but spaces after the ExtenderArgs is refused with 400.
func TestTrailingData(t *testing.T) {
	h := testHandler(t)
	args := `{"Pod":` + webPod + `,"NodeNames":["a"]}`
	for _, body := range []string{args + " x", args + args, args + `,"1e-999999999"`, args + "\n]"} {
		for _, path := range []string{"/filter", "/prioritize"} {
			rec := serveBounded(t, h, jsonPost(path, []byte(body)))
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "data after the JSON value") {
				t.Errorf("POST %s ...%q: %d %s, want 400 data after the JSON value", path, body[len(args):], rec.Code, rec.Body)
			}
		}
	}
	if rec := serveBounded(t, h, jsonPost("/filter", []byte(args+" \n\t"))); rec.Code != http.StatusOK {
		t.Errorf("POST /filter with trailing spaces: %d %s, want 200", rec.Code, rec.Body)
	}
}

// TestContentType: a body that is not declared application/json is refused with 415.
func TestContentType(t *testing.T) {
	h := testHandler(t)
	body := []byte(`{"Pod":` + webPod + `,"NodeNames":["a"]}`)
	for ct, want := range map[string]int{
		"application/json":                  http.StatusOK,
		"application/json; charset=utf-8":   http.StatusOK,
		"text/plain":                        http.StatusUnsupportedMediaType,
		"application/x-www-form-urlencoded": http.StatusUnsupportedMediaType,
		"":                                  http.StatusUnsupportedMediaType,
		"application/json;;":                http.StatusUnsupportedMediaType,
	} {
		for _, path := range []string{"/filter", "/prioritize"} {
			r := jsonPost(path, body)
			r.Header.Set("Content-Type", ct)
			rec := serveBounded(t, h, r)
			if rec.Code != want {
				t.Errorf("POST %s, Content-Type %q: %d %s, want %d", path, ct, rec.Code, rec.Body, want)
			}
			if want != http.StatusOK && !strings.Contains(rec.Body.String(), fmt.Sprintf("content type %q: want application/json", ct)) {
				t.Errorf("POST %s, Content-Type %q: body %s", path, ct, rec.Body)
			}
		}
	}
}

// TestFilterReplyBounded: a 78 KB pod refused on 1,000 nodes gets a reply of at most 1 KB per
// node beyond the names it was sent, whatever in the pod is large: an unusable group label
// (whose error quotes it), the uid of an exclusive pod (its group) or an annotation.
func TestFilterReplyBounded(t *testing.T) {
	h := testHandler(t)
	names := make([]string, 1000)
	for i := range names {
		names[i] = nodeName(i) // unknown to the cache: refused to a pod asking for a group
	}
	big := strings.Repeat("x", 66_000) // with the names, a request of 78 KB
	for name, meta := range map[string]string{
		"group label":   `"labels":{"podfence.io/core-sched-group":"` + big + `"}`,
		"policy label":  `"labels":{"podfence.io/core-sched-policy":"` + big + `"}`,
		"exclusive uid": `"uid":"` + big + `","labels":{"podfence.io/core-sched-policy":"exclusive"}`,
		"annotation":    `"labels":{"podfence.io/core-sched-group":"web"},"annotations":{"a":"` + big + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			body, err := json.Marshal(map[string]any{"NodeNames": names,
				"Pod": json.RawMessage(`{"metadata":{"name":"p","namespace":"shop",` + meta + `}}`)})
			if err != nil {
				t.Fatal(err)
			}
			rec := serveBounded(t, h, jsonPost("/filter", body))
			var res extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("POST /filter: %d %.300s (%v)", rec.Code, rec.Body, err)
			}
			if len(res.FailedAndUnresolvableNodes) != len(names) {
				t.Errorf("%d nodes refused, want %d", len(res.FailedAndUnresolvableNodes), len(names))
			}
			limit := len(body) + 1024*len(names)
			t.Logf("request %d bytes, reply %d bytes for %d nodes", len(body), rec.Body.Len(), len(names))
			if rec.Body.Len() > limit {
				t.Errorf("reply of %d bytes for a request of %d bytes and %d nodes, want at most %d", rec.Body.Len(), len(body),
					len(names), limit)
			}
		})
	}
}

// TestConcurrencyBound: requests beyond the bound are refused at once with 503 while the
// bound's worth are in flight (each reading its body); once one ends, the next is served.
func TestConcurrencyBound(t *testing.T) {
	h := testHandler(t)
	body := []byte(`{"Pod":` + webPod + `,"NodeNames":["a"]}`)
	type inFlight struct {
		w    *io.PipeWriter
		done chan *httptest.ResponseRecorder
	}
	var held []inFlight
	defer func() {
		for _, f := range held {
			f.w.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	deadline := time.NewTimer(time.Until(testwait.Deadline(t)))
	defer deadline.Stop()
	refusedAt := -1
	for i := 0; i < 64 && refusedAt < 0; i++ {
		pr, pw := io.Pipe()
		r := jsonPost("/filter", nil)
		r.Body, r.ContentLength = pr, -1
		f := inFlight{pw, make(chan *httptest.ResponseRecorder, 1)}
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			f.done <- rec
		}()
		reading := make(chan error, 1)
		go func() { _, err := pw.Write(body[:1]); reading <- err }() // returns once the handler reads
		select {
		case <-reading:
			held = append(held, f)
		case rec := <-f.done:
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("request %d: %d %s, want 503 with Retry-After", i+1, rec.Code, rec.Body)
			}
			pw.Close()
			refusedAt = i
		case <-deadline.C:
			t.Fatalf("request %d: neither read nor answered", i+1)
		}
	}
	if refusedAt != maxInFlight {
		t.Fatalf("%d requests in flight, the next refused: %v; want the bound, %d", len(held), refusedAt >= 0, maxInFlight)
	}
	f := held[0]
	held = held[1:]
	if _, err := f.w.Write(body[1:]); err != nil {
		t.Fatal(err)
	}
	f.w.Close()
	if rec := <-f.done; rec.Code != http.StatusOK {
		t.Fatalf("a request in flight: %d %s", rec.Code, rec.Body)
	}
	if rec := serveBounded(t, h, jsonPost("/filter", body)); rec.Code != http.StatusOK {
		t.Errorf("with a slot free again: %d %s, want 200", rec.Code, rec.Body)
	}
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	if rec := serveBounded(t, h, r); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz while busy: %d", rec.Code)
	}
}

// TestRunRefusesPlainHTTPOffLoopback: without TLS, Run refuses an address other than
// loopback before anything else.
func TestRunRefusesPlainHTTPOffLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "example.com:0"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := Run(ctx, Config{Client: fake.NewClientset(), Address: addr, DefaultGroup: coresched.ByNamespace}, quiet())
		cancel()
		want := fmt.Sprintf("listen address %q: want a loopback address, or HTTPS (--tls-cert and --tls-key), or --insecure-listen "+
			"to serve plain HTTP there", addr)
		if err == nil || err.Error() != want {
			t.Errorf("Run on %s = %v, want %s", addr, err, want)
		}
	}
}

// TestRunRefusesFIFOCertificate: a named pipe (nothing writes to it) as --tls-cert is
// refused at once with an error naming it.
func TestRunRefusesFIFOCertificate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tls.crt")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Config{Client: fake.NewClientset(), Address: "127.0.0.1:0", DefaultGroup: coresched.ByNamespace,
		CertFile: p, KeyFile: p}, quiet())
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
		t.Errorf("Run with a FIFO certificate: %v, want an error naming %s, not a regular file", err, p)
	}
}
