package extender

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/testwait"
)

// TestRun serves from informers over the fake clientset until the context ends.
func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client := fake.NewClientset(testNode("a", "supported", 16, 32), testPod("shop", "w1", "a", 500, coresched.LabelGroup, "web"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Config{Client: client, Address: addr, DefaultGroup: coresched.ByNamespace}, quiet())
	}()
	var resp *http.Response
	testwait.EventuallyNil(t, "the extender to serve", func() (err error) {
		resp, err = http.Post("http://"+addr+"/prioritize", "application/json", strings.NewReader(`{"Pod":`+webPod+`,"NodeNames":["a"]}`))
		return err
	})
	var got extenderv1.HostPriorityList
	err = decodeJSON(resp, &got)
	// a: 1 group (web), has it: round(6×15/16 + 4) = 10.
	if err != nil || len(got) != 1 || got[0].Score != 10 {
		t.Errorf("POST /prioritize = %v, %v; want a: 10", got, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
