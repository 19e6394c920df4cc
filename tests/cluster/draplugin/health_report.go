//go:build kube1.37

package main

import (
	"context"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"drainer.test/cluster/internal/gpuslice"
)

// WatchHealthStatus (k8s.io/dynamic-resource-allocation 0.37 and newer, where the
// kubeletplugin helper serves the DRAResourceHealth gRPC API itself, v1 and
// v1alpha1, and every DRAPlugin must have it): the same reports as
// NodeWatchResources sends on older releases (main.go): all devices healthy, or all
// unhealthy while the node is annotated driver-unhealthy, and unhealthy the devices
// annotated unhealthy-devices (main.go); at once, on every change
// and every 30 s (the kubelet's default timeout is 30 s, ours 90 s).
func (p *plugin) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		p.mu.Lock()
		bad, badDevices, changed := p.unhealthy, p.badDevices, p.changed
		p.mu.Unlock()
		var r kubeletplugin.DeviceHealthReport
		now := time.Now()
		for i := 0; i < p.cfg.devices; i++ {
			h := kubeletplugin.HealthStatusHealthy
			if !healthOf(i, bad, badDevices) {
				h = kubeletplugin.HealthStatusUnhealthy
			}
			r.Devices = append(r.Devices, kubeletplugin.DeviceHealth{
				PoolName: p.cfg.node, DeviceName: gpuslice.DeviceName(i),
				Health: h, LastUpdated: now, HealthCheckTimeout: 90 * time.Second,
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- r:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}
