package events

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podfence/podfence/internal/kube/kubeapi"
)

// maxMessage bounds an event's message, as the events API does for its note.
const maxMessage = 1024

// Client posts events through an API server client. Create it with NewClient.
type Client struct {
	api *kubeapi.Client
	// Component and Host are the event's source: "podfence-agent" and the node name.
	component, host string
}

var _ Sink = (*Client)(nil)

// NewClient returns a client that posts through api and whose events name component on
// host as their source.
func NewClient(api *kubeapi.Client, component, host string) *Client {
	return &Client{api: api, component: component, host: host}
}

// Post creates e as a core/v1 Event on its pod (or node).
func (c *Client) Post(ctx context.Context, e Event, at time.Time) error {
	obj := c.object(e, at)
	body, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	path := "/api/v1/namespaces/" + url.PathEscape(obj.Namespace) + "/events"
	if _, err := c.api.Call(ctx, http.MethodPost, path, "application/json", body); err != nil {
		return fmt.Errorf("post event: %w", err)
	}
	return nil
}

// object is e as the API's Event, named as client-go's recorder names them.
func (c *Client) object(e Event, at time.Time) *corev1.Event {
	msg := e.Message
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.Namespace, Name: e.Pod, UID: types.UID(e.PodUID)}
	if e.Container != "" {
		ref.FieldPath = fmt.Sprintf("spec.containers{%s}", e.Container)
	}
	name, ns := e.Pod, e.Namespace
	if e.Node != "" { // as the kubelet refers to its Node: the name is the UID
		ref = corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: e.Node, UID: types.UID(e.Node)}
		name, ns = e.Node, metav1.NamespaceDefault
	}
	t := metav1.NewTime(at)
	return &corev1.Event{
		TypeMeta:            metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, at.UnixNano()), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              e.Reason,
		Message:             msg,
		Type:                e.Type,
		Source:              corev1.EventSource{Component: c.component, Host: c.host},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		ReportingController: "podfence.io/agent",
		ReportingInstance:   c.host,
	}
}
