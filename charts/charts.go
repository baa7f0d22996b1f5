// Package charts embeds everynode's Helm chart, so that the sandbox installs the
// chart it was built with, without a copy of the repository.
package charts

import (
	"embed"
	"io/fs"
)

//go:embed all:everynode
var files embed.FS

// Everynode is the everynode chart: its directory's files, Chart.yaml at the root.
func Everynode() fs.FS {
	sub, err := fs.Sub(files, "everynode")
	if err != nil {
		panic(err) // the directory is embedded above: cannot happen
	}
	return sub
}
