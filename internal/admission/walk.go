package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// walkQuantities calls visit with the path and text of every value of the JSON document
// doc that decoding it into the type of s parses as a resource.Quantity: the text is what
// Quantity.UnmarshalJSON reads, a string's raw bytes between its quotes or a bare number.
// It streams the document, so it sees every occurrence of a duplicated key, as decoding
// does; a value of the wrong JSON kind it skips, as decoding does.
func walkQuantities(doc []byte, s *shape, visit func(path string, text []byte) error) error {
	w := walker{dec: json.NewDecoder(bytes.NewReader(doc)), visit: visit}
	return w.value(s, "")
}

type walker struct {
	dec   *json.Decoder
	visit func(path string, text []byte) error
}

func (w *walker) value(s *shape, path string) error {
	switch {
	case s == nil:
		return w.skip()
	case s.quantity:
		var raw json.RawMessage
		if err := w.dec.Decode(&raw); err != nil {
			return err
		}
		if string(raw) == "null" {
			return nil
		}
		if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
			raw = raw[1 : n-1]
		}
		return w.visit(path, raw)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	switch {
	case !ok: // null, or a scalar decoding refuses
		return nil
	case d == '{' && s.fields != nil:
		err = w.members(func(key string) error { return w.value(s.fields[key], join(path, key)) })
	case d == '{' && s.isMap:
		err = w.members(func(key string) error { return w.value(s.elem, fmt.Sprintf("%s[%q]", path, key)) })
	case d == '[' && s.fields == nil && !s.isMap:
		for i := 0; err == nil && w.dec.More(); i++ {
			err = w.value(s.elem, fmt.Sprintf("%s[%d]", path, i))
		}
	case d == '{':
		err = w.members(func(string) error { return w.skip() })
	default:
		for err == nil && w.dec.More() {
			err = w.skip()
		}
	}
	if err != nil {
		return err
	}
	_, err = w.dec.Token() // the closing delimiter
	return err
}

// members calls member with each key of an object, which then reads the value.
func (w *walker) members(member func(key string) error) error {
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // the decoder allows only strings here
		if err := member(key); err != nil {
			return err
		}
	}
	return nil
}

// skip reads a value without copying or keeping it.
func (w *walker) skip() error { return w.dec.Decode(&skipValue{}) }

type skipValue struct{}

func (skipValue) UnmarshalJSON([]byte) error { return nil }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
