// Package draapi is the resource.k8s.io API of the release tests/cluster is built
// for, under one set of names, so the simulator, the kubelet plugin and the Go
// tests have one source for every release (versions/select.sh sets the build
// tags): resource.k8s.io/v1 from 1.34 (v1.go), v1beta1 on 1.33 (v1beta1.go).
//
// On 1.33 everything that reads claims and slices in the release itself (the
// kubelet, the scheduler, the resourceclaim controller, the kubeletplugin
// helper) reads v1beta1, and v1beta1 is served in both settings of
// DRAINER_CLUSTER_DRA_API that serve DRA there (v1beta2 serves v1beta1 too), so
// our code speaks v1beta1 as well. From 1.34, Client falls back from v1 to
// v1beta2 and v1beta1 (k8s.io/dynamic-resource-allocation/client) and converts.
//
// Where the two differ in shape (a v1beta1 device keeps its attributes under
// Basic, a v1beta1 slice's nodeName is a string, a v1beta1 request names its
// class without Exactly), the functions below build and read them.
package draapi
