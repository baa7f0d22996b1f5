package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// logTailLines is how many of a failed component's last log lines the sandbox's
// error carries.
const logTailLines = 15

// exitError is the error of a component that exited while the sandbox needed it: how
// it exited, the last lines of its log (where the reason usually is) and the log's path.
func exitError(name string, exit error, logPath string) error {
	tail := logTail(logPath, logTailLines)
	if tail == "" {
		return fmt.Errorf("%s exited (%v); its log %s is empty", name, exit, logPath)
	}
	return fmt.Errorf("%s exited (%v); the last lines of %s:\n%s", name, exit, logPath, tail)
}

// logTail returns the last n lines of the file at path, each indented, or "" when
// the file cannot be read or is empty. It reads at most the last 64 KiB.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 << 10
	if info, err := f.Stat(); err == nil && info.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return ""
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(bytes.TrimRight(data, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "    " + strings.Join(lines, "\n    ")
}
