package quantityguard

import (
	"encoding"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	kjson "sigs.k8s.io/json"

	"github.com/podfence/podfence/internal/testwait"
)

// TestReviewHoldsNoQuantity: decoding the AdmissionReview envelope parses no quantity (its
// object is raw JSON), so checking the pod's quantity fields after it is in time.
func TestReviewHoldsNoQuantity(t *testing.T) {
	if s := shapeOf(reflect.TypeFor[admissionv1.AdmissionReview]()); s != nil {
		t.Errorf("AdmissionReview holds quantities: %+v", s)
	}
}

// TestShapeCoversEveryQuantity: in a pod, and in ExtenderArgs, with every field set, every
// Quantity (a count by reflection) is visited, under the name encoding/json gives it.
func TestShapeCoversEveryQuantity(t *testing.T) {
	for _, tc := range []struct {
		doc  any
		want []string
	}{
		{&corev1.Pod{}, []string{
			`spec.containers[0].resources.limits["k"]`, `spec.initContainers[0].resources.requests["k"]`,
			`spec.ephemeralContainers[0].resources.limits["k"]`, `spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor`,
			`spec.volumes[0].emptyDir.sizeLimit`, `spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor`,
			`spec.volumes[0].projected.sources[0].downwardAPI.items[0].resourceFieldRef.divisor`,
			`spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests["k"]`, `spec.overhead["k"]`,
			`spec.resources.limits["k"]`, `status.containerStatuses[0].allocatedResources["k"]`,
		}},
		{&extenderv1.ExtenderArgs{}, []string{
			`Pod.spec.containers[0].resources.limits["k"]`, `Pod.spec.overhead["k"]`,
			`Nodes.items[0].status.capacity["k"]`, `Nodes.items[0].status.allocatable["k"]`,
		}},
	} {
		typ := reflect.TypeOf(tc.doc).Elem()
		set := fill(reflect.ValueOf(tc.doc).Elem(), 0)
		raw, err := json.Marshal(tc.doc)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		err = Walk(raw, ShapeOf(typ), func(path string, text []byte) error {
			if string(text) != "7" {
				t.Errorf("%v: %s: text %q, want 7", typ, path, text)
			}
			paths = append(paths, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != set || set < 10 {
			t.Errorf("%v: visited %d quantities, set %d:\n%s", typ, len(paths), set, strings.Join(paths, "\n"))
		}
		for _, want := range tc.want {
			if !slices.Contains(paths, want) {
				t.Errorf("%v: %s not visited", typ, want)
			}
		}
	}
}

// TestJSONFieldsAsEncodingJSON: for every struct type of ExtenderArgs, pod and nodes (and one with embedding,
// shadowing and skipped fields), jsonFields names the keys encoding/json writes.
func TestJSONFieldsAsEncodingJSON(t *testing.T) {
	types := slices.Collect(maps.Keys(typeGraph(reflect.TypeFor[extenderv1.ExtenderArgs]()))) // a pod and nodes
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

// TestDecodesAsWalked: no type of a pod or of ExtenderArgs decodes in a way the shape cannot
// see: no interface, and no custom decoding of a type that holds a quantity, but Quantity's
// own. Types that do are named.
func TestDecodesAsWalked(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[corev1.Pod](), reflect.TypeFor[extenderv1.ExtenderArgs]()} {
		if err := DecodesAsWalked(typ); err != nil {
			t.Errorf("%v: %v", typ, err)
		}
	}
	err := DecodesAsWalked(reflect.TypeFor[opaque]())
	for _, want := range []string{"interface {}: an interface under quantityguard.opaque",
		"quantityguard.selfDecoding holds a quantity and decodes itself"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodesAsWalked(opaque) = %v, want %q", err, want)
		}
	}
}

type opaque struct {
	Any  any           `json:"any"`
	Self *selfDecoding `json:"self"`
}

type selfDecoding struct{ Q resource.Quantity }

func (*selfDecoding) UnmarshalJSON([]byte) error { return nil }

// TestWalkSkipsWhatDecodingSkips: a value of the wrong JSON kind is skipped by decoding,
// quantities and all; the walk skips it too, and the pod decodes at once, with an error.
func TestWalkSkipsWhatDecodingSkips(t *testing.T) {
	for _, doc := range []string{
		`{"spec":{"containers":{"a":{"resources":{"limits":{"cpu":"1e-999999999"}}}}}}`,
		`{"spec":{"containers":[{"resources":{"limits":["1e-999999999"]}}]}}`,
		`{"spec":[{"overhead":{"cpu":"1e-999999999"}}]}`,
		`{"spec":{"overhead":7,"volumes":[3,{"emptyDir":"1e-999999999"}]}}`,
	} {
		err := Walk([]byte(doc), For[corev1.Pod](), func(path string, text []byte) error {
			t.Errorf("%s: visited %s=%s", doc, path, text)
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", doc, err)
		}
		done := make(chan error, 1)
		go func() { done <- kjson.UnmarshalCaseSensitivePreserveInts([]byte(doc), &corev1.Pod{}) }()
		// A quantity the walk skips but decoding parses would take years: the wait ends at
		// testwait.Deadline.
		if err := testwait.Receive(t, done, doc+": decoding without parsing a quantity the walk skips"); err == nil {
			t.Errorf("%s decodes without an error", doc)
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
