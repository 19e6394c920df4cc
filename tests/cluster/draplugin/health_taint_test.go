//go:build kube1.36

package main

import (
	"testing"

	"drainer.test/cluster/internal/draapi"
	"drainer.test/cluster/internal/gpuslice"
)

func checkTaints(t *testing.T, spec draapi.ResourceSliceSpec, plainHash string) {
	t.Helper()
	for _, d := range spec.Devices {
		n := len(d.Taints)
		switch {
		case d.Name == "gpu-2" && (n != 1 || d.Taints[0].Key != "gpu.example.com/unhealthy" || d.Taints[0].Effect != "NoSchedule"):
			t.Errorf("gpu-2's taints: %+v", d.Taints)
		case d.Name != "gpu-2" && n != 0:
			t.Errorf("%s tainted: %+v", d.Name, d.Taints)
		}
	}
	if gpuslice.Hash(spec) == plainHash {
		t.Error("the hash does not change with the taints")
	}
}
