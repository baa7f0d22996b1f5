// Package chart renders a Helm chart with Helm's own library, as `helm template`
// does, and applies what it renders to a cluster: the sandbox's way to install
// everynode from charts/everynode.
package chart

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Load reads the chart whose Chart.yaml is at the root of fsys.
func Load(fsys fs.FS) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: name, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the chart: %w", err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return c, nil
}

// Render renders c as release name in namespace, with values over the chart's own
// (checked against its values.schema.json), and returns the objects of its
// templates in the order of their file names.
func Render(c *chart.Chart, name, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: name, Namespace: namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("the values of chart %s: %w", c.Name(), err)
	}
	rendered, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", c.Name(), err)
	}
	names := make([]string, 0, len(rendered))
	for file := range rendered {
		if path.Ext(file) == ".yaml" || path.Ext(file) == ".yml" {
			names = append(names, file)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, file := range names {
		for _, doc := range strings.Split(rendered[file], "\n---") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				return nil, fmt.Errorf("%s renders to invalid YAML: %w", file, err)
			}
			if len(m) == 0 {
				continue // a template its values switch off, or comments only
			}
			obj := &unstructured.Unstructured{Object: m}
			if obj.GetKind() == "" || obj.GetName() == "" {
				return nil, fmt.Errorf("%s renders an object without kind or name", file)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}
