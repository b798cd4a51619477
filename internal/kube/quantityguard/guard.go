// Package quantityguard refuses JSON documents whose resource.Quantity fields are too costly
// to parse, before anything decodes them. resource.ParseQuantity (which Quantity.UnmarshalJSON
// calls) takes time that grows with the number's length and exponentially with its
// exponent: "1e-999999999" does not return. A Shape, derived by reflection from the Go type
// a document decodes into, says which JSON paths are quantities; Check streams the document
// and looks at those alone, so that a uid or label that reads as a number is left alone.
package quantityguard

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/podfence/podfence/internal/quantity"
)

// Bounds on a quantity's text. At the bounds ParseQuantity takes microseconds
// (BenchmarkParseAtBound); nothing Kubernetes writes comes near them: canonical quantities
// have exponents of at most two digits ("1e18", "1e-9").
const (
	MaxLen            = 1000 // characters of the number
	MaxExponentDigits = 3    // significant digits of a decimal exponent
)

// Error is a quantity field too costly to parse.
type Error struct {
	Doc  string // what the document is, as the message names it: "pod", "ExtenderArgs"
	Path string // the field, as in spec.containers[0].resources.limits["cpu"]
	Text []byte // the quantity's text, as Quantity.UnmarshalJSON reads it
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s field %s: the quantity %s is too costly to parse: want at most %d characters and an exponent of at most %d digits",
		e.Doc, e.Path, Cut(e.Text, 40), MaxLen, MaxExponentDigits)
}

// Check returns an *Error for the first quantity field of doc, a JSON document to be decoded
// into the type of s, that is beyond the bounds; what names the document in the message. Any
// other error is the JSON reader's: doc is not JSON, and decoding it would fail too.
func Check(doc []byte, s *Shape, what string) error {
	return Walk(doc, s, func(path string, text []byte) error {
		if Costly(text) {
			return &Error{Doc: what, Path: path, Text: text}
		}
		return nil
	})
}

// Costly applies the bounds (quantity.Costly) to text as Quantity.UnmarshalJSON hands it to
// resource.ParseQuantity: trimmed of Unicode spaces, where quantity.Costly trims ASCII ones.
func Costly(text []byte) bool {
	return quantity.Costly(bytes.TrimSpace(text), MaxLen, MaxExponentDigits)
}

// Cut quotes b, cut to about n bytes without splitting a UTF-8 sequence.
func Cut(b []byte, n int) string {
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:n], len(b))
}
