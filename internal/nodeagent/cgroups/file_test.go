package cgroups_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

func TestReadWrite(t *testing.T) {
	root := cgroupstest.Tree(t, "v2")
	dir := filepath.Join(root, "kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2/crio-c0ffee02")
	if err := cgroups.Write(dir, "misc.max", "sgx_epc 4096"); err != nil {
		t.Fatal(err)
	}
	if b, err := cgroups.Read(dir, "misc.max"); err != nil || string(b) != "sgx_epc 4096" {
		t.Errorf("read back %q, %v", b, err)
	}
	err := cgroups.Write(dir, "misc.nonesuch", "x")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "write cgroup file: open "+dir+"/misc.nonesuch") {
		t.Errorf("write to a missing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "misc.nonesuch")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Write created a file: %v", err)
	}
	if _, err := cgroups.Read(dir, "misc.nonesuch"); !cgroups.Gone(err) {
		t.Errorf("read of a missing file: %v is not Gone", err)
	}
	if !cgroups.Gone(syscall.ENODEV) || cgroups.Gone(syscall.EINVAL) {
		t.Error("Gone: ENODEV is gone, EINVAL is not")
	}
}

func TestMkdirRmdir(t *testing.T) {
	root := t.TempDir()
	created, err := cgroups.Mkdir(filepath.Join(root, "a/b/c"))
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "a/b"), filepath.Join(root, "a/b/c")}
	if err != nil || !slices.Equal(created, want) {
		t.Fatalf("Mkdir = %q, %v; want %q", created, err, want)
	}
	if created, err := cgroups.Mkdir(filepath.Join(root, "a/b/d")); err != nil || len(created) != 1 {
		t.Errorf("Mkdir beside = %q, %v; want one new directory", created, err)
	}
	if created, err := cgroups.Mkdir(filepath.Join(root, "a/b")); err != nil || created != nil {
		t.Errorf("Mkdir of an existing cgroup = %q, %v", created, err)
	}
	if err := cgroups.Rmdir(filepath.Join(root, "a/b")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("Rmdir of a parent: %v", err)
	}
	if err := cgroups.Rmdir(filepath.Join(root, "a/b/c")); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cgroups.Mkdir(filepath.Join(root, "file/x")); err == nil || !strings.Contains(err.Error(), "create cgroup "+root+"/file/x") {
		t.Errorf("Mkdir under a file: %v", err)
	}
}

func TestKernelFake(t *testing.T) {
	root := cgroupstest.Tree(t, "v1")
	k := &cgroupstest.Kernel{WriteErr: map[string]error{"misc.events": syscall.EINVAL}}
	dir := filepath.Join(root, "misc/new/ctr")
	created, err := k.Mkdir(dir)
	if err != nil || len(created) != 2 {
		t.Fatalf("Mkdir = %q, %v", created, err)
	}
	if b, err := k.Read(dir, "misc.max"); err != nil || string(b) != "sgx_epc max\n" {
		t.Errorf("new cgroup's misc.max %q, %v", b, err)
	}
	if err := k.Write(dir, "misc.max", "sgx_epc 1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Write(dir, "misc.events", "x"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("injected write error: %v", err)
	}
	if got := k.Writes(); !slices.Equal(got, []string{dir + "/misc.max=sgx_epc 1"}) {
		t.Errorf("writes %q", got)
	}
	if err := k.Rmdir(created[0]); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("Rmdir of a parent: %v", err)
	}
	if err := k.Rmdir(dir); err != nil {
		t.Error(err)
	}
}

func TestParseFlat(t *testing.T) {
	f, err := cgroups.ParseFlat([]byte("sgx_epc 4096\n\nsev max\nbad x\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		want    uint64
		ok      bool
		wantErr string
	}{
		{key: "sgx_epc", want: 4096, ok: true},
		{key: "sev", want: cgroups.Max, ok: true},
		{key: "none"},
		{key: "bad", ok: true, wantErr: `bad "x": want a number or max`},
	} {
		v, ok, err := f.Uint(tc.key)
		if v != tc.want || ok != tc.ok || (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
			t.Errorf("Uint(%s) = %d, %v, %v; want %d, %v, %q", tc.key, v, ok, err, tc.want, tc.ok, tc.wantErr)
		}
	}
	if _, err := cgroups.ParseFlat([]byte("sgx_epc 1\nsgx_epc.max 1 2\n")); err == nil || err.Error() != `line 2 "sgx_epc.max 1 `+
		`2": want "<key> <value>"` {
		t.Errorf("bad line: %v", err)
	}
}
