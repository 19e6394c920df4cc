//go:build kube1.36

package main

import (
	resourceapi "k8s.io/api/resource/v1"

	"drainer.test/cluster/internal/draapi"
)

// taintEffect of an unhealthy device's taint: nothing new is allocated on it, what
// runs on it keeps running (what becomes of it is a drain's choice, not the driver's).
const taintEffect = resourceapi.DeviceTaintEffectNoSchedule

// taintDevices puts the device taint DRIVER/unhealthy (effect NoSchedule) on the
// devices of spec named in bad: the driver's own signal beside the health report,
// as a real driver publishes a failed device (KEP-5055). From 1.36, where the
// DRADeviceTaints gate is on by default (beta; GA in 1.37).
func taintDevices(spec *draapi.ResourceSliceSpec, driver string, bad map[string]bool) {
	for i := range spec.Devices {
		d := &spec.Devices[i]
		if bad[d.Name] {
			d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: driver + "/unhealthy", Value: "true", Effect: taintEffect})
		}
	}
}
