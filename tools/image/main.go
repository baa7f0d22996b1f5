// Command image builds everynode's controller image without a Docker daemon and
// without pulling anything: it compiles the controller's slim binary (the nosandbox
// build: no embedded control plane, no kubectl, no benchmark) as a static Linux
// executable and writes an OCI image layout holding one layer with that binary, run
// as a non-root user, with no shell. Push it with any OCI tool (crane, skopeo,
// oras); the Dockerfile at the repository's root builds the same image where a base
// image can be pulled.
//
//	go run . --out ../../bin/image --tag ghcr.io/everynode/everynode:dev
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	repo := flag.String("repo", "../..", "The everynode repository to build from.")
	out := flag.String("out", "../../bin/image", "Directory to write the OCI image layout to (replaced).")
	tag := flag.String("tag", "ghcr.io/everynode/everynode:dev", "Reference recorded in the layout's index.")
	arch := flag.String("arch", "amd64", "CPU architecture (GOARCH) of the image.")
	flag.Parse()
	if err := run(*repo, *out, *tag, *arch); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(repo, out, tag, arch string) error {
	work, err := os.MkdirTemp("", "everynode-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	binary := filepath.Join(work, "everynode")
	if err := buildBinary(repo, binary, arch); err != nil {
		return err
	}
	digest, err := writeLayout(out, binary, tag, arch)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s) to %s\n", tag, digest, out)
	return nil
}
