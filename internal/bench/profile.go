package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profileChunk is the length of each CPU profile taken from a controller. A run's
// profiles are consecutive chunks; `go tool pprof` merges them when given them all.
const profileChunk = 10 * time.Second

// profiler saves consecutive CPU profiles of a controller serving /debug/pprof/.
type profiler struct {
	cancel context.CancelFunc
	done   chan struct{}
	saved  int
	err    error
}

// startProfiler fetches profileChunk-long CPU profiles from addr one after another
// and writes them to dir/<prefix>-NNN.pprof until stop.
func startProfiler(ctx context.Context, addr, dir, prefix string) *profiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &profiler{cancel: cancel, done: make(chan struct{})}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(profileChunk/time.Second))
	go func() {
		defer close(p.done)
		for i := 1; ctx.Err() == nil; i++ {
			path := filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", prefix, i))
			if err := fetchProfile(ctx, url, path); err != nil {
				if ctx.Err() == nil {
					p.err = err
				}
				return
			}
			p.saved++
		}
	}()
	return p
}

// stop ends profiling. The chunk being taken is lost, so the last up to
// profileChunk of the run is not in the profiles.
func (p *profiler) stop() (saved int, err error) {
	p.cancel()
	<-p.done
	return p.saved, p.err
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}
