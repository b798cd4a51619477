package admission

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/kube/quantityguard"
)

// Bounds on the quantity fields of a pod (quantityguard): decoding a pod parses each with
// resource.ParseQuantity, whose cost grows with the number's length and exponentially with
// its exponent.
const (
	maxQuantityLen      = quantityguard.MaxLen
	maxQuantityExpDigit = quantityguard.MaxExponentDigits
)

// checkPodQuantities refuses a pod, in JSON, with a quantity field beyond the bounds, before
// anything parses it. Only quantity fields are looked at: a uid, label or env value that
// reads as a number is no quantity.
func checkPodQuantities(podJSON []byte) error {
	err := quantityguard.Check(podJSON, quantityguard.For[corev1.Pod](), "pod")
	if qe := (*quantityguard.Error)(nil); err != nil && !errors.As(err, &qe) {
		return fmt.Errorf("read the quantities of the request's pod: %w", err)
	}
	return err
}

// costlyQuantity applies the bounds to text as Quantity.UnmarshalJSON reads it.
func costlyQuantity(text []byte) bool { return quantityguard.Costly(text) }
