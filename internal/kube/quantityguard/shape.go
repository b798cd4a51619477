package quantityguard

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A Shape says where decoding JSON into a Go type parses a resource.Quantity. A nil *Shape
// is a type that holds none, whose JSON nothing needs to look at.
type Shape struct {
	quantity bool              // the type is resource.Quantity
	fields   map[string]*Shape // a struct's fields that hold quantities, by JSON name
	elem     *Shape            // the element of a slice, array or map
	isMap    bool
}

var quantityType = reflect.TypeFor[resource.Quantity]()

// shapes caches ShapeOf by type.
var shapes sync.Map // reflect.Type → *Shape

// ShapeOf returns the shape of t (computed once per type), following encoding/json's field
// rules with case-sensitive names, as sigs.k8s.io/json decodes them: documents checked with
// it must be decoded case-sensitively (kjson.UnmarshalCaseSensitivePreserveInts). The type
// must decode as the shape sees it: no interface, and no custom decoding of a type that
// holds a quantity but Quantity's own (DecodesAsWalked).
func ShapeOf(t reflect.Type) *Shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*Shape)
	}
	s, _ := shapes.LoadOrStore(t, shapeOf(t))
	return s.(*Shape)
}

// For is ShapeOf the type T.
func For[T any]() *Shape { return ShapeOf(reflect.TypeFor[T]()) }

// DecodesAsWalked names the types under t that decoding reads in a way a Shape cannot see:
// an interface, or a type other than Quantity that holds one and decodes itself. A type whose
// documents are checked must have none (test it).
func DecodesAsWalked(t reflect.Type) error {
	graph := typeGraph(t)
	holds := holdsQuantity(graph)
	unmarshaler, textUnmarshaler := reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()
	var errs []error
	for typ := range graph {
		p := reflect.PointerTo(typ)
		switch {
		case typ.Kind() == reflect.Interface:
			errs = append(errs, fmt.Errorf("%v: an interface under %v", typ, t))
		case typ != quantityType && holds[typ] && (p.Implements(unmarshaler) || p.Implements(textUnmarshaler)):
			errs = append(errs, fmt.Errorf("%v holds a quantity and decodes itself", typ))
		}
	}
	return errors.Join(errs...)
}

func shapeOf(t reflect.Type) *Shape {
	holds := holdsQuantity(typeGraph(t))
	built := map[reflect.Type]*Shape{}
	var build func(reflect.Type) *Shape
	build = func(t reflect.Type) *Shape {
		t = deref(t)
		if !holds[t] {
			return nil
		}
		if s, ok := built[t]; ok {
			return s
		}
		s := &Shape{}
		built[t] = s
		switch t.Kind() {
		case reflect.Struct:
			if t == quantityType {
				s.quantity = true
				break
			}
			s.fields = map[string]*Shape{}
			for _, f := range jsonFields(t) {
				if fs := build(f.typ); fs != nil {
					s.fields[f.name] = fs
				}
			}
		case reflect.Map:
			s.isMap = true
			s.elem = build(t.Elem())
		default: // slice or array
			s.elem = build(t.Elem())
		}
		return s
	}
	return build(t)
}

// typeGraph maps each type reachable from root, pointers removed, to the types its JSON
// values hold. A Quantity holds none: it parses its own text.
func typeGraph(root reflect.Type) map[reflect.Type][]reflect.Type {
	graph := map[reflect.Type][]reflect.Type{}
	var visit func(reflect.Type)
	visit = func(t reflect.Type) {
		t = deref(t)
		if _, ok := graph[t]; ok {
			return
		}
		var next []reflect.Type
		switch t.Kind() {
		case reflect.Struct:
			if t != quantityType {
				for _, f := range jsonFields(t) {
					next = append(next, deref(f.typ))
				}
			}
		case reflect.Slice, reflect.Array, reflect.Map:
			next = append(next, deref(t.Elem()))
		}
		graph[t] = next
		for _, n := range next {
			visit(n)
		}
	}
	visit(root)
	return graph
}

// holdsQuantity returns the types of graph that are or hold a Quantity: a fixed point, so
// that recursive types come out right.
func holdsQuantity(graph map[reflect.Type][]reflect.Type) map[reflect.Type]bool {
	holds := map[reflect.Type]bool{quantityType: true}
	for changed := true; changed; {
		changed = false
		for t, next := range graph {
			for _, n := range next {
				if !holds[t] && holds[n] {
					holds[t], changed = true, true
				}
			}
		}
	}
	return holds
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonField is a struct field as JSON sees it.
type jsonField struct {
	name   string
	typ    reflect.Type
	depth  int  // of embedding
	tagged bool // named by its json tag
}

// jsonFields lists the JSON fields of struct type t as encoding/json does: tag names, "-"
// left out, the fields of untagged embedded structs (`json:",inline"`) promoted, and of
// fields with the same name the least embedded one, else the only tagged one, else none.
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	seen := map[reflect.Type]bool{}
	type level struct {
		t     reflect.Type
		depth int
	}
	for queue := []level{{t, 0}}; len(queue) > 0; queue = queue[1:] {
		l := queue[0]
		if seen[l.t] {
			continue
		}
		seen[l.t] = true
		for i := range l.t.NumField() {
			f := l.t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if tag == "-" {
				continue
			}
			if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
				queue = append(queue, level{deref(f.Type), l.depth + 1})
				continue
			}
			if !f.IsExported() {
				continue
			}
			all = append(all, jsonField{name: name, typ: f.Type, depth: l.depth, tagged: name != ""})
			if name == "" {
				all[len(all)-1].name = f.Name
			}
		}
	}
	return dominant(all)
}

// dominant keeps, of each name, the field encoding/json decodes into.
func dominant(all []jsonField) []jsonField {
	byName := map[string][]jsonField{}
	var names []string
	for _, f := range all {
		if byName[f.name] == nil {
			names = append(names, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []jsonField
	for _, n := range names {
		fs := byName[n]
		var best []jsonField
		for _, f := range fs {
			if f.depth == fs[0].depth { // BFS order: the first are the least embedded
				best = append(best, f)
			}
		}
		var tagged []jsonField
		for _, f := range best {
			if f.tagged {
				tagged = append(tagged, f)
			}
		}
		switch {
		case len(best) == 1:
			out = append(out, best[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	return out
}
