package daemon

import (
	apps "k8s.io/api/apps/v1"
	extensions "k8s.io/api/extensions/v1beta1"
)

// Well-known keys a daemon pod and a ControllerRevision carry.
const (
	// HashLabel names the ControllerRevision a pod was created from.
	HashLabel = apps.DefaultDaemonSetUniqueLabelKey
	// TemplateGenerationLabel carries the DaemonSet's template generation (legacy).
	TemplateGenerationLabel = extensions.DaemonSetTemplateGenerationKey
	// TemplateGenerationAnnotation is where the API server records the template
	// generation on the DaemonSet itself.
	TemplateGenerationAnnotation = apps.DeprecatedTemplateGeneration
)
