package realnode

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// forwarder makes a port on 127.0.0.1 reachable at another local address: the API
// server, which listens on loopback only, at the host's end of a node's link.
type forwarder struct {
	ln   net.Listener
	to   string
	wg   sync.WaitGroup
	stop context.CancelFunc
}

func forward(from, to string) (*forwarder, error) {
	ln, err := net.Listen("tcp", from)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{ln: ln, to: to, stop: cancel}
	f.wg.Add(1)
	go f.serve(ctx)
	return f, nil
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
