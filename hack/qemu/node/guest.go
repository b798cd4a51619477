//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// prepareGuest makes the initramfs guest fit for a container runtime:
//
//   - a root that pivot_root(2) accepts: runc pivots into each container's rootfs, which
//     the kernel refuses while the caller's root is the initramfs itself (it has no parent
//     mount), so the root is bind-mounted onto itself, moved over / and entered with
//     chroot (as switch_root does, without copying a file);
//   - tmpfs on /run (containerd's root, state and sockets) and /var;
//   - the loopback interface up (the CRI streaming server of crictl exec listens on
//     127.0.0.1), a host name, and the /etc files containerd copies into host-network pods.
func prepareGuest() error {
	if err := enterBoundRoot("/.root"); err != nil {
		return err
	}
	for _, dir := range []string{"/run", "/var"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=755"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
		}
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fmt.Errorf("set the host name: %w", err)
	}
	files := map[string]string{
		"/etc/hostname":    hostname + "\n",
		"/etc/hosts":       "127.0.0.1 localhost " + hostname + "\n",
		"/etc/resolv.conf": "",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

const hostname = "podfence-guest"

// enterBoundRoot bind-mounts / (with its submounts) at dir, moves that mount over / and
// chroots into it; the caller's children inherit the new root.
func enterBoundRoot(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/", dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind / on %s: %w", dir, err)
	}
	if err := os.Chdir(dir); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move %s over /: %w", dir, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return os.Chdir("/")
}

// loopbackUp sets IFF_UP on lo.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: set up: %w", err)
	}
	return nil
}
