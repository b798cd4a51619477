package clientset_test

import (
	"errors"
	"testing"

	"github.com/podfence/podfence/internal/kube/kubeapi/clientset"
)

func TestNew(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := clientset.New("", "test"); !errors.Is(err, clientset.ErrNoAPIServer) {
		t.Errorf("outside a pod: %v, want ErrNoAPIServer", err)
	}
	if _, err := clientset.New(t.TempDir()+"/none", "test"); err == nil {
		t.Error("missing kubeconfig: no error")
	}
}
