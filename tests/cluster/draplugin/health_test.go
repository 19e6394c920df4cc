package main

import (
	"reflect"
	"testing"

	"drainer.test/cluster/internal/gpuslice"
)

// The annotation sim.drainer.io/unhealthy-devices: a comma-separated list, blanks
// and empty items ignored; a device is unhealthy when named or when the whole
// driver is; names that are no device of the node are reported.
func TestUnhealthyDevices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]bool
	}{
		{"", map[string]bool{}},
		{"gpu-3", map[string]bool{"gpu-3": true}},
		{" gpu-1 ,, gpu-3,", map[string]bool{"gpu-1": true, "gpu-3": true}},
		{"gpu-3,gpu-3", map[string]bool{"gpu-3": true}},
	} {
		if got := parseDevices(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseDevices(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	bad := parseDevices("gpu-3,gpu-9,nic-0")
	if got := unknownDevices(bad, 4); !reflect.DeepEqual(got, []string{"gpu-9", "nic-0"}) {
		t.Errorf("unknownDevices = %v", got)
	}
	for i := 0; i < 4; i++ {
		if got, want := healthOf(i, false, bad), i != 3; got != want {
			t.Errorf("device %d healthy = %v, want %v", i, got, want)
		}
		if healthOf(i, true, nil) {
			t.Errorf("device %d healthy while the driver is unhealthy", i)
		}
	}
	if !sameSet(parseDevices("a,b"), parseDevices("b, a")) || sameSet(parseDevices("a"), parseDevices("a,b")) ||
		sameSet(parseDevices("a"), parseDevices("b")) {
		t.Error("sameSet")
	}
}

// taintDevices taints exactly the named devices (from 1.36; before, the slice is
// left as it is), and the slice's hash changes with the taints, so the plugin
// writes them.
func TestTaintDevices(t *testing.T) {
	spec := gpuslice.Spec("node-1", "gpu.example.com", 4)
	plain := gpuslice.Hash(spec)
	taintDevices(&spec, "gpu.example.com", parseDevices("gpu-2"))
	checkTaints(t, spec, plain)
}
