// Command chart renders everynode's Helm chart with Helm's own Go library, as
// `helm template` would, without a helm binary: the end-to-end suite applies what it
// prints to a sandbox. It is a module of its own so that Helm's dependencies stay out
// of everynode's.
//
//	go run . --chart ../../charts/everynode --namespace everynode --set mode=full
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
)

// setFlags collects repeated --set key=value flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	chartDir := flag.String("chart", "../../charts/everynode", "Directory of the chart.")
	namespace := flag.String("namespace", "everynode", "Namespace of the release.")
	release := flag.String("release", "everynode", "Name of the release.")
	var sets setFlags
	flag.Var(&sets, "set", "A value, key=value, as helm's --set (repeatable).")
	flag.Parse()
	manifest, err := render(*chartDir, *namespace, *release, sets)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(manifest)
}

// render returns the manifest the chart renders to, its values checked against
// values.schema.json.
func render(chartDir, namespace, release string, sets []string) (string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading the chart in %s: %w", chartDir, err)
	}
	vals, err := (&values.Options{Values: sets}).MergeValues(getter.Providers{})
	if err != nil {
		return "", fmt.Errorf("reading --set values: %w", err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, namespace
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", fmt.Errorf("rendering the chart: %w", err)
	}
	return rel.Manifest, nil
}
