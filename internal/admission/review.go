package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

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

// handler serves admission reviews; config returns the current Config (reloaded elsewhere).
type handler struct {
	config func() *Config
	log    *slog.Logger
}

// NewHandler serves POST /mutate and POST /validate (AdmissionReview v1 for pod CREATE) and
// GET /healthz. A request it cannot read as a review gets 400 with the reason as text.
func NewHandler(config func() *Config, log *slog.Logger) http.Handler {
	h := &handler{config: config, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathMutate, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, "mutate") })
	mux.HandleFunc("POST "+PathValidate, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, "validate") })
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	return mux
}

// badRequest is a request that is not a usable AdmissionReview.
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

func (h *handler) serve(w http.ResponseWriter, r *http.Request, kind string) {
	start := time.Now()
	log := h.log.With("webhook", kind, "remote", r.RemoteAddr)
	review, pod, err := readReview(w, r)
	if err != nil {
		var bad *badRequest
		if !errors.As(err, &bad) {
			bad = &badRequest{http.StatusBadRequest, err.Error()}
		}
		log.Warn("bad admission request", "status", bad.status, "error", bad.msg)
		http.Error(w, bad.msg, bad.status)
		return
	}
	req := review.Request
	log = log.With("uid", req.UID, "namespace", req.Namespace, "pod", podName(pod, req), "operation", req.Operation)
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	switch {
	case pod == nil:
		log.Warn("not a pod CREATE: allowed unchanged; check the webhook configuration's rules",
			"resource", req.Resource.String(), "subResource", req.SubResource)
	case kind == "mutate":
		h.mutate(resp, pod, log)
	default:
		if err := Validate(pod, h.config()); err != nil {
			deny(resp, err)
		}
	}
	log.Info("admission", "allowed", resp.Allowed, "reason", resultMessage(resp), "patchBytes", len(resp.Patch),
		"warnings", len(resp.Warnings), "duration", time.Since(start))
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	b, err := json.Marshal(out)
	if err != nil {
		log.Error("encode AdmissionReview", "error", err)
		http.Error(w, "encode AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func (h *handler) mutate(resp *admissionv1.AdmissionResponse, pod *corev1.Pod, log *slog.Logger) {
	ops, warnings, err := Mutate(pod, h.config())
	resp.Warnings = warnings
	switch {
	case err != nil:
		deny(resp, err)
	case len(ops) > 0:
		patch, err := json.Marshal(ops)
		if err != nil { // values are strings and string maps
			log.Error("encode JSON patch", "error", err)
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
		Reason: metav1.StatusReasonForbidden, Message: err.Error()}
}

func resultMessage(resp *admissionv1.AdmissionResponse) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

// readReview reads an AdmissionReview v1; pod is nil when it is not about a pod CREATE. JSON
// field names are case-sensitive, as the API server reads them, so that a patch's paths
// are those of the document the API server patches. The review holds no quantity (its
// object is raw JSON); the pod's quantity fields are bounded before the pod is decoded.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, *corev1.Pod, error) {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return nil, nil, &badRequest{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: want application/json",
			r.Header.Get("Content-Type"))}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, nil, &badRequest{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxReviewBytes)}
	} else if err != nil {
		return nil, nil, fmt.Errorf("read request body: %w", err)
	}
	var review admissionv1.AdmissionReview
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, nil, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	req := review.Request
	switch {
	case review.APIVersion != reviewAPIVersion || review.Kind != "AdmissionReview":
		return nil, nil, fmt.Errorf("apiVersion %q kind %q: want %s AdmissionReview (set admissionReviewVersions: [v1])",
			review.APIVersion, review.Kind, reviewAPIVersion)
	case req == nil:
		return nil, nil, errors.New("AdmissionReview has no request")
	case req.UID == "":
		return nil, nil, errors.New("AdmissionReview request has no uid")
	case req.Resource != metav1.GroupVersionResource{Version: "v1",
		Resource: "pods"} || req.SubResource != "" || req.Operation != admissionv1.Create:
		return &review, nil, nil
	case len(req.Object.Raw) == 0:
		return nil, nil, errors.New("AdmissionReview request for a pod CREATE has no object")
	}
	if err := checkPodQuantities(req.Object.Raw); err != nil {
		return nil, nil, err
	}
	var pod corev1.Pod
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &pod); err != nil {
		return nil, nil, fmt.Errorf("decode the request's pod: %w", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return &review, &pod, nil
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
