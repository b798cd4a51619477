package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podfence/podfence/internal/testwait"
)

func TestLimitsWeight(t *testing.T) {
	l := Limits{MaxInFlight: 4, MaxInFlightBytes: 1000}.withDefaults()
	for n, want := range map[int64]int64{-1: 1000, 0: 250, 10: 250, 250: 250, 600: 600, 1000: 1000, 5000: 1000} {
		if got := l.weight(n); got != want {
			t.Errorf("weight(%d) = %d, want %d", n, got, want)
		}
	}
	// 14 bytes in units of 3 for 5 reviews: 5 small ones fit in 15, not 6.
	l = Limits{MaxInFlight: 5, MaxInFlightBytes: 14}.withDefaults()
	if u, c := l.weight(0), l.capacity(); u != 3 || c != 15 || l.weight(14) != 14 || l.weight(-1) != 15 {
		t.Errorf("weight(0) %d, capacity %d, weight(14) %d, weight(-1) %d; want 3, 15, 14, 15", u, c, l.weight(14), l.weight(-1))
	}
	if l := (Limits{MaxInFlight: 1 << 30, MaxInFlightBytes: 1 << 62}).withDefaults(); l.capacity() <= 0 || l.capacity() > 1<<41 {
		t.Errorf("capacity %d for the largest limits", l.capacity())
	}
	if l := (Limits{Timeout: time.Hour}).withDefaults(); l.Timeout != readTimeout {
		t.Errorf("Timeout %s for 1h, want the read timeout %s", l.Timeout, readTimeout)
	}
	if d := (Limits{}).withDefaults(); d.MaxInFlight != DefaultMaxInFlight || d.MaxInFlightBytes != DefaultMaxInFlightBytes ||
		d.Wait != DefaultInFlightWait || d.Timeout != DefaultReviewTimeout {
		t.Errorf("defaults %+v", d)
	}
}

// TestLimiter: weights are granted in arrival order while they fit; a waiter that gives up,
// at its wait or its context's end, lets those behind it in.
func TestLimiter(t *testing.T) {
	l := newLimiter(10)
	ctx := t.Context()
	if err := l.acquire(ctx, 6, time.Hour); err != nil {
		t.Fatal(err)
	}
	// 5 does not fit next to 6: it waits, and 1, which would fit, waits behind it. Each
	// waiter answers on its own channel: two that end together answer in either order.
	wait := func(name string, n int64, ctx context.Context, wait time.Duration) <-chan string {
		got := make(chan string, 1)
		go func() {
			err := l.acquire(ctx, n, wait)
			got <- fmt.Sprintf("%s %v", name, err)
		}()
		return got
	}
	cctx, cancel := context.WithCancel(ctx)
	five := wait("five", 5, cctx, time.Hour)
	testwait.Eventually(t, "five waiting", func() bool { _, n := l.state(); return n == 1 })
	one := wait("one", 1, ctx, time.Hour)
	testwait.Eventually(t, "one waiting", func() bool { _, n := l.state(); return n == 2 })
	cancel() // five gives up: one, now first, fits
	if g := testwait.Receive(t, five, "five to give up"); g != "five context canceled" {
		t.Fatalf("%s, want five context canceled", g)
	}
	if g := testwait.Receive(t, one, "one to get in"); g != "one <nil>" {
		t.Fatalf("%s, want one <nil>", g)
	}
	if used, n := l.state(); used != 7 || n != 0 {
		t.Fatalf("used %d, waiting %d; want 7, 0", used, n)
	}
	// 4 does not fit next to 7 before its wait ends.
	if g := testwait.Receive(t, wait("four", 4, ctx, time.Millisecond), "four busy"); g != "four busy" {
		t.Fatalf("%s, want four busy", g)
	}
	nine := wait("nine", 9, ctx, time.Hour)
	testwait.Eventually(t, "nine waiting", func() bool { _, n := l.state(); return n == 1 })
	l.release(6) // 9 next to the 1 still held fills the limiter exactly: it fits
	if g := testwait.Receive(t, nine, "nine <nil>"); g != "nine <nil>" {
		t.Fatalf("%s, want nine <nil>", g)
	}
	if used, n := l.state(); used != 10 || n != 0 {
		t.Fatalf("used %d, waiting %d; want 10, 0", used, n)
	}
	l.release(1)
	l.release(9)
	if used, n := l.state(); used != 0 || n != 0 {
		t.Fatalf("used %d, waiting %d; want 0, 0", used, n)
	}
}

// gate is a Config source that holds each review inside Mutate or Validate until it is
// opened, and counts the reviews inside at once.
type gate struct {
	cfg          *Config
	open         chan struct{}
	inside, peak atomic.Int64
	calls        atomic.Int64
	once         sync.Once
	entered      chan struct{} // gets a value as each review comes in
}

func newGate(cfg *Config) *gate {
	return &gate{cfg: cfg, open: make(chan struct{}), entered: make(chan struct{}, 1000)}
}

func (g *gate) config() *Config {
	raise(&g.peak, g.inside.Add(1))
	g.calls.Add(1)
	g.entered <- struct{}{}
	<-g.open
	g.inside.Add(-1)
	return g.cfg
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// raise sets peak to n when n is higher.
func raise(peak *atomic.Int64, n int64) {
	for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
	}
}

// bigReview is a pod CREATE of about size bytes: one large annotation, such as
// kubectl.kubernetes.io/last-applied-configuration, and a pool resource.
func bigReview(t testing.TB, size int) []byte {
	pod := testPod("telco", "label:tier=dataplane", ctr("app", "podfence.io/exclusive_dp=2"))
	pod.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", size)}
	return reviewJSON(t, pod)
}

// liveHeap is the heap in use after two collections: the second frees what sync.Pools (such
// as encoding/json's buffers) kept through the first.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestConcurrentLargeReviews sends 20 reviews of 2.9 MB at once to a handler that works on
// 4 at a time: 4 are in Mutate while 16 wait, unread, and the live heap holds 4 decoded pods
// and little else. Then all are answered.
func TestConcurrentLargeReviews(t *testing.T) {
	const clients, inFlight = 20, 4
	body := bigReview(t, 2_900_000)
	g := newGate(testConfig(t))
	h := untimed(newHandler(g.config, discardLog(), Limits{MaxInFlight: inFlight, MaxInFlightBytes: 64 << 20}))
	var working, peakWorking atomic.Int64
	onWork(h, func(d int) { raise(&peakWorking, working.Add(int64(d))) })
	srv := h.mux()
	reqs := make([]*http.Request, clients)
	for i := range reqs {
		reqs[i] = jsonRequest(PathMutate, body)
	}
	base := liveHeap()
	recs := make([]*httptest.ResponseRecorder, clients)
	var wg sync.WaitGroup
	for i := range reqs {
		recs[i] = httptest.NewRecorder()
		wg.Go(func() { srv.ServeHTTP(recs[i], reqs[i]) })
	}
	t.Cleanup(g.release)
	// Every review is either in Mutate or waiting for room.
	testwait.Eventually(t, "every review inside or waiting", func() bool { return g.inside.Load()+int64(waiting(h)) == clients })
	live := int64(liveHeap()) - int64(base)
	if in := g.inside.Load(); in != inFlight {
		t.Errorf("%d reviews in Mutate at once, want %d", in, inFlight)
	}
	// A decoded pod holds its 2.9 MB annotation; nothing else of a review's size is left.
	if bound := int64(inFlight*2*len(body) + 8<<20); live > bound {
		t.Errorf("live heap +%.1f MB with %d reviews of %.1f MB in Mutate, want at most %.1f MB", float64(live)/1e6, g.inside.Load(),
			float64(len(body))/1e6, float64(bound)/1e6)
	}
	t.Logf("live heap +%.1f MB with %d reviews of %.1f MB in Mutate and %d waiting", float64(live)/1e6, g.inside.Load(),
		float64(len(body))/1e6, waiting(h))
	g.release()
	wg.Wait()
	for i, rec := range recs {
		if rec.Code != http.StatusOK {
			t.Errorf("review %d: status %d: %.300s", i, rec.Code, rec.Body)
		}
	}
	if p := g.peak.Load(); p > inFlight {
		t.Errorf("%d reviews in Mutate at once, want at most %d", p, inFlight)
	}
	if p := peakWorking.Load(); p > inFlight {
		t.Errorf("%d reviews worked on at once, want at most %d", p, inFlight)
	}
}

// TestLargeReviewsByBytes: reviews count their bodies' bytes; 2.9 MB reviews in 8 MB run
// two at a time, whatever MaxInFlight.
func TestLargeReviewsByBytes(t *testing.T) {
	const clients = 6
	body := bigReview(t, 2_900_000)
	g := newGate(testConfig(t))
	h := untimed(newHandler(g.config, discardLog(), Limits{MaxInFlight: 16, MaxInFlightBytes: 8 << 20}))
	srv := h.mux()
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := range clients {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, jsonRequest(PathValidate, body))
			codes[i] = rec.Code
		})
	}
	t.Cleanup(g.release)
	testwait.Eventually(t, "every review inside or waiting", func() bool { return g.inside.Load()+int64(waiting(h)) == clients })
	if in := g.inside.Load(); in != 2 {
		t.Errorf("%d reviews of %d bytes inside with room for 8 MiB, want 2", in, len(body))
	}
	g.release()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("review %d: status %d", i, c)
		}
	}
}

// TestBusy: a review that finds no room within Limits.Wait gets 429 with the reason; one
// whose request ends while it waits gets 503. Neither reads its body. In a synctest
// bubble, time passes only when every goroutine waits: the first review holds its room
// however long the others take.
func TestBusy(t *testing.T) { synctest.Test(t, testBusy) }

func testBusy(t *testing.T) {
	g := newGate(testConfig(t))
	h := newHandler(g.config, discardLog(), Limits{MaxInFlight: 1, MaxInFlightBytes: 1 << 20, Wait: 20 * time.Millisecond})
	srv := h.mux()
	body := reviewJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))
	first := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, jsonRequest(PathMutate, body))
		first <- rec.Code
	}()
	t.Cleanup(g.release)
	<-g.entered

	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, jsonRequest(PathMutate, body))
	want := "webhook busy: no room for this review within 20ms (at most 1 reviews and 1048576 bytes of requests in flight)"
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusTooManyRequests || got != want ||
		rec.Header().Get("Retry-After") != "1" {
		t.Errorf("status %d, Retry-After %q, body %q\nwant 429, 1, %q", rec.Code, rec.Header().Get("Retry-After"), got, want)
	}

	ctx, cancel := context.WithCancel(t.Context())
	req := jsonRequest(PathMutate, body).WithContext(ctx)
	answered := make(chan *httptest.ResponseRecorder, 1)
	h.limits.Wait = time.Hour
	go func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		answered <- rec
	}()
	synctest.Wait()
	if n := waiting(h); n != 1 {
		t.Fatalf("%d reviews waiting, want 1", n)
	}
	cancel()
	rec = <-answered
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusServiceUnavailable ||
		got != "review not started: context canceled" {
		t.Errorf("status %d, body %q; want 503, review not started: context canceled", rec.Code, got)
	}
	g.release()
	if c := <-first; c != http.StatusOK {
		t.Errorf("first review: status %d", c)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("%d reviews got to Mutate, want the first only", n)
	}
}

// answer serves req on srv and returns its answer, failing the test (testwait.Deadline)
// when there is none, as when it waits for a review it sent that is still held.
func answer(t *testing.T, srv http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		done <- rec
	}()
	return testwait.Receive(t, done, "the answer to "+req.URL.String())
}

// TestRequestEndStopsWork: when a request ends (client gone, or the timeout the API server
// puts in the URL) while its review is in Mutate, the answer is 503 at once; the work then
// stops before its next step and gives its room back. In a synctest bubble: the timeout,
// 50 ms, ends the review however long the machine takes to get it to Mutate.
func TestRequestEndStopsWork(t *testing.T) {
	body := reviewJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))
	for _, tc := range []struct {
		name string
		path string
		end  func(cancel context.CancelFunc)
		msg  string
	}{
		{name: "client gone", path: PathMutate, end: func(cancel context.CancelFunc) { cancel() },
			msg: "review not finished within 10s: context canceled"},
		{name: "the review's timeout", path: PathMutate + "?timeout=50ms", end: func(context.CancelFunc) {},
			msg: "review not finished within 50ms: context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGate(testConfig(t))
				h := newHandler(g.config, discardLog(), Limits{})
				stopped := make(chan string, 1)
				onStopped(h, func(step string) { stopped <- step })
				ended := make(chan struct{})
				onWork(h, func(d int) {
					if d < 0 {
						close(ended)
					}
				})
				t.Cleanup(g.release)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go func() {
					<-g.entered
					tc.end(cancel)
				}()
				rec := answer(t, h.mux(), jsonRequest(tc.path, body).WithContext(ctx))
				if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusServiceUnavailable || got != tc.msg {
					t.Errorf("status %d, body %q; want 503, %q", rec.Code, got, tc.msg)
				}
				if n := g.inside.Load(); n != 1 {
					t.Fatalf("%d reviews in Mutate, want the one answered still there", n)
				}
				g.release()
				if step := testwait.Receive(t, stopped, "the work to stop"); step != "encode" {
					t.Errorf("work stopped before %q, want encode", step)
				}
				testwait.Receive(t, ended, "the work to end")
				if used := held(h); used != 0 {
					t.Errorf("%d bytes still held once the work ended", used)
				}
			})
		})
	}
}

// TestTimeoutParameter: a timeout in the URL that is no positive duration is ignored, and
// one longer than Limits.Timeout is cut to it: the review runs and is answered (in a
// synctest bubble, where the time it takes does not count).
func TestTimeoutParameter(t *testing.T) { synctest.Test(t, testTimeoutParameter) }

func testTimeoutParameter(t *testing.T) {
	h := NewHandler(func() *Config { return testConfig(t) }, discardLog())
	body := reviewJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))
	for _, timeout := range []string{"0s", "-1s", "soon", "1h"} {
		rec := answer(t, h, jsonRequest(PathMutate+"?timeout="+timeout, body))
		if rec.Code != http.StatusOK {
			t.Errorf("timeout=%s: status %d, body %q; want 200", timeout, rec.Code, rec.Body)
		}
	}
}

// TestEndedRequestNotReviewed: a request that ends while its body is read is not decoded.
func TestEndedRequestNotReviewed(t *testing.T) {
	g := newGate(testConfig(t))
	g.release()
	h := untimed(newHandler(g.config, discardLog(), Limits{}))
	stopped := make(chan string, 1)
	onStopped(h, func(step string) { stopped <- step })
	ctx, cancel := context.WithCancel(t.Context())
	body := reviewJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))
	req := jsonRequest(PathMutate, nil).WithContext(ctx)
	req.Body, req.ContentLength = &cancelAtEOF{r: strings.NewReader(string(body)), cancel: cancel}, int64(len(body))
	rec := answer(t, h.mux(), req)
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusServiceUnavailable || !strings.HasSuffix(got, "context canceled") {
		t.Errorf("status %d, body %q; want 503 ending in context canceled", rec.Code, got)
	}
	if step := testwait.Receive(t, stopped, "the work to stop"); step != "decoding the review" {
		t.Errorf("work stopped before %q, want decoding the review", step)
	}
	if n := g.calls.Load(); n != 0 {
		t.Errorf("%d reviews got to Mutate, want none", n)
	}
}

// cancelAtEOF reads r and cancels when it is read to the end: the client goes away just
// after sending its body.
type cancelAtEOF struct {
	r      *strings.Reader
	cancel context.CancelFunc
}

func (c *cancelAtEOF) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.r.Len() == 0 {
		c.cancel()
	}
	return n, err
}

func (c *cancelAtEOF) Close() error { return nil }

// TestReviewPanics: a panic in a review is a 500, which keeps neither the webhook nor the
// review's room.
func TestReviewPanics(t *testing.T) {
	h := untimed(newHandler(func() *Config { panic("boom") }, discardLog(), Limits{}))
	ended := make(chan struct{})
	onWork(h, func(d int) {
		if d < 0 {
			close(ended)
		}
	})
	rec := answer(t, h.mux(), jsonRequest(PathValidate, reviewJSON(t, testPod("telco", ctr("app")))))
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusInternalServerError || got != "internal error: the review failed" {
		t.Errorf("status %d, body %q; want 500, internal error: the review failed", rec.Code, got)
	}
	testwait.Receive(t, ended, "the work to end")
	if used := held(h); used != 0 {
		t.Errorf("%d bytes still held after a panic", used)
	}
}

// TestLogBounded: reviews of about 3 MB whose pod name, refusal, error or resource is
// megabytes long log a few hundred bytes each, and answer at most a few KB.
func TestLogBounded(t *testing.T) {
	const size = 3_000_000
	bad := testPod("telco", ctr("app", "podfence.io/exclusive_dp=1"))
	bad.Name = strings.Repeat("n", size/10)
	for i := range 700 { // each refused, its name quoted: a refusal of 2.8 MB
		bad.Spec.Containers = append(bad.Spec.Containers, ctr(fmt.Sprintf("c%04d%s", i, strings.Repeat("c", 3800)),
			"podfence.io/shared_caas=100m"))
	}
	refused := reviewJSON(t, bad)
	tooLong := strings.Replace(string(bigReview(t, 100)), `"spec":{`, `"spec":{"priority":`+strings.Repeat("9", size)+`,`, 1)
	otherResource := strings.Replace(string(bigReview(t, 100)), `"resource":"pods"`, `"resource":"`+strings.Repeat("r", size)+`"`, 1)
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"refused", refused, http.StatusOK},
		{"bad request", []byte(tooLong), http.StatusBadRequest},
		{"other resource", []byte(otherResource), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.body) < 2_900_000 {
				t.Fatalf("review of %d bytes, want about 3 MB", len(tc.body))
			}
			for _, path := range []string{PathMutate, PathValidate} {
				var log strings.Builder
				h := testHandler(func() *Config { return testConfig(t) }, slogJSON(&log))
				rec := answer(t, h, jsonRequest(path, tc.body))
				t.Logf("%s: status %d, %d bytes of log, %d bytes of answer", path, rec.Code, log.Len(), rec.Body.Len())
				if rec.Code != tc.status {
					t.Errorf("%s: status %d, want %d: %.300s", path, rec.Code, tc.status, rec.Body)
				}
				if log.Len() > 4<<10 || log.Len() == 0 {
					t.Errorf("%s: %d bytes of log for a review of %d bytes, want 1 to 4096:\n%.2000s", path, log.Len(), len(tc.body), log.String())
				}
				if rec.Body.Len() > 2*maxMessageBytes {
					t.Errorf("%s: answer of %d bytes, want at most %d", path, rec.Body.Len(), 2*maxMessageBytes)
				}
			}
		})
	}
}

func TestMessageBounded(t *testing.T) {
	var errs []error
	for i := range 1000 {
		errs = append(errs, fmt.Errorf("error %04d", i))
	}
	joined := errors.Join(errors.Join(errs[:500]...), errors.Join(errs[500:]...))
	if got := message(joined, 1<<20); got != joined.Error() {
		t.Errorf("message under the bound differs from Error()")
	}
	got := message(joined, 100)
	if want := joined.Error()[:100] + "… (more left out)"; got != want {
		t.Errorf("message %q\nwant    %q", got, want)
	}
	if got := message(errors.New("é"+strings.Repeat("x", 200)), 1); got != "… (more left out)" {
		t.Errorf("message cut inside a rune: %q", got)
	}
	// A message of n bytes exactly is whole; one of n+1 is cut to n and marked.
	for _, tc := range []struct{ text, want string }{
		{strings.Repeat("x", 100), strings.Repeat("x", 100)},
		{strings.Repeat("x", 101), strings.Repeat("x", 100) + "… (more left out)"},
	} {
		if got := message(errors.New(tc.text), 100); got != tc.want {
			t.Errorf("message of %d bytes cut to 100: %d bytes ending %q, want %q", len(tc.text), len(got), got[max(0, len(got)-20):],
				tc.want[len(tc.want)-20:])
		}
	}
	// Only errors.Join's errors are written one by one; any other error, one that wraps
	// several included, reads as its Error().
	two := fmt.Errorf("pool %w; epc %w", errors.New("a"), errors.New("b"))
	if got := message(errors.Join(two, errors.New("c")), 1000); got != "pool a; epc b\nc" {
		t.Errorf("message %q, want %q", got, "pool a; epc b\nc")
	}
	// Bytes that start no rune, however many, are cut away whole, never read before the text.
	if got := message(errors.New("\x80\x80\x80\x80"), 2); got != "… (more left out)" {
		t.Errorf("message of continuation bytes: %q", got)
	}
}

// TestBoundResponse: refusals and warnings quote the pod; a response bounds them.
func TestBoundResponse(t *testing.T) {
	r := &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: strings.Repeat("m", 1<<20)}}
	for i := range 40 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%02d %s", i, strings.Repeat("w", 1000)))
	}
	boundResponse(r)
	if len(r.Warnings) != maxWarnings || r.Warnings[maxWarnings-1] != "25 more warnings left out" {
		t.Fatalf("%d warnings, last %q", len(r.Warnings), r.Warnings[len(r.Warnings)-1])
	}
	b, _ := json.Marshal(r)
	if len(b) > maxMessageBytes+maxWarnings*(maxWarningBytes+40) {
		t.Errorf("response of %d bytes", len(b))
	}
	// maxWarnings warnings are all kept; one more, and the last two become a count.
	r = &admissionv1.AdmissionResponse{}
	for i := range maxWarnings {
		r.Warnings = append(r.Warnings, fmt.Sprint("warning ", i))
	}
	if boundResponse(r); len(r.Warnings) != maxWarnings || r.Warnings[maxWarnings-1] != "warning 15" {
		t.Errorf("%d warnings: %d kept, the last %q; want all", maxWarnings, len(r.Warnings), r.Warnings[len(r.Warnings)-1])
	}
	r.Warnings = append(r.Warnings, "warning 16")
	if boundResponse(r); len(r.Warnings) != maxWarnings || r.Warnings[maxWarnings-1] != "2 more warnings left out" {
		t.Errorf("%d warnings: %d kept, the last %q; want %d, the last a count of 2", maxWarnings+1, len(r.Warnings),
			r.Warnings[len(r.Warnings)-1], maxWarnings)
	}
	// At the bounds exactly, nothing is cut; one byte more, and the text is cut and marked.
	atBound, over := strings.Repeat("w", maxWarningBytes), strings.Repeat("w", maxWarningBytes+1)
	r = &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: strings.Repeat("m", maxMessageBytes)},
		Warnings: []string{atBound, over}}
	boundResponse(r)
	if len(r.Result.Message) != maxMessageBytes || r.Warnings[0] != atBound {
		t.Errorf("message of %d bytes, first warning %.20q…: want them whole at the bound", len(r.Result.Message), r.Warnings[0])
	}
	if want := atBound + "… (513 bytes)"; r.Warnings[1] != want {
		t.Errorf("warning one byte over the bound: %d bytes ending %q, want %d bytes ending %q", len(r.Warnings[1]),
			r.Warnings[1][max(0, len(r.Warnings[1])-20):], len(want), want[len(want)-20:])
	}
}

// noLimit is a review's timeout and wait for room in tests whose subject is not a review's
// time: longer than any run of the tests. A test asserts what a review answers, not how
// fast a loaded machine works it out; the tests of these limits run in synctest bubbles.
const noLimit = 24 * time.Hour

// untimed gives h's reviews noLimit to finish and to wait for room.
func untimed(h *handler) *handler {
	h.limits.Timeout, h.limits.Wait = noLimit, noLimit
	return h
}

// testHandler is NewHandler with untimed reviews.
func testHandler(config func() *Config, log *slog.Logger) http.Handler {
	return untimed(newHandler(config, log, Limits{})).mux()
}

// Test access to the handler's hooks and room.
func onWork(h *handler, f func(delta int))      { h.workHook = f }
func onStopped(h *handler, f func(step string)) { h.stopHook = f }
func waiting(h *handler) int                    { _, n := h.slots.state(); return n }
func held(h *handler) int64                     { used, _ := h.slots.state(); return used }

func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// BenchmarkLargeReview: what one review allocates, for a 2.9 MB pod with one large
// annotation and for a small pod of maxPodValues "null" containers, each a Container.
func BenchmarkLargeReview(b *testing.B) {
	cfg := testConfig(b)
	h := testHandler(func() *Config { return cfg }, discardLog())
	dense := strings.Replace(string(reviewJSON(b, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))), `"containers":[`,
		`"containers":[`+strings.Repeat("null,", maxPodValues-20), 1)
	for name, body := range map[string][]byte{"annotation-2.9MB": bigReview(b, 2_900_000), "null-containers": []byte(dense)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, jsonRequest(PathValidate, body))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %.300s", rec.Code, rec.Body)
				}
			}
		})
	}
}
