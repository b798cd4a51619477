package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registerTimeout bounds one Register call to the kubelet.
const registerTimeout = 5 * time.Second

// fileID tells a file from one re-created at the same path: inode and modification time
// (inodes alone are reused). The zero value means no file.
type fileID struct {
	ino   uint64
	mtime int64
}

func statID(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino = st.Ino
	}
	return id
}

// endpoint is one resource's gRPC server on its unix socket, and its registration. Only
// Plugin.Run uses it.
type endpoint struct {
	cur      atomic.Pointer[resource] // the resource served; a reload may swap it
	log      *slog.Logger
	dir      string // device-plugin dir
	name     string // socket file name in dir: the Endpoint registered with the kubelet
	srv      *grpc.Server
	done     chan struct{} // closed when Serve returns
	sock     fileID        // the socket this server listens on
	kubelet  fileID        // the kubelet socket registered with; zero: not registered
	regErr   string        // last registration error, logged once
	serveErr string        // last serve error, logged once
}

func newEndpoint(r *resource, dir string, log *slog.Logger) *endpoint {
	e := &endpoint{log: log.With("resource", r.name), dir: dir, name: socketName(r)}
	e.cur.Store(r)
	return e
}

func socketName(r *resource) string { return "podfence-" + r.pool.Name + ".sock" }

func (e *endpoint) path() string { return e.dir + "/" + e.name }

// serve listens on the socket, replacing a stale one, and serves in the background.
func (e *endpoint) serve() error {
	if err := os.Remove(e.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket of %s: %w", e.cur.Load().name, err)
	}
	lis, err := net.Listen("unix", e.path())
	if err != nil {
		return fmt.Errorf("serve %s: %w", e.cur.Load().name, err)
	}
	e.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(e.srv, &server{cur: &e.cur, log: e.log})
	e.done, e.sock, e.kubelet = make(chan struct{}), statID(e.path()), fileID{}
	go func(srv *grpc.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(lis); err != nil {
			e.log.Error("device plugin server stopped", "err", err)
		}
	}(e.srv, e.done)
	e.log.Info("serving", "socket", e.path())
	return nil
}

// stop ends the server and its streams and removes its socket.
func (e *endpoint) stop() {
	if e.srv == nil {
		return
	}
	e.srv.Stop()
	<-e.done
	if statID(e.path()) == e.sock {
		if err := os.Remove(e.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("remove socket", "socket", e.path(), "err", err)
		}
	}
	e.srv = nil
}

// alive reports whether the socket this server listens on is still in place (the kubelet
// removes every socket in its dir when it starts). A socket gone before serve could stat
// it has no identity: it is not alive.
func (e *endpoint) alive() bool {
	return e.srv != nil && e.sock != (fileID{}) && statID(e.path()) == e.sock
}

// register registers the resource with the kubelet listening on kubeletSock.
func (e *endpoint) register(ctx context.Context, kubeletSock string) error {
	name := e.cur.Load().name
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("register %s with the kubelet at %s: %w", name, kubeletSock, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     e.name,
		ResourceName: name,
		Options:      options(),
	})
	if err != nil {
		return fmt.Errorf("register %s with the kubelet at %s: %w", name, kubeletSock, err)
	}
	return nil
}
