package extender

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/podfence/podfence/internal/kube/nodeinfo"
	"github.com/podfence/podfence/internal/kube/quantityguard"
)

// Bounds on what one request holds in memory. A scheduler without nodeCacheCapable sends every
// candidate as a full Node object (5,000 nodes: 40 to 100 MB). The body is read as a stream of
// JSON values, each at most maxValue bytes, and of each Node only its name and podfence's
// label and annotation are kept, so that a request holds a few times maxValue plus about
// 300 bytes per candidate, whatever its size (TestFullNodesMemory, TestRequestMemoryBound):
// at most maxInFlight of them at once stay well under the container's 512Mi.
const (
	maxBody = 128 << 20 // the whole body: read in serverTimeouts.read
	// maxValue bounds one JSON value read at once: the Pod, NodeNames, one Node, a field the
	// extender skips. The API server stores no object over 1.5 MiB (etcd's request limit).
	maxValue = 4 << 20
	// maxNodes bounds the candidates: three times the 5,000 nodes Kubernetes supports.
	maxNodes    = 15_000
	maxNodeName = 253 // a node's name is a DNS subdomain
)

// candidate is what a request keeps of a Node object: its name and whether and what it
// published (nodeinfo.Read).
type candidate struct {
	name      string
	published bool
	info      nodeinfo.Info
}

// slimNode is the part of a Node that is decoded: its name and the one label and one
// annotation nodeinfo.Read reads (struct fields named by their keys: the other labels and
// annotations, and everything else, are skipped without a copy). TestSlimNodeKeys checks
// the keys against nodeinfo's.
type slimNode struct {
	Metadata struct {
		Name   string `json:"name"`
		Labels struct {
			CoreSched *string `json:"podfence.io/core-sched"`
		} `json:"labels"`
		Annotations struct {
			PhysicalCores *string `json:"podfence.io/physical-cores"`
		} `json:"annotations"`
	} `json:"metadata"`
}

// node is the Node nodeinfo.Read needs: the name, the label and the annotation.
func (n *slimNode) node() *corev1.Node {
	m := &n.Metadata
	o := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.Name}}
	if m.Labels.CoreSched != nil {
		o.Labels = map[string]string{nodeinfo.LabelCoreSched: *m.Labels.CoreSched}
	}
	if m.Annotations.PhysicalCores != nil {
		o.Annotations = map[string]string{nodeinfo.AnnotationPhysicalCores: *m.Annotations.PhysicalCores}
	}
	return o
}

// valueReader refuses to read more than max bytes past the start of the value being
// decoded (start, the decoder's offset when next was called): the decoder then never
// buffers more than one value of max bytes.
type valueReader struct {
	r                io.Reader
	read, start, max int64
	offset           func() int64
}

var errValueTooBig = errors.New("value too big")

func (v *valueReader) next() { v.start = v.offset() }

func (v *valueReader) Read(p []byte) (int, error) {
	left := v.max - (v.read - v.start)
	if left <= 0 {
		return 0, errValueTooBig
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	k, err := v.r.Read(p)
	v.read += int64(k)
	return k, err
}

// argsDecoder reads an ExtenderArgs as kube-scheduler writes it: field names case-sensitive,
// the last of a repeated field winning, unknown fields skipped.
type argsDecoder struct {
	in  *valueReader
	dec kjson.Decoder
	q   *request
}

// decodeArgs reads an ExtenderArgs from body (at most maxBody bytes).
func decodeArgs(w http.ResponseWriter, r *http.Request) (*request, error) {
	in := &valueReader{r: http.MaxBytesReader(w, r.Body, maxBody), max: maxValue}
	d := &argsDecoder{in: in, dec: kjson.NewDecoderCaseSensitivePreserveInts(in), q: &request{}}
	in.offset = d.dec.InputOffset
	if err := d.args(); err != nil {
		return nil, d.refuse(err)
	}
	q := d.q
	switch {
	case q.podObj == nil:
		return nil, badRequest("ExtenderArgs: no Pod")
	case q.byName: // NodeNames win over Nodes, as kube-scheduler reads a reply
		q.nodes = nil
	case q.nodes != nil:
		q.names = make([]string, len(q.nodes))
		for i, c := range q.nodes {
			q.names[i] = c.name
		}
	default:
		return nil, badRequest("ExtenderArgs: neither NodeNames nor Nodes")
	}
	return q, nil
}

// refuse turns a read error into the answer: 413 past a bound, 400 for bad JSON.
func (d *argsDecoder) refuse(err error) error {
	var he *httpError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &mbe):
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxBody)}
	case errors.Is(err, errValueTooBig):
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("ExtenderArgs: a JSON value (the Pod, NodeNames, "+
			"a Node or another field) over %d bytes, at byte %d", maxValue, d.dec.InputOffset())}
	}
	return badRequest("decode ExtenderArgs: %v", err)
}

func (d *argsDecoder) args() error {
	if err := d.delim('{', "ExtenderArgs"); err != nil {
		return err
	}
	for d.dec.More() {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch key {
		case "Pod":
			err = d.pod()
		case "NodeNames":
			err = d.nodeNames()
		case "Nodes":
			err = d.nodeList()
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
	}
	if _, err := d.dec.Token(); err != nil { // the closing }
		return err
	}
	if tok, err := d.dec.Token(); err != io.EOF {
		return badRequest("decode ExtenderArgs: data after the JSON value, which ends at byte %d (%v%v)", d.dec.InputOffset(), tok, err)
	}
	return nil
}

// delim reads the token want, or null (false) when null is allowed by the caller.
func (d *argsDecoder) delim(want json.Delim, what string) error {
	d.in.next()
	tok, err := d.dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return badRequest("decode ExtenderArgs: %s: want %v, not %v", what, want, tok)
	}
	return nil
}

func (d *argsDecoder) key() (string, error) {
	d.in.next()
	tok, err := d.dec.Token()
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok {
		return "", badRequest("decode ExtenderArgs: want a field name, not %v", tok)
	}
	return k, nil
}

func (d *argsDecoder) skip() error {
	d.in.next()
	var v json.RawMessage
	return d.dec.Decode(&v)
}

// pod decodes the Pod, refusing a quantity too costly to parse before decoding it.
func (d *argsDecoder) pod() error {
	d.in.next()
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		return err
	}
	if err := quantityguard.Check(raw, quantityguard.For[corev1.Pod](), "ExtenderArgs"); err != nil {
		if qe := (*quantityguard.Error)(nil); errors.As(err, &qe) {
			qe.Path = "Pod." + qe.Path
		}
		return badRequest("%v", err)
	}
	var p *corev1.Pod
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &p); err != nil {
		return badRequest("decode ExtenderArgs: Pod: %v", err)
	}
	d.q.podObj = p
	return nil
}

// nodeNames reads NodeNames, one JSON value (at most maxValue bytes: 15,000 names of 253
// bytes fit).
func (d *argsDecoder) nodeNames() error {
	d.in.next()
	var names *[]string
	if err := d.dec.Decode(&names); err != nil {
		return err
	}
	if names == nil { // null: no NodeNames
		d.q.byName, d.q.names = false, nil
		return nil
	}
	if len(*names) > maxNodes {
		return tooManyNodes(len(*names))
	}
	for i, n := range *names {
		if len(n) > maxNodeName {
			return badRequest("ExtenderArgs: NodeNames[%d]: a name of %d bytes, want at most %d", i, len(n), maxNodeName)
		}
	}
	d.q.byName, d.q.names = true, *names
	return nil
}

func tooManyNodes(n int) error {
	return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("ExtenderArgs: %d candidate nodes or more, want at most %d", n, maxNodes)}
}

// nodeList reads a NodeList item by item, keeping what candidate holds of each.
func (d *argsDecoder) nodeList() error {
	d.in.next()
	tok, err := d.dec.Token()
	if err != nil || tok == nil { // null: no Nodes
		d.q.nodes = nil
		return err
	}
	if tok != json.Delim('{') {
		return badRequest("decode ExtenderArgs: Nodes: want a NodeList object, not %v", tok)
	}
	nodes := []candidate{}
	for d.dec.More() {
		key, err := d.key()
		if err != nil {
			return err
		}
		if key != "items" {
			if err := d.skip(); err != nil {
				return err
			}
			continue
		}
		if nodes, err = d.items(); err != nil {
			return err
		}
	}
	if _, err := d.dec.Token(); err != nil {
		return err
	}
	d.q.nodes = nodes
	return nil
}

func (d *argsDecoder) items() ([]candidate, error) {
	d.in.next()
	tok, err := d.dec.Token()
	if err != nil || tok == nil {
		return []candidate{}, err
	}
	if tok != json.Delim('[') {
		return nil, badRequest("decode ExtenderArgs: Nodes.items: want an array, not %v", tok)
	}
	var nodes []candidate
	for d.dec.More() {
		if len(nodes) == maxNodes {
			return nil, tooManyNodes(maxNodes + 1)
		}
		d.in.next()
		var n slimNode
		if err := d.dec.Decode(&n); err != nil {
			return nil, fmt.Errorf("decode Nodes.items[%d]: %w", len(nodes), err)
		}
		m := &n.Metadata
		if len(m.Name) > maxNodeName {
			return nil, badRequest("ExtenderArgs: Nodes.items[%d]: a name of %d bytes, want at most %d", len(nodes), len(m.Name), maxNodeName)
		}
		c := candidate{name: m.Name}
		info, ok, err := nodeinfo.Read(n.node())
		if ok && err == nil {
			c.published, c.info = true, info
		}
		nodes = append(nodes, c)
	}
	d.in.next()
	_, err = d.dec.Token() // ]
	return nodes, err
}
