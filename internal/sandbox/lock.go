package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes the data directory's lock, failing at once if another sandbox holds
// it. The lock is released when the returned file is closed or the process exits.
func lockDir(p paths) (*os.File, error) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s is not usable: %w", p.dir, err)
	}
	f, err := os.OpenFile(p.lock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", p.dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another sandbox is running on %s; stop it or pass a different --data-dir", p.dir)
		}
		return nil, fmt.Errorf("locking data dir %s: %w", p.dir, err)
	}
	return f, nil
}
