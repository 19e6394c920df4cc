package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"drainer.test/cluster/internal/draapi"
	"drainer.test/cluster/internal/gpuslice"
)

const leaseNamespace = "kube-node-lease"

var nodeConditions = []struct {
	typ             corev1.NodeConditionType
	status          corev1.ConditionStatus
	reason, message string
}{
	{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
	{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
	{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
	{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
}

func (s *sim) nodeObject(n *simNode) *corev1.Node {
	lbl := map[string]string{
		corev1.LabelHostname:      n.name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
	}
	for k, v := range s.cfg.nodeLabels {
		lbl[k] = v
	}
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("32Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.name,
			Labels: lbl,
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.ip},
				{Type: corev1.NodeHostName, Address: n.name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               fmt.Sprintf("%032x", n.index),
				SystemUUID:              fmt.Sprintf("00000000-0000-0000-0000-%012x", n.index),
				BootID:                  fmt.Sprintf("boot-%s", n.name),
				KernelVersion:           "6.1.0-sim",
				OSImage:                 "drainer-sim",
				ContainerRuntimeVersion: "sim://1.0.0",
				KubeletVersion:          s.cfg.kubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	for _, c := range nodeConditions {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: c.typ, Status: c.status, Reason: c.reason, Message: c.message,
			LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	return node
}

// registerNode creates the Node if it does not exist (a kubelet registering).
func (s *sim) registerNode(ctx context.Context, n *simNode) error {
	_, err := s.cs.CoreV1().Nodes().Create(ctx, s.nodeObject(n), metav1.CreateOptions{})
	switch {
	case err == nil:
		log.Printf("node %s: registered (InternalIP %s)", n.name, n.ip)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	default:
		return fmt.Errorf("register node %s: %w", n.name, err)
	}
}

// heartbeat renews the node Lease every --lease-renew and reports the node
// conditions every --status-report, like the kubelet's node status loop.
func (s *sim) heartbeat(ctx context.Context, n *simNode) {
	var lease *coordinationv1.Lease
	var lastStatus time.Time
	t := time.NewTicker(s.cfg.leaseRenew)
	defer t.Stop()
	for {
		lease = s.renewLease(ctx, n, lease)
		if time.Since(lastStatus) >= s.cfg.statusReport || s.nodeNotReady(n.name) {
			if err := s.reportStatus(ctx, n); err != nil {
				if ctx.Err() == nil {
					log.Printf("node %s: status: %v", n.name, err)
				}
			} else {
				lastStatus = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sim) nodeNotReady(name string) bool {
	node, err := s.nodeLister.Get(name)
	if err != nil {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

func (s *sim) renewLease(ctx context.Context, n *simNode, lease *coordinationv1.Lease) *coordinationv1.Lease {
	leases := s.cs.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	if lease != nil {
		l := lease.DeepCopy()
		l.Spec.RenewTime = &now
		out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			return out
		}
		if ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			log.Printf("node %s: lease update: %v", n.name, err)
		}
	}
	l, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := s.cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				s.nodeQueue.Add(n.name) // re-register
			}
			return nil
		}
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: n.name, Namespace: leaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.name),
				LeaseDurationSeconds: ptr.To(int32(s.cfg.leaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}
		out, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			if ctx.Err() == nil {
				log.Printf("node %s: lease create: %v", n.name, err)
			}
			return nil
		}
		return out
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Printf("node %s: lease get: %v", n.name, err)
		}
		return nil
	}
	l.Spec.RenewTime = &now
	l.Spec.HolderIdentity = ptr.To(n.name)
	out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		if ctx.Err() == nil {
			log.Printf("node %s: lease update: %v", n.name, err)
		}
		return nil
	}
	return out
}

// reportStatus patches the node conditions with a fresh heartbeat.
func (s *sim) reportStatus(ctx context.Context, n *simNode) error {
	current := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	if node, err := s.nodeLister.Get(n.name); err == nil {
		for _, c := range node.Status.Conditions {
			current[c.Type] = c.Status
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	var conds []map[string]any
	for _, c := range nodeConditions {
		m := map[string]any{
			"type": c.typ, "status": c.status, "reason": c.reason, "message": c.message,
			"lastHeartbeatTime": now,
		}
		if current[c.typ] != c.status {
			m["lastTransitionTime"] = now
		}
		conds = append(conds, m)
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	_, err := s.cs.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		s.nodeQueue.Add(n.name)
	}
	return err
}

// ---- driver state and ResourceSlices (one sync per node) ----

func (s *sim) driverRunningOn(node string) bool {
	for _, p := range s.podsOn(node) {
		// A driver pod being deleted still serves until its preStop hook returned:
		// the kubelet stops the containers only then.
		if s.isDriverPod(p) && p.Status.Phase == corev1.PodRunning && (p.DeletionTimestamp == nil || s.hookPending(p)) {
			return true
		}
	}
	return false
}

func (s *sim) syncNode(ctx context.Context, name string) error {
	n := s.nodes[name]
	if n == nil {
		return nil
	}
	node, err := s.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		// Someone deleted the Node: the kubelet registers it again.
		if live, gerr := s.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			node = live
		} else if apierrors.IsNotFound(gerr) {
			return s.registerNode(ctx, n)
		} else {
			return gerr
		}
	} else if err != nil {
		return err
	}

	running := s.driverRunningOn(name)
	unhealthy := node.Annotations[annUnhealthy] == "true"
	n.mu.Lock()
	changed := running != n.driverRunning
	n.driverRunning = running
	if changed && !running {
		n.driverDownSince = time.Now()
	}
	downSince := n.driverDownSince
	n.mu.Unlock()
	n.setServing(running && !unhealthy)
	for _, p := range s.podsOn(name) {
		// On a driver change every pod may start or finish; driver pods also
		// follow the not-ready switch.
		if changed || s.isDriverPod(p) {
			s.podQueue.Add(p.Namespace + "/" + p.Name)
		}
	}
	if changed {
		if running {
			log.Printf("node %s: driver %s running", name, s.cfg.driver)
		} else {
			log.Printf("node %s: driver %s stopped; slice wipe in %v", name, s.cfg.driver, s.cfg.sliceWipeDelay)
		}
	}

	if s.sliceLister == nil { // --dra=false: no DRA API
		return nil
	}
	var slices []*draapi.ResourceSlice
	all, err := s.sliceLister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, sl := range all {
		if draapi.SliceNodeName(&sl.Spec) == name && sl.Spec.Driver == s.cfg.driver {
			slices = append(slices, sl)
		}
	}
	if running {
		return s.ensureSlice(ctx, node, slices)
	}
	if len(slices) == 0 {
		return nil
	}
	if wait := time.Until(downSince.Add(s.cfg.sliceWipeDelay)); wait > 0 {
		s.nodeQueue.AddAfter(name, wait)
		return nil
	}
	for _, sl := range slices {
		if err := s.deleteSlice(ctx, sl); err != nil {
			return err
		}
		log.Printf("node %s: wiped ResourceSlice %s (driver gone for %v)", name, sl.Name, time.Since(downSince).Round(time.Millisecond))
	}
	return nil
}

func (s *sim) deleteSlice(ctx context.Context, sl *draapi.ResourceSlice) error {
	return gpuslice.Delete(ctx, s.dra, sl)
}

// ensureSlice publishes the node's one ResourceSlice, owned by the Node, as the
// kubelet plugin helper does while the driver is registered.
func (s *sim) ensureSlice(ctx context.Context, node *corev1.Node, existing []*draapi.ResourceSlice) error {
	did, err := gpuslice.Publish(ctx, s.dra, node, s.cfg.driver, s.cfg.devices, existing)
	if did != "" {
		log.Printf("node %s: %s", node.Name, did)
	}
	return err
}
