//go:build kube1.34

package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

	"drainer.test/cluster/internal/gpuslice"
)

// healthServerBase: the plugin serves DRAResourceHealth (k8s.io/kubelet 0.34 and
// newer; the kubeletplugin helper registers it when the plugin implements it).
type healthServerBase = drahealthv1alpha1.UnimplementedDRAResourceHealthServer

var _ drahealthv1alpha1.DRAResourceHealthServer = &plugin{}

// NodeWatchResources streams the health of the node's devices to the kubelet
// (DRAResourceHealth, which it shows in the pods' allocatedResourcesStatus): all
// healthy, or all unhealthy while the node is annotated driver-unhealthy, and
// unhealthy the devices annotated unhealthy-devices (main.go); sent
// at once, on every change and every 30 s.
func (p *plugin) NodeWatchResources(_ *drahealthv1alpha1.NodeWatchResourcesRequest, stream drahealthv1alpha1.DRAResourceHealth_NodeWatchResourcesServer) error {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		p.mu.Lock()
		bad, badDevices, changed := p.unhealthy, p.badDevices, p.changed
		p.mu.Unlock()
		resp := &drahealthv1alpha1.NodeWatchResourcesResponse{}
		for i := 0; i < p.cfg.devices; i++ {
			h := drahealthv1alpha1.HealthStatus_HEALTHY
			if !healthOf(i, bad, badDevices) {
				h = drahealthv1alpha1.HealthStatus_UNHEALTHY
			}
			d := &drahealthv1alpha1.DeviceHealth{
				Device:          &drahealthv1alpha1.DeviceIdentifier{PoolName: p.cfg.node, DeviceName: gpuslice.DeviceName(i)},
				Health:          h,
				LastUpdatedTime: time.Now().Unix(),
			}
			setHealthTimeout(d, 90)
			resp.Devices = append(resp.Devices, d)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// HandleError: background errors of the helper; a fatal one stops the plugin
// (the kubelet restarts its container).
func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	log.Printf("%s: %v", msg, err)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		p.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}
