package quantityguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxKeyInPath cuts a map key in a path: more than a resource name can be (a 253-byte
// prefix, a slash and a 63-byte name), so that only a key no decoding accepts is cut.
const maxKeyInPath = 320

// Walk calls visit with the path and text of every value of the JSON document doc that
// decoding it into the type of s parses as a resource.Quantity: the text is what
// Quantity.UnmarshalJSON reads, a string's raw bytes between its quotes or a bare number.
// It reads the document in order, so it sees every occurrence of a duplicated key, as
// decoding does; a value of the wrong JSON kind it skips, as decoding does. doc must be one
// JSON value, as json.Unmarshal wants it; else the error says what is wrong.
//
// The document is validated first (json.Valid, one pass); the walk then only looks for the
// ends of what it skips, so that a large value no quantity is in costs little.
func Walk(doc []byte, s *Shape, visit func(path string, text []byte) error) error {
	if !json.Valid(doc) {
		return syntaxError(doc)
	}
	w := walker{doc: doc, visit: visit}
	return w.value(s, "")
}

// syntaxError says what is wrong with doc, which is not one valid JSON value.
func syntaxError(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	switch err := dec.Decode(&skipValue{}); {
	case err == io.EOF && len(bytes.TrimSpace(doc)) == 0:
		return errors.New("no JSON value")
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	return fmt.Errorf("data after the JSON value, which ends at byte %d", dec.InputOffset())
}

type skipValue struct{}

func (skipValue) UnmarshalJSON([]byte) error { return nil }

// walker reads a valid JSON document: it checks no syntax.
type walker struct {
	doc   []byte
	i     int // the next byte to read
	visit func(path string, text []byte) error
}

func (w *walker) value(s *Shape, path string) error {
	w.space()
	switch c := w.doc[w.i]; {
	case s == nil:
		w.skip()
	case s.quantity:
		start := w.i
		w.skip()
		raw := w.doc[start:w.i]
		if string(raw) == "null" {
			return nil
		}
		if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
			raw = raw[1 : n-1]
		}
		return w.visit(path, raw)
	case c == '{' && s.fields != nil:
		return w.members(func(raw []byte) error {
			k, fs := field(s, raw)
			if fs == nil {
				w.space()
				w.skip()
				return nil
			}
			return w.value(fs, join(path, k))
		})
	case c == '{' && s.isMap:
		return w.members(func(raw []byte) error {
			return w.value(s.elem, path+"["+Cut([]byte(key(raw)), maxKeyInPath)+"]")
		})
	case c == '[' && s.fields == nil && !s.isMap:
		w.i++
		for i := 0; ; i++ {
			if w.space(); w.doc[w.i] == ']' {
				w.i++
				return nil
			}
			if w.doc[w.i] == ',' {
				w.i++
			}
			if err := w.value(s.elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	default: // null, or a value of a kind decoding refuses
		w.skip()
	}
	return nil
}

// members calls member with the raw key (between its quotes) of each member of the object
// at w.i; member reads the value.
func (w *walker) members(member func(key []byte) error) error {
	w.i++ // {
	for {
		w.space()
		switch w.doc[w.i] {
		case '}':
			w.i++
			return nil
		case ',':
			w.i++
			w.space()
		}
		start := w.i
		w.skipString()
		key := w.doc[start+1 : w.i-1]
		w.space()
		w.i++ // :
		if err := member(key); err != nil {
			return err
		}
	}
}

// field is the key raw names and the shape of its field in struct shape s (nil if none),
// without copying a plain key that names no field.
func field(s *Shape, raw []byte) (string, *Shape) {
	if !plain(raw) {
		k := key(raw)
		return k, s.fields[k]
	}
	if fs := s.fields[string(raw)]; fs != nil {
		return string(raw), fs
	}
	return "", nil
}

// key is a raw key as decoding reads it: unescaped, invalid UTF-8 replaced.
func key(raw []byte) string {
	if plain(raw) {
		return string(raw)
	}
	var k string
	_ = json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &k) // valid: a key of a valid document
	return k
}

// plain reports whether raw reads as itself: ASCII without escapes.
func plain(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

func (w *walker) space() {
	for w.i < len(w.doc) && (w.doc[w.i] == ' ' || w.doc[w.i] == '\t' || w.doc[w.i] == '\n' || w.doc[w.i] == '\r') {
		w.i++
	}
}

// skip moves past the value at w.i.
func (w *walker) skip() {
	depth := 0
	for {
		switch w.doc[w.i] {
		case '"':
			w.skipString()
		case '{', '[':
			depth++
			w.i++
		case '}', ']':
			depth--
			w.i++
		case ',', ':', ' ', '\t', '\n', '\r':
			w.i++
		default: // a number, true, false or null
			for w.i < len(w.doc) && !ends(w.doc[w.i]) {
				w.i++
			}
		}
		if depth == 0 {
			return
		}
	}
}

// ends reports whether c ends a number or literal.
func ends(c byte) bool {
	switch c {
	case ',', ':', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// skipString moves past the string at w.i: to the first quote after it that an even number
// of backslashes precede.
func (w *walker) skipString() {
	w.i++
	for {
		q := w.i + bytes.IndexByte(w.doc[w.i:], '"')
		w.i = q + 1
		b := q
		for b > 0 && w.doc[b-1] == '\\' {
			b--
		}
		if (q-b)%2 == 0 {
			return
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
