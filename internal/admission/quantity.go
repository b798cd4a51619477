package admission

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/podfence/podfence/internal/quantity"
)

// Bounds on the quantity fields of a pod. Decoding a pod parses each with
// resource.ParseQuantity, which (like Quantity.Cmp) takes time that grows with the
// number's length and exponentially with its exponent: "1e-999999999" does not finish.
// Nothing a pod needs comes near these bounds.
const (
	maxQuantityLen      = 1000
	maxQuantityExpDigit = 5
)

// quantityError is a quantity field too costly to parse.
type quantityError struct {
	path string
	text []byte
}

func (e *quantityError) Error() string {
	return fmt.Sprintf("pod field %s: the quantity %s is too costly to parse: want at most %d characters and an exponent of at most %d digits",
		e.path, cut(e.text, 40), maxQuantityLen, maxQuantityExpDigit)
}

// checkPodQuantities refuses a pod, in JSON, with a quantity field beyond the bounds
// above, before anything parses it. Only quantity fields are looked at: a uid, label or
// env value that reads as a number is no quantity.
func checkPodQuantities(podJSON []byte) error {
	err := walkQuantities(podJSON, podShape(), func(path string, text []byte) error {
		if costlyQuantity(text) {
			return &quantityError{path, text}
		}
		return nil
	})
	if qe := (*quantityError)(nil); err != nil && !errors.As(err, &qe) {
		return fmt.Errorf("read the quantities of the request's pod: %w", err)
	}
	return err
}

// costlyQuantity applies the bounds above (quantity.Costly) to text as
// Quantity.UnmarshalJSON hands it to resource.ParseQuantity: trimmed of Unicode spaces,
// where quantity.Costly trims ASCII ones only.
func costlyQuantity(text []byte) bool {
	return quantity.Costly(bytes.TrimSpace(text), maxQuantityLen, maxQuantityExpDigit)
}

// cut quotes b, cut to about n bytes without splitting a UTF-8 sequence.
func cut(b []byte, n int) string {
	if len(b) <= n {
		return fmt.Sprintf("%q", b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:n], len(b))
}
