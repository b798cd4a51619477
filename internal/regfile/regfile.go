// Package regfile opens the files podfence reads (grants, checkpoint, pool configs, profiles,
// certificates) without blocking and refuses what is not a regular file. A named pipe
// (mkfifo) where a grant or config belongs would block a plain open(2) until some writer
// opens it, forever; a device or a socket is no config either. The file is opened with
// O_NONBLOCK, which returns at once whatever it is, then fstat'ed, and closed with an error
// naming the path and what it is when it is not a regular file. Symbolic links are followed
// (ConfigMap volumes are links to regular files).
package regfile

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading; it does not block, and fails for what is not a regular file.
// Errors keep the fs.ErrNotExist and fs.ErrPermission of the open.
func Open(path string) (*os.File, error) { return OpenFile(path, os.O_RDONLY, 0) }

// OpenFile is os.OpenFile for a regular file: it does not block, and fails for what is not
// a regular file (for writing too: a FIFO opened for writing blocks until a reader comes).
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	// O_NONBLOCK: open(2) of a FIFO without the other end returns at once (for writing, with
	// ENXIO). On a regular file it changes nothing: its reads and writes never wait.
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ENXIO) {
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, notRegular(path, info.Mode())
		}
	}
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, notRegular(path, info.Mode())
	}
	return f, nil
}

func notRegular(path string, m fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s): refused", ErrNotRegular, kind(m))}
}

// ReadFile reads the regular file at path, as os.ReadFile does, after Open's checks.
func ReadFile(path string) ([]byte, error) {
	return ReadFileMax(path, -1)
}

// ReadFileMax reads at most max+1 bytes of the regular file at path (max < 0: all of it),
// so that a caller can tell a file over max bytes (len > max) without reading it whole.
func ReadFileMax(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	var size int64
	if info, err := f.Stat(); err == nil {
		size = info.Size()
	}
	if max >= 0 {
		r = io.LimitReader(f, max+1)
		size = min(size, max+1)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf.Bytes(), nil
}

// kind names a file type as ls -l's first letter means it.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	default:
		return "of mode " + m.Type().String()
	}
}

// LoadX509KeyPair is tls.LoadX509KeyPair with ReadFile's checks on both files.
func LoadX509KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
