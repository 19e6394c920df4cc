//go:build kube1.34

package draapi

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	draclient "k8s.io/dynamic-resource-allocation/client"
	"k8s.io/utils/ptr"
)

// Version is the resource.k8s.io version our code speaks.
const Version = "v1"

type (
	Interface           = resourceclient.ResourceV1Interface
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

// Client is the DRA client of cs: the v1 typed client, falling back to v1beta2
// and v1beta1 when the server answers 404 (the group version is not served).
func Client(cs kubernetes.Interface) Interface { return draclient.New(cs) }

// NewResourceSliceLister reads the ResourceSlices of an informer's indexer.
func NewResourceSliceLister(idx cache.Indexer) ResourceSliceLister {
	return resourcelisters.NewResourceSliceLister(idx)
}

// NewDevice is a device with these attributes and capacities.
func NewDevice(name string, attrs map[QualifiedName]DeviceAttribute, capacity map[QualifiedName]DeviceCapacity) Device {
	return Device{Name: name, Attributes: attrs, Capacity: capacity}
}

// DeviceAttributes are d's attributes and capacities.
func DeviceAttributes(d *Device) (map[QualifiedName]DeviceAttribute, map[QualifiedName]DeviceCapacity) {
	return d.Attributes, d.Capacity
}

// SliceNodeName is the node of a slice's pool ("" for none).
func SliceNodeName(s *ResourceSliceSpec) string { return ptr.Deref(s.NodeName, "") }

// SetSliceNodeName makes node the node of a slice's pool.
func SetSliceNodeName(s *ResourceSliceSpec, node string) { s.NodeName = ptr.To(node) }

// ExactRequest asks for exactly one device of class.
func ExactRequest(name, class string) DeviceRequest {
	return DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}
}
