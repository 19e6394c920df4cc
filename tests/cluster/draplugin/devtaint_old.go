//go:build !kube1.36

package main

import "drainer.test/cluster/internal/draapi"

// taintDevices: before 1.36 the DRADeviceTaints gate is off by default (the API
// server drops a slice's device taints), so an unhealthy device is reported
// through the health API only and the slice is left as it is.
func taintDevices(*draapi.ResourceSliceSpec, string, map[string]bool) {}
