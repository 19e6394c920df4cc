package main

import (
	"context"
	"log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// With --bind-daemonset-pods the simulator binds the pending pods of DaemonSets to
// the node their required node affinity names (the DaemonSet controller's
// metadata.name matchFields term), as kube-scheduler would. For a control plane
// whose scheduler schedules nothing: 1.36's kube-scheduler waits for its
// resource.k8s.io/v1 informers (pkg/scheduler/scheduler.go, the DRA manager; the
// DynamicResourceAllocation gate is locked on), which never sync on a server that
// serves DRA at v1beta2 or v1beta1 only, or not at all
// (DRAINER_CLUSTER_DRA_API=v1beta2|v1beta1|off). Other pods are left alone: a test
// sets their spec.nodeName itself.

// daemonSetNode is the one node a DaemonSet pod's affinity names, or "".
func daemonSetNode(p *corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	owned := false
	for _, o := range p.OwnerReferences {
		owned = owned || (o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller)
	}
	if !owned {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func (s *sim) runBinder(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(s.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
	}))
	inf := f.Core().V1().Pods().Informer()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "bind"})
	add := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	go func() { <-ctx.Done(); q.ShutDown() }()
	go s.worker(ctx, q, func(ctx context.Context, key string) error {
		obj, ok, err := inf.GetIndexer().GetByKey(key)
		if err != nil || !ok {
			return err
		}
		p := obj.(*corev1.Pod)
		node := daemonSetNode(p)
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || node == "" || s.nodes[node] == nil {
			return nil
		}
		err = s.cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		if err == nil {
			log.Printf("bound DaemonSet pod %s to %s", key, node)
		}
		return err
	})
	return nil
}
