package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"drainer.test/cluster/internal/draapi"
)

func claim(uid, name string, results ...draapi.DeviceRequestAllocationResult) *draapi.ResourceClaim {
	return &draapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status: draapi.ResourceClaimStatus{Allocation: &draapi.AllocationResult{
			Devices: draapi.DeviceAllocationResult{Results: results},
		}},
	}
}

func result(pool, device string) draapi.DeviceRequestAllocationResult {
	return draapi.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.example.com", Pool: pool, Device: device}
}

// Prepare returns the allocated devices, refuses a device of another pool, an
// unknown one, and one still prepared for another claim (the driver is the last
// line of defence against a double allocation, e.g. after a force deletion);
// the state survives a restart, so Unprepare works in a new instance and is
// idempotent, and frees the device.
func TestPrepareUnprepare(t *testing.T) {
	dir := t.TempDir()
	newPlugin := func() *plugin {
		return &plugin{cfg: &config{driver: "gpu.example.com", node: "node-1", devices: 4, pluginDir: dir}}
	}
	ctx := context.Background()
	p := newPlugin()
	res, err := p.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{
		claim("a", "one", result("node-1", "gpu-0")),
		claim("b", "other-pool", result("node-2", "gpu-1")),
		claim("c", "unknown", result("node-1", "gpu-9")),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["a"]; r.Err != nil || len(r.Devices) != 1 || r.Devices[0].DeviceName != "gpu-0" || r.Devices[0].PoolName != "node-1" ||
		len(r.Devices[0].Requests) != 1 || r.Devices[0].Requests[0] != "gpu" {
		t.Errorf("claim a: %+v", r)
	}
	if r := res["b"]; r.Err == nil || !strings.Contains(r.Err.Error(), "pool node-2") {
		t.Errorf("claim b (other pool): %+v", r)
	}
	if r := res["c"]; r.Err == nil || !strings.Contains(r.Err.Error(), "no device gpu-9") {
		t.Errorf("claim c (unknown device): %+v", r)
	}
	// Preparing the same claim again is fine; another claim on gpu-0 is not.
	res, err = newPlugin().PrepareResourceClaims(ctx, []*draapi.ResourceClaim{
		claim("a", "one", result("node-1", "gpu-0")),
		claim("d", "twice", result("node-1", "gpu-0")),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res["a"].Err != nil {
		t.Errorf("claim a prepared again: %v", res["a"].Err)
	}
	if r := res["d"]; r.Err == nil || !strings.Contains(r.Err.Error(), "still prepared for claim ns/one") {
		t.Errorf("claim d (gpu-0 twice): %+v", r)
	}
	// A new instance unprepares (twice: idempotent); then gpu-0 is free.
	for i := 0; i < 2; i++ {
		un, err := newPlugin().UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: "a"}})
		if err != nil || len(un) != 1 || un["a"] != nil {
			t.Fatalf("unprepare %d: %v %v", i, un, err)
		}
	}
	res, err = newPlugin().PrepareResourceClaims(ctx, []*draapi.ResourceClaim{claim("d", "twice", result("node-1", "gpu-0"))})
	if err != nil || res["d"].Err != nil {
		t.Errorf("gpu-0 after its unprepare: %v %+v", err, res["d"])
	}
}
