package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// MaxReviewBytes bounds a request body: the API server's own limit on an object is 3 MiB.
const MaxReviewBytes = 4 << 20

// reviewAPIVersion is the only AdmissionReview version served.
const reviewAPIVersion = "admission.k8s.io/v1"

// Paths served by NewHandler.
const (
	PathMutate   = "/mutate"
	PathValidate = "/validate"
	PathHealthz  = "/healthz"
)

// Bounds on what a review writes: a log line's strings, and a response's message and
// warnings (the API server cuts warnings to 256 characters once they pass 4 KiB).
const (
	maxLogName      = 253 // a uid, namespace, name or resource in a log line
	maxLogReason    = 512 // a refusal or an error in a log line
	maxMessageBytes = 16 << 10
	maxWarningBytes = 512
	maxWarnings     = 16
)

// handler serves admission reviews; config returns the current Config (reloaded elsewhere).
type handler struct {
	config  func() *Config
	log     *slog.Logger
	limits  Limits
	slots   *limiter
	busy    rate.Sometimes // logs refusals for want of room at most once a second
	refused atomic.Int64   // refusals for want of room since the last such log line

	// Test hooks, nil in production: workHook is called with +1 when a review's work starts
	// (it holds its room) and -1 once it has ended and given its room back; stopHook when the
	// work stops before step because the request's context ended.
	workHook func(delta int)
	stopHook func(step string)
}

// NewHandler is NewLimitedHandler with the default Limits.
func NewHandler(config func() *Config, log *slog.Logger) http.Handler {
	return NewLimitedHandler(config, log, Limits{})
}

// NewLimitedHandler serves POST /mutate and POST /validate (AdmissionReview v1 for pod
// CREATE) within lim, and GET /healthz. A request it cannot read as a review gets 400 with
// the reason as text; one that finds no room in time 429, and one whose request ends
// (the API server's timeout, the timeout query parameter, the client gone) 503.
func NewLimitedHandler(config func() *Config, log *slog.Logger, lim Limits) http.Handler {
	return newHandler(config, log, lim).mux()
}

func newHandler(config func() *Config, log *slog.Logger, lim Limits) *handler {
	lim = lim.withDefaults()
	return &handler{config: config, log: log, limits: lim, slots: newLimiter(lim.capacity()),
		busy: rate.Sometimes{Interval: time.Second}}
}

func (h *handler) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathMutate, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, "mutate") })
	mux.HandleFunc("POST "+PathValidate, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, "validate") })
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

// httpError is an answer other than a review: a request that is not a usable
// AdmissionReview, or a review not made.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// stopError is work stopped before step because the request's context ended.
type stopError struct {
	step string
	err  error
}

func (e *stopError) Error() string { return fmt.Sprintf("review stopped before %s: %v", e.step, e.err) }
func (e *stopError) Unwrap() error { return e.err }

// checkpoint returns a stopError when ctx has ended.
func checkpoint(ctx context.Context, step string) error {
	if err := ctx.Err(); err != nil {
		return &stopError{step, err}
	}
	return nil
}

// outcome is a review's answer, an AdmissionReview or an error, and its log summary.
type outcome struct {
	body  []byte // the AdmissionReview
	err   error
	attrs []any // the request and the decision, bounded
}

// serve answers one review. Its work runs on a goroutine that holds the review's room
// until it ends, so the room bounds memory even when the answer has gone: when the
// request's context ends first, the answer is 503 at once and the work stops at its next
// step.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, kind string) {
	start := time.Now()
	log := h.log.With("webhook", kind, "remote", r.RemoteAddr)
	timeout := h.reviewTimeout(r)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := checkRequest(r); err != nil {
		h.answerError(w, log, err, "bodyBytes", r.ContentLength)
		return
	}
	weight := h.limits.weight(r.ContentLength)
	if err := h.slots.acquire(ctx, weight, h.limits.Wait); err != nil {
		h.answerNoRoom(w, log, err)
		return
	}
	deadline, _ := ctx.Deadline()
	_ = http.NewResponseController(w).SetReadDeadline(deadline) // a slow body ends with the review
	body, err := readBody(w, r)
	if err != nil {
		h.slots.release(weight)
		h.answerError(w, log, err, "bodyBytes", r.ContentLength)
		return
	}
	size := len(body)
	done := make(chan outcome, 1)
	go h.work(ctx, log, kind, body, weight, done) // body is the work's from here: it drops it once decoded
	select {
	case o := <-done:
		attrs := append(o.attrs, "bodyBytes", size, "duration", time.Since(start))
		if o.err != nil {
			h.answerError(w, log, o.err, attrs...)
			return
		}
		log.Info("admission", append(attrs, "responseBytes", len(o.body))...)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(o.body)
	case <-ctx.Done():
		err := fmt.Errorf("review not finished within %s: %w", timeout, context.Cause(ctx))
		h.answerError(w, log, err, "bodyBytes", size, "duration", time.Since(start))
	}
}

// reviewTimeout is Limits.Timeout, or the shorter timeout the API server puts in the URL
// (timeout=10s).
func (h *handler) reviewTimeout(r *http.Request) time.Duration {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 && d < h.limits.Timeout {
		return d
	}
	return h.limits.Timeout
}

// answerError answers err as text with its status and logs it, both bounded.
func (h *handler) answerError(w http.ResponseWriter, log *slog.Logger, err error, attrs ...any) {
	var bad *httpError
	var stop *stopError
	switch {
	case errors.As(err, &bad):
	case errors.As(err, &stop), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		bad = &httpError{http.StatusServiceUnavailable, err.Error()}
	default:
		bad = &httpError{http.StatusBadRequest, err.Error()}
	}
	msg := clip(bad.msg, maxMessageBytes)
	log.Warn("admission request not reviewed", append(attrs, "status", bad.status, "error", clip(bad.msg, maxLogReason))...)
	http.Error(w, msg, bad.status)
}

// answerNoRoom answers a review that got no room: 429 when it waited Limits.Wait (the API
// server's failurePolicy decides), 503 when its request ended first.
func (h *handler) answerNoRoom(w http.ResponseWriter, log *slog.Logger, err error) {
	if !errors.Is(err, errBusy) {
		h.answerError(w, log, fmt.Errorf("review not started: %w", err))
		return
	}
	h.refused.Add(1)
	h.busy.Do(func() {
		used, waiting := h.slots.state()
		log.Warn("admission requests refused: busy", "refused", h.refused.Swap(0), "inFlightBytes", used, "waiting", waiting,
			"maxInFlight", h.limits.MaxInFlight, "maxInFlightBytes", h.limits.MaxInFlightBytes, "wait", h.limits.Wait)
	})
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("webhook busy: no room for this review within %s (at most %d reviews and %d bytes of requests in flight)",
		h.limits.Wait, h.limits.MaxInFlight, h.limits.MaxInFlightBytes), http.StatusTooManyRequests)
}

// work reviews body, sends the outcome on done, then gives back the review's room. A panic
// is an internal error: it must not end the webhook, nor keep the room.
func (h *handler) work(ctx context.Context, log *slog.Logger, kind string, body []byte, weight int64, done chan<- outcome) {
	if h.workHook != nil {
		h.workHook(1)
		defer h.workHook(-1)
	}
	defer h.slots.release(weight)
	defer func() {
		if p := recover(); p != nil {
			log.Error("review failed", "panic", clip(fmt.Sprint(p), maxLogReason), "stack", clip(string(debug.Stack()), 4<<10))
			done <- outcome{err: &httpError{http.StatusInternalServerError, "internal error: the review failed"}}
		}
	}()
	o := h.decide(ctx, log, kind, body)
	var stop *stopError
	if h.stopHook != nil && errors.As(o.err, &stop) {
		h.stopHook(stop.step)
	}
	done <- o
}

func (h *handler) decide(ctx context.Context, log *slog.Logger, kind string, body []byte) outcome {
	review, pod, err := decodeReview(ctx, body)
	if err != nil {
		return outcome{err: err}
	}
	req := review.Request
	o := outcome{attrs: []any{"uid", clip(string(req.UID), maxLogName), "namespace", clip(req.Namespace, maxLogName),
		"name", clip(podName(pod, req), maxLogName), "kind", clip(req.Kind.Kind, maxLogName), "operation", req.Operation}}
	if err := checkpoint(ctx, kind); err != nil {
		return outcome{err: err, attrs: o.attrs}
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	switch {
	case pod == nil:
		log.Warn("not a pod CREATE: allowed unchanged; check the webhook configuration's rules", append(o.attrs,
			"resource", clip(req.Resource.String(), maxLogName), "subResource", clip(req.SubResource, maxLogName))...)
	case kind == "mutate":
		h.mutate(resp, pod)
	default:
		resp.Warnings = Warnings(pod)
		if err := Validate(pod, h.config()); err != nil {
			deny(resp, err)
		}
	}
	boundResponse(resp)
	o.attrs = append(o.attrs, "allowed", resp.Allowed, "reason", clip(resultMessage(resp), maxLogReason), "patchBytes", len(resp.Patch),
		"warnings", len(resp.Warnings))
	if err := checkpoint(ctx, "encode"); err != nil {
		return outcome{err: err, attrs: o.attrs}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		return outcome{err: &httpError{http.StatusInternalServerError, "encode AdmissionReview: " + err.Error()}, attrs: o.attrs}
	}
	o.body = b
	return o
}

func (h *handler) mutate(resp *admissionv1.AdmissionResponse, pod *corev1.Pod) {
	ops, warnings, err := Mutate(pod, h.config())
	resp.Warnings = warnings
	switch {
	case err != nil:
		deny(resp, err)
	case len(ops) > 0:
		patch, err := json.Marshal(ops)
		if err != nil { // values are strings and string maps
			deny(resp, fmt.Errorf("encode JSON patch: %w", err))
			return
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
}

func deny(resp *admissionv1.AdmissionResponse, err error) {
	resp.Allowed = false
	resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: message(err, maxMessageBytes)}
}

// joinType is the type of errors.Join's errors.
var joinType = reflect.TypeOf(errors.Join(errors.New("")))

// message is err.Error() cut to about n bytes (clip). Errors joined by errors.Join, one per
// container and rule, are written one by one until n: a pod with thousands of containers
// does not build a message of megabytes first.
func message(err error, n int) string {
	var b strings.Builder
	var write func(err error) bool
	write = func(err error) bool {
		if j, ok := err.(interface{ Unwrap() []error }); ok && reflect.TypeOf(err) == joinType {
			for i, e := range j.Unwrap() {
				if i > 0 {
					b.WriteByte('\n')
				}
				if !write(e) {
					return false
				}
			}
			return true
		}
		b.WriteString(clip(err.Error(), n+1))
		return b.Len() <= n
	}
	if write(err) {
		return b.String()
	}
	return prefix(b.String(), n) + "… (more left out)"
}

// boundResponse cuts the refusal's message and the warnings, which quote the pod's own
// values, to what a user reads.
func boundResponse(resp *admissionv1.AdmissionResponse) {
	if resp.Result != nil {
		resp.Result.Message = clip(resp.Result.Message, maxMessageBytes)
	}
	if n := len(resp.Warnings); n > maxWarnings {
		resp.Warnings = append(resp.Warnings[:maxWarnings-1:maxWarnings-1], strconv.Itoa(n-maxWarnings+1)+" more warnings left out")
	}
	for i, w := range resp.Warnings {
		resp.Warnings[i] = clip(w, maxWarningBytes)
	}
}

func resultMessage(resp *admissionv1.AdmissionResponse) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

// checkRequest refuses, before the body is read, a request that is not JSON or is too large.
func checkRequest(r *http.Request) error {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %s: want application/json",
			clip(strconv.Quote(r.Header.Get("Content-Type")), maxLogName))}
	}
	if r.ContentLength > MaxReviewBytes {
		return tooLarge()
	}
	return nil
}

func tooLarge() error {
	return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxReviewBytes)}
}

// readBody reads the body once into a buffer of its length, when the request gives it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, MaxReviewBytes)
	if r.ContentLength >= 0 {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, bodyError(err)
		}
		return b, nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, bodyError(err)
	}
	return b, nil
}

// bodyError is a failure to read a body: too large (413), too slow for the review's time
// (408), or cut short (400).
func bodyError(err error) error {
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		return tooLarge()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &httpError{http.StatusRequestTimeout, "read request body: " + err.Error()}
	}
	return fmt.Errorf("read request body: %w", err)
}

// readReview reads a request as serve does, without its limits.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, *corev1.Pod, error) {
	if err := checkRequest(r); err != nil {
		return nil, nil, err
	}
	body, err := readBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	return decodeReview(r.Context(), body)
}

// decodeReview decodes an AdmissionReview v1; pod is nil when it is not about a pod CREATE.
// JSON field names are case-sensitive, as the API server reads them, so that a patch's
// paths are those of the document the API server patches. The review holds no quantity
// (its object is raw JSON); the pod's quantity fields are bounded before the pod is
// decoded. The review returned keeps no raw object: the pod is all that is left of it.
func decodeReview(ctx context.Context, body []byte) (*admissionv1.AdmissionReview, *corev1.Pod, error) {
	if err := checkpoint(ctx, "decoding the review"); err != nil {
		return nil, nil, err
	}
	var review admissionv1.AdmissionReview
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, nil, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	req := review.Request
	switch {
	case review.APIVersion != reviewAPIVersion || review.Kind != "AdmissionReview":
		return nil, nil, fmt.Errorf("apiVersion %q kind %q: want %s AdmissionReview (set admissionReviewVersions: [v1])",
			clip(review.APIVersion, maxLogName), clip(review.Kind, maxLogName), reviewAPIVersion)
	case req == nil:
		return nil, nil, errors.New("AdmissionReview has no request")
	case req.UID == "":
		return nil, nil, errors.New("AdmissionReview request has no uid")
	}
	raw := req.Object.Raw
	req.Object.Raw, req.OldObject.Raw = nil, nil
	switch {
	case req.Resource != metav1.GroupVersionResource{Version: "v1",
		Resource: "pods"} || req.SubResource != "" || req.Operation != admissionv1.Create:
		return &review, nil, nil
	case len(raw) == 0:
		return nil, nil, errors.New("AdmissionReview request for a pod CREATE has no object")
	}
	if n := countValues(raw, maxPodValues); n > maxPodValues {
		return nil, nil, fmt.Errorf("the request's pod has over %d JSON values (objects, arrays and their elements): "+
			"it would take more memory to decode than the webhook gives a review", maxPodValues)
	}
	if err := checkpoint(ctx, "checking quantities"); err != nil {
		return nil, nil, err
	}
	if err := checkPodQuantities(raw); err != nil {
		return nil, nil, err
	}
	if err := checkpoint(ctx, "decoding the pod"); err != nil {
		return nil, nil, err
	}
	var pod corev1.Pod
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
		return nil, nil, fmt.Errorf("decode the request's pod: %w", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return &review, &pod, nil
}

// maxPodValues bounds the objects, arrays and their elements in a pod's JSON. Each decodes
// into up to some hundred bytes, whatever its text: an element of "containers" is a
// corev1.Container of 408 bytes, also when it is "{}" or "null", and Mutate and Validate
// copy them. A review of such a pod of 5,000 values peaks at about 12 MB of heap; real pods
// have hundreds of values (the review in testdata 45; twenty containers of fifty env vars
// each about 3,000).
const maxPodValues = 5_000

// countValues counts, in JSON text, the objects, arrays and elements after the first of
// each, that is '{', '[' and ',' outside strings; it stops once past limit.
func countValues(doc []byte, limit int) int {
	n := 0
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{', '[', ',':
			if n++; n > limit {
				return n
			}
		case '"': // skip the string, escapes included
			for i++; i < len(doc) && doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
		}
	}
	return n
}

// podName names the pod in logs: its name, or its generateName prefix before the API server
// fills in the rest.
func podName(pod *corev1.Pod, req *admissionv1.AdmissionRequest) string {
	switch {
	case pod == nil:
		return req.Name
	case pod.Name != "":
		return pod.Name
	}
	return pod.GenerateName
}
