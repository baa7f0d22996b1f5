package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// forwarder makes a port on 127.0.0.1 reachable at another local address: the API
// server, which listens on loopback only, at the host's end of a node's link.
type forwarder struct {
	ln   net.Listener
	to   string
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// forward listens on from, in this process's network namespace, and forwards to to.
func forward(from, to string) (*forwarder, error) {
	ln, err := net.Listen("tcp", from)
	if err != nil {
		return nil, err
	}
	return forwardFrom(ln, to), nil
}

// forwardFrom forwards the connections ln accepts to to.
func forwardFrom(ln net.Listener, to string) *forwarder {
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{ln: ln, to: to, stop: cancel}
	f.wg.Add(1)
	go f.serve(ctx)
	return f
}

func (f *forwarder) serve(ctx context.Context) {
	defer f.wg.Done()
	var d net.Dialer
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer conn.Close()
			upstream, err := d.DialContext(ctx, "tcp", f.to)
			if err != nil {
				return
			}
			defer upstream.Close()
			// Closing the forwarder ends the connection; closing one side unblocks the
			// copy reading from it.
			defer context.AfterFunc(ctx, func() {
				conn.Close()
				upstream.Close()
			})()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(upstream, conn)
				upstream.Close()
				close(done)
			}()
			_, _ = io.Copy(conn, upstream)
			conn.Close()
			<-done
		}()
	}
}

// Close stops listening, ends every forwarded connection and waits for them.
func (f *forwarder) Close() error {
	f.stop()
	err := f.ln.Close()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// listenIn listens on addr inside the network namespace bound at nsPath: the socket
// belongs to the namespace it was made in, wherever it is used from. The thread that
// makes it enters the namespace and returns; a thread that cannot return is not
// reused (it ends with its goroutine, still locked to it).
func listenIn(nsPath, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer own.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("entering %s: %w", nsPath, err)}
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			if ln != nil {
				ln.Close()
			}
			done <- result{err: fmt.Errorf("leaving %s: %w", nsPath, err)}
			return // the thread stays locked, and ends with this goroutine
		}
		runtime.UnlockOSThread()
		done <- result{ln, lerr}
	}()
	r := <-done
	return r.ln, r.err
}
