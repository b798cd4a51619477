package quantityguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// refWalk is the walk as it was first written, on encoding/json's streaming Decoder: token by
// token, every skipped value decoded. Slower, but plainly what decoding does; FuzzWalk holds
// Walk to it.
func refWalk(doc []byte, s *Shape, visit func(path string, text []byte) error) error {
	w := refWalker{dec: json.NewDecoder(bytes.NewReader(doc)), visit: visit}
	w.dec.UseNumber() // a number it skips is not converted: 1e700 is no error
	if err := w.value(s, ""); err != nil {
		switch {
		case err == io.EOF && len(bytes.TrimSpace(doc)) == 0:
			return errors.New("no JSON value")
		case err == io.EOF:
			return io.ErrUnexpectedEOF
		}
		return err
	}
	end := w.dec.InputOffset()
	if _, err := w.dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value, which ends at byte %d", end)
	}
	return nil
}

type refWalker struct {
	dec   *json.Decoder
	visit func(path string, text []byte) error
}

func (w *refWalker) value(s *Shape, path string) error {
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
		err = w.members(func(key string) error { return w.value(s.elem, path+"["+Cut([]byte(key), maxKeyInPath)+"]") })
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
func (w *refWalker) members(member func(key string) error) error {
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
func (w *refWalker) skip() error { return w.dec.Decode(&skipValue{}) }
