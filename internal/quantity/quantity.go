// Package quantity parses Kubernetes quantities ("500m", "2", "1Mi") from untrusted text,
// such as pod annotations, within bounds. resource.ParseQuantity and the arithmetic on its
// result take time that grows with the exponent: "1e-999999999" never returns. Nothing a
// pod asks for comes near the bounds, and the agent parses annotations while the runtime
// waits to create a container, so it must not hang.
package quantity

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds of Parse.
const (
	MaxLen            = 64 // characters
	MaxExponentDigits = 3  // digits of a decimal exponent ("1e999")
)

// Parse is resource.ParseQuantity for text within MaxLen characters and MaxExponentDigits
// exponent digits.
func Parse(s string) (resource.Quantity, error) {
	if len(s) > MaxLen {
		return resource.Quantity{}, fmt.Errorf("quantity of %d characters: want at most %d", len(s), MaxLen)
	}
	if Costly([]byte(s), MaxLen, MaxExponentDigits) {
		return resource.Quantity{}, fmt.Errorf("quantity %q has an exponent of more than %d digits", s, MaxExponentDigits)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("quantity %q: %w", s, err)
	}
	return q, nil
}

// Costly reports whether s, less surrounding spaces, reads as a number ([+-]digits and
// dots, then an optional e/E exponent) with more than maxLen mantissa characters or more
// than maxExpDigits significant exponent digits.
func Costly(s []byte, maxLen, maxExpDigits int) bool {
	s = trimSpace(s)
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	mantissa := 0
	for mantissa < len(s) && (s[mantissa] >= '0' && s[mantissa] <= '9' || s[mantissa] == '.') {
		mantissa++
	}
	if mantissa == 0 {
		return false
	}
	if mantissa > maxLen {
		return true
	}
	exp := s[mantissa:]
	if len(exp) == 0 || exp[0] != 'e' && exp[0] != 'E' {
		return false
	}
	exp = exp[1:]
	if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	for len(exp) > 0 && exp[0] == '0' {
		exp = exp[1:]
	}
	digits := 0
	for digits < len(exp) && exp[digits] >= '0' && exp[digits] <= '9' {
		digits++
	}
	return digits > maxExpDigits
}

func trimSpace(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
