//go:build !kube1.36

package main

import (
	"testing"

	"drainer.test/cluster/internal/draapi"
	"drainer.test/cluster/internal/gpuslice"
)

func checkTaints(t *testing.T, spec draapi.ResourceSliceSpec, plainHash string) {
	t.Helper()
	if gpuslice.Hash(spec) != plainHash {
		t.Error("before 1.36 the slice must be left as it is")
	}
}
