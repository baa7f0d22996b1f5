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

// profiler saves consecutive CPU profiles of a controller serving /debug/pprof/, and
// at the end one heap profile.
type profiler struct {
	heapURL, heapPath string
	cancel            context.CancelFunc
	done              chan struct{}
	saved             int
	err               error
}

// startProfiler fetches profileChunk-long CPU profiles from addr one after another
// and writes them to dir/<prefix>-NNN.pprof until stop.
func startProfiler(ctx context.Context, addr, dir, prefix string) *profiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &profiler{
		heapURL:  fmt.Sprintf("http://%s/debug/pprof/heap", addr),
		heapPath: filepath.Join(dir, prefix+"-heap.pprof"),
		cancel:   cancel,
		done:     make(chan struct{}),
	}
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

// stop ends profiling and saves the heap profile: the memory in use at the end of the
// run, and everything allocated since the controller started (pprof's -sample_index
// alloc_space). The CPU chunk being taken is lost, so the last up to profileChunk of
// the run is not in the CPU profiles.
func (p *profiler) stop() (saved int, err error) {
	p.cancel()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), heapTimeout)
	defer cancel()
	if herr := fetchProfile(ctx, p.heapURL, p.heapPath); herr != nil && p.err == nil {
		p.err = herr
	}
	return p.saved, p.err
}

// heapTimeout bounds the fetch of the heap profile at the end of a run.
const heapTimeout = 30 * time.Second

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
