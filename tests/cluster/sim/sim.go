package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"drainer.test/cluster/internal/draapi"
	"drainer.test/cluster/internal/gpuslice"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	annUnhealthy = "sim.drainer.io/driver-unhealthy" // "true": the node's driver answers NOT_SERVING
	annNotReady  = "sim.drainer.io/driver-not-ready" // "true": the node's driver pod reports Ready=False
	annMirror    = "kubernetes.io/config.mirror"
	annRunFor    = "sim.drainer.io/run-for" // a duration: the pod's containers exit 0 after running that long
	byNodeIndex  = "node"
)

// simNode is the simulated kubelet + DRA driver state of one node.
type simNode struct {
	name     string
	index    int
	ip       string // node InternalIP: P.0.i
	driverIP string // driver pod IP: P.i.1
	health   *health.Server
	grpc     *grpc.Server

	mu              sync.Mutex
	ipByUID         map[types.UID]string
	uidByIP         map[string]types.UID
	nextIP          int
	driverRunning   bool
	driverDownSince time.Time
	serving         bool
	waitLogged      map[types.UID]bool
}

type sim struct {
	cfg   *config
	cs    kubernetes.Interface
	nodes map[string]*simNode
	order []*simNode

	podInformer  cache.SharedIndexInformer
	podLister    corelisters.PodLister
	nodeLister   corelisters.NodeLister
	sliceLister  draapi.ResourceSliceLister // nil with --dra=false
	dra          draapi.Interface           // nil with --dra=false
	podQueue     workqueue.TypedRateLimitingInterface[string]
	nodeQueue    workqueue.TypedRateLimitingInterface[string]
	deletionMu   sync.Mutex
	deletionSeen map[types.UID]time.Time
	rc           *rest.Config // for the kubeconfigs of exec hooks
	hooksMu      sync.Mutex
	hooks        map[types.UID]*hookRun
	hookProcs    sync.WaitGroup // hooks still running
	hooksStopped bool           // the simulator is stopping: no new hooks
}

func newSim(cfg *config, cs kubernetes.Interface) *sim {
	s := &sim{
		cfg:          cfg,
		cs:           cs,
		nodes:        map[string]*simNode{},
		deletionSeen: map[types.UID]time.Time{},
		hooks:        map[types.UID]*hookRun{},
		podQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods"}),
		nodeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodes"}),
	}
	now := time.Now()
	for i := 1; i <= cfg.nodes; i++ {
		n := &simNode{
			name:            cfg.nodePrefix + strconv.Itoa(i),
			index:           i,
			ip:              cfg.ipAt(0, i),
			driverIP:        cfg.ipAt(i, 1),
			ipByUID:         map[types.UID]string{},
			uidByIP:         map[string]types.UID{},
			nextIP:          2,
			driverDownSince: now,
			waitLogged:      map[types.UID]bool{},
		}
		s.nodes[n.name] = n
		s.order = append(s.order, n)
	}
	return s
}

func (s *sim) run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer s.podQueue.ShutDown()
	defer s.nodeQueue.ShutDown()

	// Health servers first: a port clash is a fatal configuration error.
	for _, n := range s.order {
		if err := s.startHealth(n); err != nil {
			return err
		}
	}
	defer func() {
		for _, n := range s.order {
			n.grpc.Stop()
		}
	}()

	// Register the nodes before anything else, as the kubelet does.
	for _, n := range s.order {
		if err := s.registerNode(ctx, n); err != nil {
			return err
		}
	}

	podFactory := informers.NewSharedInformerFactoryWithOptions(s.cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	nodeFactory := informers.NewSharedInformerFactory(s.cs, 0)

	pods := podFactory.Core().V1().Pods()
	s.podInformer = pods.Informer()
	if err := s.podInformer.AddIndexers(cache.Indexers{byNodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	s.podLister = pods.Lister()
	nodes := nodeFactory.Core().V1().Nodes()
	s.nodeLister = nodes.Lister()
	// The slices in whichever DRA API the server serves; none with --dra=false.
	var sliceInf cache.SharedIndexInformer
	if s.cfg.dra {
		s.dra = gpuslice.Client(s.cs)
		sliceInf, s.sliceLister = gpuslice.Informer(s.dra, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.driver", s.cfg.driver).String()
		})
	}

	if _, err := s.podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onPod(nil, obj) },
		UpdateFunc: func(old, obj any) { s.onPod(old, obj) },
		DeleteFunc: s.onPodDelete,
	}); err != nil {
		return err
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.onNode,
		UpdateFunc: func(_, obj any) { s.onNode(obj) },
		DeleteFunc: s.onNode,
	}); err != nil {
		return err
	}
	synced := []cache.InformerSynced{s.podInformer.HasSynced, nodes.Informer().HasSynced}
	if sliceInf != nil {
		if _, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    s.onSlice,
			UpdateFunc: func(_, obj any) { s.onSlice(obj) },
			DeleteFunc: s.onSlice,
		}); err != nil {
			return err
		}
		go sliceInf.RunWithContext(ctx)
		synced = append(synced, sliceInf.HasSynced)
	}

	podFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("informers did not sync")
	}

	if s.cfg.bindDaemonSetPods {
		if err := s.runBinder(ctx); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < s.cfg.workers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); s.worker(ctx, s.podQueue, s.syncPod) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.worker(ctx, s.nodeQueue, s.syncNode) }()
	for _, n := range s.order {
		s.nodeQueue.Add(n.name)
		wg.Add(1)
		go func(n *simNode) { defer wg.Done(); s.heartbeat(ctx, n) }(n)
	}
	log.Printf("ready: %d nodes (%s..%s), ip prefix %s, driver %s, terminate-delay %v, slice-wipe-delay %v",
		len(s.order), s.order[0].name, s.order[len(s.order)-1].name, s.cfg.ipPrefix, s.cfg.driver,
		s.cfg.terminateDelay, s.cfg.sliceWipeDelay)
	if s.cfg.hooks {
		kc := "a token of the pod's ServiceAccount"
		if s.cfg.hookKubeconfig != "" {
			kc = s.cfg.hookKubeconfig
		}
		log.Printf("preStop hooks: on; exec hooks run on the host for --hook-path-map %q, KUBECONFIG: %s, in %s",
			s.cfg.hookPathMap.String(), kc, s.cfg.hookDir)
	} else {
		log.Printf("preStop hooks: off")
	}

	<-ctx.Done()
	s.stopHooks()
	s.podQueue.ShutDown()
	s.nodeQueue.ShutDown()
	wg.Wait()
	return nil
}

func (s *sim) worker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		err := sync(ctx, key)
		if err != nil && ctx.Err() == nil {
			// Conflicts come from a cache a step behind our own writes: retry quietly.
			if (!apierrors.IsConflict(err) && q.NumRequeues(key) < 5) || q.NumRequeues(key)%20 == 19 {
				log.Printf("sync %s: %v (retrying)", key, err)
			}
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// ---- event handlers ----

func (s *sim) isDriverPod(p *corev1.Pod) bool {
	return p.Namespace == s.cfg.driverNamespace && s.cfg.driverSelector.Matches(labels.Set(p.Labels))
}

func (s *sim) onPod(_, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n := s.nodes[p.Spec.NodeName]
	if n == nil {
		return
	}
	if p.Status.PodIP != "" && p.Status.PodIP != n.ip && p.Status.PodIP != n.driverIP {
		n.reserveIP(p.UID, p.Status.PodIP) // pods that ran before a restart keep their IP
	}
	if p.DeletionTimestamp != nil {
		s.deletionMu.Lock()
		if _, seen := s.deletionSeen[p.UID]; !seen {
			s.deletionSeen[p.UID] = time.Now()
		}
		s.deletionMu.Unlock()
	}
	s.podQueue.Add(cache.MetaObjectToName(p).String())
	if s.isDriverPod(p) {
		s.nodeQueue.Add(n.name)
	}
}

func (s *sim) onPodDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n := s.nodes[p.Spec.NodeName]
	if n == nil {
		return
	}
	n.releaseIP(p.UID)
	s.deletionMu.Lock()
	delete(s.deletionSeen, p.UID)
	s.deletionMu.Unlock()
	s.forgetHooks(p.UID)
	if s.isDriverPod(p) {
		s.nodeQueue.Add(n.name)
	}
}

func (s *sim) onNode(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if node, ok := obj.(*corev1.Node); ok && s.nodes[node.Name] != nil {
		s.nodeQueue.Add(node.Name)
	}
}

func (s *sim) onSlice(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if sl, ok := obj.(*draapi.ResourceSlice); ok {
		if n := draapi.SliceNodeName(&sl.Spec); n != "" && s.nodes[n] != nil {
			s.nodeQueue.Add(n)
		}
	}
}

// podsOn lists the cached pods bound to a node.
func (s *sim) podsOn(node string) []*corev1.Pod {
	objs, _ := s.podInformer.GetIndexer().ByIndex(byNodeIndex, node)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// ---- pod IPs ----

func (n *simNode) reserveIP(uid types.UID, ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.ipByUID[uid]; ok {
		return
	}
	if _, taken := n.uidByIP[ip]; taken {
		return
	}
	n.ipByUID[uid] = ip
	n.uidByIP[ip] = uid
}

// allocIP gives a pod of this node an address P.i.j, j in 2..254, unique among
// the node's live pods.
func (n *simNode) allocIP(uid types.UID, prefix string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.ipByUID[uid]; ok {
		return ip, nil
	}
	for tries := 0; tries < 253; tries++ {
		j := n.nextIP
		n.nextIP++
		if n.nextIP > 254 {
			n.nextIP = 2
		}
		ip := fmt.Sprintf("%s.%d.%d", prefix, n.index, j)
		if _, taken := n.uidByIP[ip]; !taken {
			n.ipByUID[uid] = ip
			n.uidByIP[ip] = uid
			return ip, nil
		}
	}
	return "", fmt.Errorf("node %s: no free pod IP (253 pods)", n.name)
}

func (n *simNode) releaseIP(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ip, ok := n.ipByUID[uid]; ok {
		delete(n.ipByUID, uid)
		delete(n.uidByIP, ip)
	}
	delete(n.waitLogged, uid)
}

// ---- gRPC health ----

func (s *sim) startHealth(n *simNode) error {
	addr := net.JoinHostPort(n.driverIP, strconv.Itoa(s.cfg.healthPort))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health server for %s: %w", n.name, err)
	}
	n.health = health.NewServer()
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	n.health.SetServingStatus("liveness", healthpb.HealthCheckResponse_NOT_SERVING)
	n.grpc = grpc.NewServer()
	healthpb.RegisterHealthServer(n.grpc, n.health)
	go func() {
		if err := n.grpc.Serve(lis); err != nil {
			log.Printf("health server %s: %v", addr, err)
		}
	}()
	return nil
}

func (n *simNode) setServing(serving bool) {
	n.mu.Lock()
	changed := n.serving != serving
	n.serving = serving
	n.mu.Unlock()
	if !changed {
		return
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	n.health.SetServingStatus("", st)
	n.health.SetServingStatus("liveness", st)
	log.Printf("node %s: driver health at %s is %v", n.name, n.driverIP, st)
}
