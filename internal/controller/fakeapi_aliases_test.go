package controller

import "github.com/everynode/everynode/internal/fakeapi"

// The fake API server of the controller's tests is internal/fakeapi; these are its
// names as the tests use them.
var (
	podsResource       = fakeapi.PodsResource
	nodesResource      = fakeapi.NodesResource
	daemonSetsResource = fakeapi.DaemonSetsResource
)

type faults = fakeapi.Faults
