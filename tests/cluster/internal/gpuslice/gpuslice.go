// Package gpuslice is the ResourceSlice contract of the test driver
// gpu.example.com, shared by the node simulator (sim/) and the real kubelet
// plugin (draplugin/), so both publish exactly the same slice: one slice per
// node named NODE-DRIVER, owned by the Node, pool NODE, devices gpu-0..gpu-N-1
// with attributes index, model, uuid, driverVersion and capacity memory.
//
// Every call goes through draapi.Client: from 1.34 it speaks whichever
// resource.k8s.io version the API server serves (v1, else v1beta2, else v1beta1,
// converting to and from the v1 types), so both work on a cluster of
// DRAINER_CLUSTER_DRA_API=v1beta2 or v1beta1 as well; on 1.33, v1beta1.
package gpuslice

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"drainer.test/cluster/internal/draapi"
)

// Client is the DRA client of cs (draapi.Client).
func Client(cs kubernetes.Interface) draapi.Interface { return draapi.Client(cs) }

// Informer lists and watches ResourceSlices (tweak: the list options, e.g. a
// field selector) through rc, in whichever version the server serves; its
// objects are *draapi.ResourceSlice. The lister reads its cache.
func Informer(rc draapi.Interface, tweak func(*metav1.ListOptions)) (cache.SharedIndexInformer, draapi.ResourceSliceLister) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return rc.ResourceSlices().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return rc.ResourceSlices().Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &draapi.ResourceSlice{}, 0, cache.Indexers{})
	return inf, draapi.NewResourceSliceLister(inf.GetIndexer())
}

const (
	// AnnSpecHash on a published slice: the hash of its spec (without the
	// pool generation), so a publisher sees at once whether it is current.
	AnnSpecHash = "sim.drainer.io/spec-hash"
	// Model is the "model" attribute of every device.
	Model = "SimGPU-80GB"
	// DriverVersion is the "driverVersion" attribute of every device.
	DriverVersion = "1.0.0"
	// Memory is the "memory" capacity of every device.
	Memory = "80Gi"
)

// Name is the name of node's slice of driver.
func Name(node, driver string) string { return node + "-" + driver }

// Spec is the desired spec of node's slice: pool generation 1 (a publisher
// bumps it on every change).
func Spec(node, driver string, devices int) draapi.ResourceSliceSpec {
	spec := draapi.ResourceSliceSpec{
		Driver: driver,
		Pool:   draapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
	}
	draapi.SetSliceNodeName(&spec, node)
	for i := 0; i < devices; i++ {
		spec.Devices = append(spec.Devices, draapi.NewDevice(DeviceName(i),
			map[draapi.QualifiedName]draapi.DeviceAttribute{
				"index":         {IntValue: ptr.To(int64(i))},
				"model":         {StringValue: ptr.To(Model)},
				"uuid":          {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, i))},
				"driverVersion": {VersionValue: ptr.To(DriverVersion)},
			},
			map[draapi.QualifiedName]draapi.DeviceCapacity{
				"memory": {Value: resource.MustParse(Memory)},
			}))
	}
	return spec
}

// DeviceName is the name of device i.
func DeviceName(i int) string { return fmt.Sprintf("gpu-%d", i) }

// Hash of a spec, pool generation left out.
func Hash(spec draapi.ResourceSliceSpec) string {
	spec.Pool.Generation = 0
	b, _ := json.Marshal(spec)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Matches compares the fields a publisher sets (not server defaults).
func Matches(cur, want *draapi.ResourceSliceSpec) bool {
	if cur.Driver != want.Driver || cur.Pool.Name != want.Pool.Name ||
		cur.Pool.ResourceSliceCount != want.Pool.ResourceSliceCount ||
		draapi.SliceNodeName(cur) != draapi.SliceNodeName(want) || len(cur.Devices) != len(want.Devices) {
		return false
	}
	for i := range want.Devices {
		c, w := &cur.Devices[i], &want.Devices[i]
		ca, cc := draapi.DeviceAttributes(c)
		wa, wc := draapi.DeviceAttributes(w)
		if c.Name != w.Name || !equality.Semantic.DeepEqual(ca, wa) || !equality.Semantic.DeepEqual(cc, wc) {
			return false
		}
	}
	return true
}

// Publish makes node's one slice of driver current, as the kubelet plugin
// helper does while the driver is registered: created if missing, updated
// (pool generation + 1) when its spec or owner differ, and any other slice of
// the driver on the node (existing: the node's slices of the driver as a cache
// holds them) deleted. It returns what it did ("" when nothing), for a log line.
func Publish(ctx context.Context, rc draapi.Interface, node *corev1.Node, driver string, devices int,
	existing []*draapi.ResourceSlice) (string, error) {
	return PublishSpec(ctx, rc, node, driver, Spec(node.Name, driver, devices), existing)
}

// PublishSpec is Publish with a spec of the caller's: Spec(...) with changes of
// its own, e.g. device taints (the kubelet plugin's unhealthy devices). Whatever
// differs in the spec's hash is written.
func PublishSpec(ctx context.Context, rc draapi.Interface, node *corev1.Node, driver string, spec draapi.ResourceSliceSpec,
	existing []*draapi.ResourceSlice) (string, error) {
	name := Name(node.Name, driver)
	devices := len(spec.Devices)
	hash := Hash(spec)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}
	var cur *draapi.ResourceSlice
	for _, sl := range existing {
		if sl.Name == name {
			cur = sl
			continue
		}
		if err := Delete(ctx, rc, sl); err != nil { // strays from another layout
			return "", err
		}
	}
	api := rc.ResourceSlices()
	if cur == nil {
		sl := &draapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				OwnerReferences: []metav1.OwnerReference{owner},
				Annotations:     map[string]string{AnnSpecHash: hash},
			},
			Spec: spec,
		}
		if _, err := api.Create(ctx, sl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		return fmt.Sprintf("published ResourceSlice %s (%d devices)", name, devices), nil
	}
	if cur.Annotations[AnnSpecHash] == hash && len(cur.OwnerReferences) == 1 && cur.OwnerReferences[0].UID == node.UID &&
		Matches(&cur.Spec, &spec) {
		return "", nil
	}
	sl := cur.DeepCopy()
	spec.Pool.Generation = cur.Spec.Pool.Generation + 1
	sl.Spec = spec
	sl.OwnerReferences = []metav1.OwnerReference{owner}
	if sl.Annotations == nil {
		sl.Annotations = map[string]string{}
	}
	sl.Annotations[AnnSpecHash] = hash
	if _, err := api.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		return "", err
	}
	return fmt.Sprintf("updated ResourceSlice %s (pool generation %d)", name, spec.Pool.Generation), nil
}

// Delete removes one slice (UID precondition); gone or replaced is no error.
func Delete(ctx context.Context, rc draapi.Interface, sl *draapi.ResourceSlice) error {
	err := rc.ResourceSlices().Delete(ctx, sl.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &sl.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
