//go:build !kube1.34

package draapi

import (
	resourceapi "k8s.io/api/resource/v1beta1"
	"k8s.io/client-go/kubernetes"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1beta1"
	resourcelisters "k8s.io/client-go/listers/resource/v1beta1"
	"k8s.io/client-go/tools/cache"
)

// Version is the resource.k8s.io version our code speaks.
const Version = "v1beta1"

type (
	Interface           = resourceclient.ResourceV1beta1Interface
	ResourceSliceLister = resourcelisters.ResourceSliceLister

	ResourceSlice     = resourceapi.ResourceSlice
	ResourceSliceSpec = resourceapi.ResourceSliceSpec
	ResourcePool      = resourceapi.ResourcePool
	Device            = resourceapi.Device
	QualifiedName     = resourceapi.QualifiedName
	DeviceAttribute   = resourceapi.DeviceAttribute
	DeviceCapacity    = resourceapi.DeviceCapacity

	ResourceClaim                 = resourceapi.ResourceClaim
	ResourceClaimSpec             = resourceapi.ResourceClaimSpec
	ResourceClaimStatus           = resourceapi.ResourceClaimStatus
	ResourceClaimTemplate         = resourceapi.ResourceClaimTemplate
	ResourceClaimTemplateSpec     = resourceapi.ResourceClaimTemplateSpec
	DeviceClaim                   = resourceapi.DeviceClaim
	DeviceRequest                 = resourceapi.DeviceRequest
	AllocationResult              = resourceapi.AllocationResult
	DeviceAllocationResult        = resourceapi.DeviceAllocationResult
	DeviceRequestAllocationResult = resourceapi.DeviceRequestAllocationResult
)

// Client is the v1beta1 client of cs (served by 1.33 whenever DRA is).
func Client(cs kubernetes.Interface) Interface { return cs.ResourceV1beta1() }

// NewResourceSliceLister reads the ResourceSlices of an informer's indexer.
func NewResourceSliceLister(idx cache.Indexer) ResourceSliceLister {
	return resourcelisters.NewResourceSliceLister(idx)
}

// NewDevice is a device with these attributes and capacities.
func NewDevice(name string, attrs map[QualifiedName]DeviceAttribute, capacity map[QualifiedName]DeviceCapacity) Device {
	return Device{Name: name, Basic: &resourceapi.BasicDevice{Attributes: attrs, Capacity: capacity}}
}

// DeviceAttributes are d's attributes and capacities.
func DeviceAttributes(d *Device) (map[QualifiedName]DeviceAttribute, map[QualifiedName]DeviceCapacity) {
	if d.Basic == nil {
		return nil, nil
	}
	return d.Basic.Attributes, d.Basic.Capacity
}

// SliceNodeName is the node of a slice's pool ("" for none).
func SliceNodeName(s *ResourceSliceSpec) string { return s.NodeName }

// SetSliceNodeName makes node the node of a slice's pool.
func SetSliceNodeName(s *ResourceSliceSpec, node string) { s.NodeName = node }

// ExactRequest asks for exactly one device of class.
func ExactRequest(name, class string) DeviceRequest {
	return DeviceRequest{Name: name, DeviceClassName: class}
}
