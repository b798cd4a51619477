package admission

import (
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// TestReviewHoldsNoQuantity: decoding the AdmissionReview envelope parses no quantity (its
// object is raw JSON), so checking the pod's quantity fields after it is in time.
func TestReviewHoldsNoQuantity(t *testing.T) {
	if s := shapeOf(reflect.TypeFor[admissionv1.AdmissionReview]()); s != nil {
		t.Errorf("AdmissionReview holds quantities: %+v", s)
	}
}

// TestPodShapeCoversEveryQuantity: in a pod with every field set, every Quantity (a count
// by reflection) is visited, under the name encoding/json gives it.
func TestPodShapeCoversEveryQuantity(t *testing.T) {
	var pod corev1.Pod
	set := fill(reflect.ValueOf(&pod).Elem(), 0)
	raw, err := json.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	err = walkQuantities(raw, podShape(), func(path string, text []byte) error {
		if string(text) != "7" {
			t.Errorf("%s: text %q, want 7", path, text)
		}
		paths = append(paths, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != set || set < 10 {
		t.Errorf("visited %d quantities, set %d:\n%s", len(paths), set, strings.Join(paths, "\n"))
	}
	for _, want := range []string{
		`spec.containers[0].resources.limits["k"]`, `spec.initContainers[0].resources.requests["k"]`,
		`spec.ephemeralContainers[0].resources.limits["k"]`, `spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor`,
		`spec.volumes[0].emptyDir.sizeLimit`, `spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor`,
		`spec.volumes[0].projected.sources[0].downwardAPI.items[0].resourceFieldRef.divisor`,
		`spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests["k"]`, `spec.overhead["k"]`,
		`spec.resources.limits["k"]`, `status.containerStatuses[0].allocatedResources["k"]`,
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("%s not visited", want)
		}
	}
}

// TestJSONFieldsAsEncodingJSON: for every struct type of a pod (and one with embedding,
// shadowing and skipped fields), jsonFields names the keys encoding/json writes.
func TestJSONFieldsAsEncodingJSON(t *testing.T) {
	types := slices.Collect(maps.Keys(typeGraph(reflect.TypeFor[corev1.Pod]())))
	types = append(types, reflect.TypeFor[embedding]())
	marshaler, textMarshaler := reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()
	checked := 0
	for _, typ := range types {
		p := reflect.PointerTo(typ)
		if typ.Kind() != reflect.Struct || p.Implements(marshaler) || p.Implements(textMarshaler) {
			continue
		}
		v := reflect.New(typ)
		fill(v.Elem(), 0)
		b, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatalf("%v: %s: %v", typ, b, err)
		}
		var names []string
		for _, f := range jsonFields(typ) {
			names = append(names, f.name)
		}
		if got, want := slices.Sorted(slices.Values(names)), slices.Sorted(maps.Keys(obj)); !slices.Equal(got, want) {
			t.Errorf("%v: fields %q, encoding/json writes %q", typ, got, want)
		}
		checked++
	}
	if s := shapeOf(reflect.TypeFor[embedding]()); !s.fields["b"].quantity || len(s.fields) != 4 {
		t.Errorf("shape of embedding: %+v", s.fields)
	}
	t.Logf("%d struct types", checked)
}

// embedding has promoted, shadowed, skipped and unexported fields.
type embedding struct {
	embedded `json:",inline"`
	*Embedded
	B     resource.Quantity `json:"b"` // shadows embedded.B
	Skip  resource.Quantity `json:"-"`
	Plain resource.Quantity
	//lint:ignore U1000 unexported: JSON leaves it out
	quiet resource.Quantity
}

type embedded struct {
	A resource.Quantity `json:"a"`
	B int               `json:"b"`
}

type Embedded struct{ C *resource.Quantity }

// TestPodDecodesAsWalked: no type of a pod decodes in a way the shape cannot see: no
// interface, and no custom decoding of a type that holds a quantity, but Quantity's own.
func TestPodDecodesAsWalked(t *testing.T) {
	graph := typeGraph(reflect.TypeFor[corev1.Pod]())
	holds := holdsQuantity(graph)
	unmarshaler, textUnmarshaler := reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()
	for typ := range graph {
		p := reflect.PointerTo(typ)
		switch {
		case typ.Kind() == reflect.Interface:
			t.Errorf("%v: an interface in a pod", typ)
		case typ != quantityType && holds[typ] && (p.Implements(unmarshaler) || p.Implements(textUnmarshaler)):
			t.Errorf("%v holds a quantity and decodes itself", typ)
		}
	}
}

// TestWalkSkipsWhatDecodingSkips: a value of the wrong JSON kind is skipped by decoding,
// quantities and all; the walk skips it too, and the pod decodes at once, with an error.
func TestWalkSkipsWhatDecodingSkips(t *testing.T) {
	for _, doc := range []string{
		`{"spec":{"containers":{"a":{"resources":{"limits":{"cpu":"1e-999999999"}}}}}}`,
		`{"spec":{"containers":[{"resources":{"limits":["1e-999999999"]}}]}}`,
		`{"spec":[{"overhead":{"cpu":"1e-999999999"}}]}`,
		`{"spec":{"overhead":7,"volumes":[3,{"emptyDir":"1e-999999999"}]}}`,
	} {
		err := walkQuantities([]byte(doc), podShape(), func(path string, text []byte) error {
			t.Errorf("%s: visited %s=%s", doc, path, text)
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", doc, err)
		}
		done := make(chan error, 1)
		go func() { done <- kjson.UnmarshalCaseSensitivePreserveInts([]byte(doc), &corev1.Pod{}) }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s decodes without an error", doc)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: decoding parses a quantity the walk skips", doc)
		}
	}
}

func TestCut(t *testing.T) {
	for in, want := range map[string]string{
		"1e-9":                        `"1e-9"`,
		strings.Repeat("é", 25):       `"` + strings.Repeat("é", 20) + `"… (50 bytes)`,
		"x" + strings.Repeat("é", 25): `"x` + strings.Repeat("é", 19) + `"… (51 bytes)`,
	} {
		if got := cut([]byte(in), 40); got != want {
			t.Errorf("cut(%q) = %s, want %s", in, got, want)
		}
	}
}

// fill sets every settable field under v: strings to "k", numbers to 1, one element in each
// slice and map, each Quantity to 7; a type with its own JSON encoding but Time stays zero. It
// returns the number of Quantities set.
func fill(v reflect.Value, depth int) int {
	if depth > 40 { // a recursive type
		return 0
	}
	if v.Type() == quantityType {
		v.Set(reflect.ValueOf(resource.MustParse("7")))
		return 1
	}
	switch {
	case v.Type() == reflect.TypeFor[metav1.Time](): // omitzero
		v.Set(reflect.ValueOf(metav1.Unix(1, 0)))
		return 0
	case reflect.PointerTo(v.Type()).Implements(reflect.TypeFor[json.Marshaler]()):
		return 0 // its own encoding, say FieldsV1: left zero
	}
	n := 0
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		n = fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				n += fill(f, depth+1)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		n = fill(v.Index(0), depth+1)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		n = fill(e, depth+1)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("k")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	}
	return n
}
