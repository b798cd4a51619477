package webhook

import (
	"bytes"
	"fmt"

	"github.com/podfence/podfence/quantity"
)

// Bounds on JSON strings that read as quantities. Decoding a pod parses every resource
// quantity, and resource.ParseQuantity (and Quantity.Cmp) take time that grows with the
// number's length and exponentially with its exponent: "1e-999999999" does not finish.
// Nothing a pod needs comes near these bounds.
const (
	maxQuantityLen      = 1000
	maxQuantityExpDigit = 5
)

// checkQuantities refuses a body with a JSON string that reads as a number with more than
// maxQuantityLen characters or an exponent of more than maxQuantityExpDigit digits, before
// anything parses it. It looks at the text between each pair of quotes, so an escaped quote
// can only make it look at more text, never skip a string.
func checkQuantities(body []byte) error {
	for rest := body; ; {
		i := bytes.IndexByte(rest, '"')
		if i < 0 {
			return nil
		}
		rest = rest[i+1:]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return nil
		}
		s := rest[:j]
		rest = rest[j+1:]
		if costlyQuantity(s) {
			show := fmt.Sprintf("%q", s)
			if len(s) > 40 {
				show = fmt.Sprintf("%q…", s[:40])
			}
			return fmt.Errorf("the string %s (%d bytes) reads as a number too costly to parse as a quantity: want at most %d characters and an exponent of at most %d digits",
				show, len(s), maxQuantityLen, maxQuantityExpDigit)
		}
	}
}

// costlyQuantity applies the bounds above (quantity.Costly).
func costlyQuantity(s []byte) bool {
	return quantity.Costly(s, maxQuantityLen, maxQuantityExpDigit)
}
