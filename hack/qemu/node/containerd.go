//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Paths in the guest. The host script (hack/qemu/run-node.sh) puts the binaries in binDir and
// the image tarballs of test/e2e/images.sh in imageDir; everything else is made under work
// (tmpfs), kept short because shim sockets live in <work>/s/<64 hex>.
const (
	binDir   = "/usr/local/bin"
	imageDir = "/images"
	work     = "/run/pf"
	pathEnv  = "PATH=" + binDir + ":/usr/bin:/bin"

	busyboxImage = "localhost/podfence-e2e/busybox:latest"
	pauseImage   = "localhost/podfence-e2e/pause:latest"
)

// node is the guest's runtime: containerd (with NRI), runc and crictl's configuration.
type node struct {
	sock, nriSock, crictlConfig, log string
	containerd                       *exec.Cmd
}

func newNode() *node {
	return &node{
		sock:         filepath.Join(work, "containerd.sock"),
		nriSock:      filepath.Join(work, "nri.sock"),
		crictlConfig: filepath.Join(work, "crictl.yaml"),
		log:          filepath.Join(work, "containerd.log"),
	}
}

// containerdConfig is containerd's configuration (version 3) for the guest: NRI on, the
// overlayfs snapshotter, CRI runtimes runc and kata (both runc: kata only names a VM runtime
// handler for the agent), the cgroupfs driver, the local pause image.
func containerdConfig(work, bin, pause string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `version = 3
root = '%[1]s/root'
state = '%[1]s/state'
temp = '%[1]s/tmp'
disabled_plugins = [
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.differ.v1.erofs',
  'io.containerd.tracing.processor.v1.otlp',
]

[grpc]
  address = '%[1]s/containerd.sock'

[ttrpc]
  address = '%[1]s/containerd.sock.ttrpc'

[plugins]
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = '%[1]s/nri.sock'
    plugin_path = '%[1]s/nri/plugins'
    plugin_config_path = '%[1]s/nri/conf.d'
    plugin_registration_timeout = '30s'
    plugin_request_timeout = '30s'

  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '%[1]s/s'

  [plugins.'io.containerd.internal.v1.opt']
    path = '%[1]s/opt'

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '%[3]s'

  [plugins.'io.containerd.cri.v1.runtime']
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['%[1]s/cni/bin']
      conf_dir = '%[1]s/cni/net.d'
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
`, work, bin, pause)
	for _, rt := range []string{"runc", "kata"} {
		fmt.Fprintf(&b, `      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[1]s.options]
          BinaryName = '%[2]s/runc'
          Root = '%[3]s/runc'
          SystemdCgroup = false
`, rt, bin, work)
	}
	return b.String()
}

// crictlYAML is crictl's configuration for the guest's containerd. Its timeout allows for
// TCG, where one CRI call can take seconds.
func crictlYAML(sock string) string {
	return fmt.Sprintf("runtime-endpoint: unix://%[1]s\nimage-endpoint: unix://%[1]s\ntimeout: 120\n", sock)
}

// start writes the configurations, starts containerd and waits until CRI reports the runtime
// ready and the NRI socket is there, then imports the images.
func (n *node) start(ctx context.Context) error {
	for _, d := range []string{"root", "state", "tmp", "runc", "s", "opt", "nri/plugins", "nri/conf.d", "cni/bin", "cni/net.d"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o711); err != nil {
			return err
		}
	}
	cfg := filepath.Join(work, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(work, binDir, pauseImage)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(n.crictlConfig, []byte(crictlYAML(n.sock)), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(n.log)
	if err != nil {
		return err
	}
	defer logf.Close()
	n.containerd = exec.Command(filepath.Join(binDir, "containerd"), "--config", cfg)
	n.containerd.Stdout, n.containerd.Stderr = logf, logf
	n.containerd.Env = []string{pathEnv, "HOME=/root", "TMPDIR=/tmp"}
	n.containerd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := n.containerd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- n.containerd.Wait() }()
	ready := func() bool {
		if _, err := os.Stat(n.nriSock); err != nil {
			return false
		}
		out, err := n.crictl(ctx, "info", "-o", "go-template", "--template",
			"{{range .status.conditions}}{{.type}}={{.status}} {{end}}")
		return err == nil && strings.Contains(out, "RuntimeReady=true")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !ready() {
		select {
		case err := <-exited:
			return fmt.Errorf("containerd exited during start-up: %v\n%s", err, tail(n.log, 30))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd not ready after 3 min\n%s", tail(n.log, 30))
		}
	}
	for _, img := range []string{"busybox.tar", "pause.tar"} {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "ctr"), "--address", n.sock, "--namespace", "k8s.io",
			"images", "import", "--local", filepath.Join(imageDir, img))
		cmd.Env = []string{pathEnv, "TMPDIR=/tmp"}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images import %s: %w: %s", img, err, out)
		}
	}
	return nil
}

// crictl runs crictl against the guest's containerd and returns its trimmed stdout; an
// error carries its stderr.
func (n *node) crictl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "crictl"), append([]string{"--config", n.crictlConfig}, args...)...)
	cmd.Env = []string{pathEnv, "HOME=/root", "TMPDIR=/tmp"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// tail returns the last n lines of a file, for failure reports.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("---- last %d lines of %s ----\n%s\n----", len(lines), file, strings.Join(lines, "\n"))
}
