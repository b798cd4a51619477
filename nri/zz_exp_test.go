package nri_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/podfence/podfence/coresched"
	"github.com/podfence/podfence/coresched/kernel"
	"github.com/podfence/podfence/nri"
)

type fakeK struct{}

func (fakeK) Create(int, kernel.Scope) error      { return nil }
func (fakeK) Share(int, int, kernel.Scope) error  { return nil }
func (fakeK) Get(int) (kernel.Cookie, error)      { return 1, nil }
func (fakeK) Probe() kernel.Support               { return kernel.Support{} }

func TestExpCoresched(t *testing.T) {
	checkFlatInK(t, func() nri.Options {
		m, err := coresched.New(coresched.Config{Disabled: true, CgroupRoot: t.TempDir(), ProcRoot: t.TempDir()}, fakeK{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return nri.Options{Extensions: []nri.Extension{m}}
	})
}
