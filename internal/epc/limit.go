// Package epc decides a container's SGX enclave page cache (EPC) limit: it reads the limit
// from the pod's annotations and says how a node can enforce it through the cgroup misc
// controller, whose misc.max file takes the line "sgx_epc <bytes>"
// (https://docs.kernel.org/admin-guide/cgroup-v2.html#misc). It is pure: no files, no
// logging; package epc/enforce applies its decisions.
//
// Annotations, read on the pod in this order (the first one present wins):
//
//	epc-limit.nri.io/container.<container-name>: "<bytes>"
//	epc-limit.nri.io/pod:                        "<bytes>"
//	epc-limit.nri.io:                            "<bytes>"
//
// A value is a whole number of bytes, decimal ("1048576") or a Kubernetes quantity ("1Mi",
// "64M"). Zero means no limit, so "0" on a container overrides a pod-wide value.
package epc

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podfence/podfence/internal/quantity"
	"github.com/podfence/podfence/podapi"
)

// The limit annotations, nri-plugins' sgx-epc compatible. The admission webhook turns a
// container's sgx.intel.com/epc limit into AnnotationContainerPrefix+<container>.
const (
	AnnotationContainerPrefix = "epc-limit.nri.io/container."
	AnnotationPod             = "epc-limit.nri.io/pod"
	Annotation                = "epc-limit.nri.io"
)

// Resource is the misc controller's name for the SGX EPC.
const Resource = "sgx_epc"

const wantLimit = `want a whole number of bytes, decimal ("1048576") or a Kubernetes quantity ("1Mi", "64M"); 0 means no limit`

// maxValueLen bounds the work spent on one value; a byte count needs far fewer characters.
const maxValueLen = 64

// Limit is a cap on a container's SGX EPC in bytes. It is an immutable value; the zero
// Limit means no limit. Its text form (String) is the decimal byte count, which ParseLimit
// reads back.
type Limit struct {
	bytes uint64
}

// Bytes returns the limit of n bytes; Bytes(0) is no limit.
func Bytes(n uint64) Limit { return Limit{bytes: n} }

// Bytes returns the cap in bytes, 0 when there is none.
func (l Limit) Bytes() uint64 { return l.bytes }

// IsSet reports whether l caps anything.
func (l Limit) IsSet() bool { return l.bytes > 0 }

// String returns the decimal byte count ("0" for no limit).
func (l Limit) String() string { return strconv.FormatUint(l.bytes, 10) }

// MiscMax returns the misc.max line that sets l: "sgx_epc <bytes>".
func (l Limit) MiscMax() string { return Resource + " " + l.String() }

// ParseLimit reads a limit value: decimal bytes or a Kubernetes quantity that is a whole,
// non-negative number of bytes. Surrounding white space is ignored.
func ParseLimit(text string) (Limit, error) {
	s := strings.TrimSpace(text)
	if len(s) > maxValueLen {
		return Limit{}, fmt.Errorf("value is %d bytes long: %s", len(s), wantLimit)
	}
	if s == "" {
		return Limit{}, errors.New("empty value: " + wantLimit)
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return Bytes(n), nil
	}
	q, err := quantity.Parse(s)
	if err != nil || !strings.ContainsAny(s, "0123456789") { // ParseQuantity takes "Mi" for 0

		return Limit{}, fmt.Errorf("not a number of bytes: %s", wantLimit)
	}
	if q.Sign() < 0 {
		return Limit{}, errors.New("negative: " + wantLimit)
	}
	if q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.DecimalSI)) >= 0 { // ParseQuantity clamps here
		return Limit{}, errors.New("too large for a quantity (decimal bytes go up to 2^64-1): " + wantLimit)
	}
	n := q.Value() // rounded up: compare to see whether it was whole
	if q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) != 0 {
		return Limit{}, errors.New("not a whole number of bytes: " + wantLimit)
	}
	return Bytes(uint64(n)), nil
}

// Resolve returns the limit that pod annotations give the container named container, and
// the annotation it came from ("" when none is present). A bad value is an *podapi.AnnotationError.
func Resolve(annotations map[string]string, container string) (Limit, string, error) {
	for _, key := range []string{AnnotationContainerPrefix + container, AnnotationPod, Annotation} {
		v, ok := annotations[key]
		if !ok {
			continue
		}
		l, err := ParseLimit(v)
		if err != nil {
			return Limit{}, key, &podapi.AnnotationError{Key: key, Value: v, Err: err}
		}
		return l, key, nil
	}
	return Limit{}, "", nil
}
