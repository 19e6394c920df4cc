// Command drainer-dra-plugin is the DRA kubelet plugin of the test driver
// (gpu.example.com by default) on the real nodes of tests/cluster: it runs as
// the dra-driver DaemonSet's pod (image drainer.test/dra-plugin:dev) through
// drainer-cri. See tests/cluster/README.md, "Real nodes".
//
//   - Registers with the kubelet and serves NodePrepareResources /
//     NodeUnprepareResources through k8s.io/dynamic-resource-allocation/kubeletplugin;
//     prepared claims are kept in a file of the plugin folder, so a restarted
//     (or, with --seamless-upgrade, a second) instance unprepares what an earlier
//     one prepared, and a device is never prepared for two claims at once.
//   - Publishes the node's ResourceSlice exactly as the simulator does
//     (internal/gpuslice: NODE-DRIVER, owned by the Node, devices gpu-0.. with
//     their attributes and capacity), and repairs it while it runs. It does not
//     delete it when it stops: the kubelet wipes it 30 s after the plugin
//     unregistered, as for any driver.
//   - Reports the health of its devices to the kubelet (DRAResourceHealth, which
//     the kubelet shows in the pods' status.containerStatuses[].allocatedResourcesStatus):
//     all unhealthy while the node is annotated sim.drainer.io/driver-unhealthy=true,
//     and the devices the node's annotation sim.drainer.io/unhealthy-devices names
//     (a comma-separated list, e.g. "gpu-3" or "gpu-1,gpu-3"); from 1.36 those devices
//     also carry the NoSchedule device taint DRIVER/unhealthy in the slice (devtaint.go).
//   - Serves grpc.health.v1 at POD_IP:--healthcheck-port: services "" and
//     "liveness" are SERVING while the kubelet has the plugin registered and the
//     node is not annotated sim.drainer.io/driver-unhealthy=true; service
//     "readiness" (the DaemonSet's readiness probe) while it is registered and
//     the node is not annotated sim.drainer.io/driver-not-ready=true, so that
//     switch makes the pod report Ready=False while it keeps running.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"drainer.test/cluster/internal/draapi"
	"drainer.test/cluster/internal/gpuslice"
)

const (
	annUnhealthy = "sim.drainer.io/driver-unhealthy"
	annNotReady  = "sim.drainer.io/driver-not-ready"
	// annUnhealthyDevices: the node's devices of this driver that are out of order,
	// comma-separated ("gpu-3").
	annUnhealthyDevices = "sim.drainer.io/unhealthy-devices"
)

// parseDevices reads annUnhealthyDevices' value: names, comma-separated, blanks
// around them and empty items ignored. Names that are no device of the node are
// kept (and reported by unknownDevices), so a typo is visible in the log.
func parseDevices(v string) map[string]bool {
	set := map[string]bool{}
	for _, d := range strings.Split(v, ",") {
		if d = strings.TrimSpace(d); d != "" {
			set[d] = true
		}
	}
	return set
}

// unknownDevices are the names of set that are none of the node's n devices, sorted.
func unknownDevices(set map[string]bool, n int) []string {
	var out []string
	for d := range set {
		known := false
		for i := 0; i < n && !known; i++ {
			known = gpuslice.DeviceName(i) == d
		}
		if !known {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// sameSet: a and b hold the same names.
func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// healthOf the node's device i for a report: unhealthy when the whole driver is
// (driverBad) or the device is named in badDevices.
func healthOf(i int, driverBad bool, badDevices map[string]bool) bool {
	return !driverBad && !badDevices[gpuslice.DeviceName(i)]
}

type config struct {
	driver       string
	node         string
	devices      int
	healthAddr   string
	healthPort   int
	registryDir  string
	pluginDir    string
	kubeconfig   string
	seamless     bool
	podUID       string
	grpcLogLevel int
}

func parseFlags() (*config, error) {
	c := &config{}
	klog.InitFlags(nil)
	flag.StringVar(&c.driver, "driver-name", "gpu.example.com", "DRA driver name")
	flag.StringVar(&c.node, "node-name", os.Getenv("NODE_NAME"), "this node (default $NODE_NAME)")
	flag.IntVar(&c.devices, "devices", 4, "devices of the node's slice (gpu-0 ..)")
	flag.StringVar(&c.healthAddr, "healthcheck-address", os.Getenv("POD_IP"), "address of the grpc.health.v1 server (default $POD_IP)")
	flag.IntVar(&c.healthPort, "healthcheck-port", 51515, "port of the grpc.health.v1 server (0: none)")
	flag.StringVar(&c.registryDir, "kubelet-registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration folder")
	flag.StringVar(&c.pluginDir, "plugin-dir", "", "folder of the plugin's socket and state (default /var/lib/kubelet/plugins/DRIVER)")
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, the pod's ServiceAccount)")
	flag.BoolVar(&c.seamless, "seamless-upgrade", false, "register per pod ($POD_UID) so a new pod can take over before the old one stops (kubelet 1.33+; the DaemonSet needs maxSurge)")
	flag.IntVar(&c.grpcLogLevel, "grpc-log-level", 6, "klog level at which gRPC calls are logged")
	flag.Parse()
	c.podUID = os.Getenv("POD_UID")
	switch {
	case c.driver == "":
		return nil, errors.New("--driver-name is required")
	case c.node == "":
		return nil, errors.New("--node-name (or $NODE_NAME) is required")
	case c.devices < 0 || c.devices > 128:
		return nil, errors.New("--devices must be in 0..128")
	case c.seamless && c.podUID == "":
		return nil, errors.New("--seamless-upgrade needs $POD_UID (downward API metadata.uid)")
	case c.healthPort != 0 && net.ParseIP(c.healthAddr) == nil:
		return nil, fmt.Errorf("--healthcheck-address (or $POD_IP) %q is not an IP", c.healthAddr)
	}
	if c.pluginDir == "" {
		c.pluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, c.driver)
	}
	return c, nil
}

// plugin is the DRA driver's node part.
type plugin struct {
	healthServerBase // the DRAResourceHealth API from 1.34 (health_watch.go)
	cfg              *config
	cs               kubernetes.Interface
	health           *health.Server
	cancel           context.CancelCauseFunc

	mu         sync.Mutex
	registered bool
	regError   string
	unhealthy  bool
	badDevices map[string]bool // annUnhealthyDevices
	notReady   bool
	changed    chan struct{} // closed (and replaced) when unhealthy or badDevices change
}

func main() {
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.LUTC)
	cfg, err := parseFlags()
	if err != nil {
		log.Fatalf("drainer-dra-plugin: %v", err)
	}
	if err := run(cfg); err != nil {
		log.Fatalf("drainer-dra-plugin: %v", err)
	}
	log.Printf("stopped")
}

func run(cfg *config) error {
	var rc *rest.Config
	var err error
	if cfg.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	rc.UserAgent = "drainer-dra-plugin/" + cfg.driver
	rc.QPS, rc.Burst = 20, 40
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("got %v: unregistering", s)
		cancel(fmt.Errorf("signal %v", s))
	}()

	p := &plugin{cfg: cfg, cs: cs, health: health.NewServer(), cancel: cancel, changed: make(chan struct{})}
	p.updateHealth()
	if cfg.healthPort != 0 {
		addr := net.JoinHostPort(cfg.healthAddr, strconv.Itoa(cfg.healthPort))
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("health server: %w", err)
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, p.health)
		go func() { _ = srv.Serve(lis) }()
		defer srv.Stop()
		log.Printf("grpc.health.v1 on %s (services \"\", liveness, readiness)", addr)
	}

	var node *corev1.Node
	for {
		node, err = cs.CoreV1().Nodes().Get(ctx, cfg.node, metav1.GetOptions{})
		if err == nil {
			break
		}
		log.Printf("node %s: %v (retrying)", cfg.node, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	if err := os.MkdirAll(cfg.pluginDir, 0o750); err != nil {
		return err
	}

	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(cfg.driver),
		kubeletplugin.NodeName(cfg.node),
		kubeletplugin.NodeUID(node.UID),
		kubeletplugin.KubeClient(cs),
		kubeletplugin.RegistrarDirectoryPath(cfg.registryDir),
		kubeletplugin.PluginDataDirectoryPath(cfg.pluginDir),
		kubeletplugin.GRPCVerbosity(cfg.grpcLogLevel),
		kubeletplugin.GRPCInterceptor(p.watchRegistration),
	}
	if cfg.seamless {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(cfg.podUID)))
	}
	helper, err := kubeletplugin.Start(ctx, p, opts...)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	log.Printf("driver %s on %s: plugin sockets in %s, registration in %s (seamless upgrade %v)",
		cfg.driver, cfg.node, cfg.pluginDir, cfg.registryDir, cfg.seamless)

	if err := p.watch(ctx, node); err != nil {
		helper.Stop()
		return err
	}
	<-ctx.Done()
	p.mu.Lock()
	p.registered = false
	p.mu.Unlock()
	p.updateHealth()
	helper.Stop()
	if cause := context.Cause(ctx); cause != nil && !strings.HasPrefix(cause.Error(), "signal ") {
		return cause
	}
	return nil
}

// watchRegistration sees the kubelet's NotifyRegistrationStatus calls on the
// registration socket: the truth about whether the plugin is registered.
func (p *plugin) watchRegistration(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if st, ok := req.(*registerapi.RegistrationStatus); ok {
		p.mu.Lock()
		changed := p.registered != st.PluginRegistered
		p.registered, p.regError = st.PluginRegistered, st.Error
		p.mu.Unlock()
		if changed || st.Error != "" {
			log.Printf("kubelet: registered=%v %s", st.PluginRegistered, st.Error)
		}
		p.updateHealth()
	}
	return handler(ctx, req)
}

func (p *plugin) updateHealth() {
	p.mu.Lock()
	live := p.registered && !p.unhealthy
	ready := p.registered && !p.notReady
	p.mu.Unlock()
	st := func(ok bool) healthpb.HealthCheckResponse_ServingStatus {
		if ok {
			return healthpb.HealthCheckResponse_SERVING
		}
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	p.health.SetServingStatus("", st(live))
	p.health.SetServingStatus("liveness", st(live))
	p.health.SetServingStatus("readiness", st(ready))
}

// watch follows the node (the two switches, its UID for the slice's owner)
// and the node's slices of the driver (published, repaired).
func (p *plugin) watch(ctx context.Context, node *corev1.Node) error {
	nodes := informers.NewSharedInformerFactoryWithOptions(p.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.cfg.node).String()
	}))
	// The slices in whichever DRA API the server serves (v1, v1beta2, v1beta1).
	dra := gpuslice.Client(p.cs)
	sliceInf, sliceLister := gpuslice.Informer(dra, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.AndSelectors(
			fields.OneTermEqualSelector("spec.nodeName", p.cfg.node),
			fields.OneTermEqualSelector("spec.driver", p.cfg.driver)).String()
	})
	nodeInf := nodes.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handlers := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}
	if _, err := nodeInf.Informer().AddEventHandler(handlers); err != nil {
		return err
	}
	if _, err := sliceInf.AddEventHandler(handlers); err != nil {
		return err
	}
	nodes.Start(ctx.Done())
	go sliceInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.Informer().HasSynced, sliceInf.HasSynced) {
		return nil // stopping
	}
	go func() {
		retry := time.NewTimer(time.Hour)
		defer retry.Stop()
		for {
			cur := node
			if n, err := nodeInf.Lister().Get(p.cfg.node); err == nil {
				cur = n
			}
			p.mu.Lock()
			un, nr := cur.Annotations[annUnhealthy] == "true", cur.Annotations[annNotReady] == "true"
			bad := parseDevices(cur.Annotations[annUnhealthyDevices])
			changed := un != p.unhealthy || nr != p.notReady
			devsChanged := p.badDevices == nil || !sameSet(bad, p.badDevices)
			if un != p.unhealthy || devsChanged {
				close(p.changed)
				p.changed = make(chan struct{})
			}
			p.unhealthy, p.notReady, p.badDevices = un, nr, bad
			p.mu.Unlock()
			if changed {
				log.Printf("node %s: %s=%v %s=%v", p.cfg.node, annUnhealthy, un, annNotReady, nr)
				p.updateHealth()
			}
			if devsChanged {
				names := make([]string, 0, len(bad))
				for d := range bad {
					names = append(names, d)
				}
				sort.Strings(names)
				log.Printf("node %s: unhealthy devices %v", p.cfg.node, names)
				if unk := unknownDevices(bad, p.cfg.devices); len(unk) > 0 {
					log.Printf("node %s: %s names no device of this node: %v", p.cfg.node, annUnhealthyDevices, unk)
				}
			}
			existing, _ := sliceLister.List(labels.Everything())
			spec := gpuslice.Spec(p.cfg.node, p.cfg.driver, p.cfg.devices)
			taintDevices(&spec, p.cfg.driver, bad)
			did, err := gpuslice.PublishSpec(ctx, dra, cur, p.cfg.driver, spec, existing)
			if did != "" {
				log.Printf("node %s: %s", p.cfg.node, did)
			}
			if err != nil && ctx.Err() == nil {
				log.Printf("node %s: publish slice: %v (retrying in 2 s)", p.cfg.node, err)
				retry.Reset(2 * time.Second)
			}
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-retry.C:
			}
		}
	}()
	return nil
}

// ---- prepare / unprepare ----

// preparedClaim is one entry of the state file.
type preparedClaim struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Devices   []string `json:"devices"` // pool/device
}

func (p *plugin) stateFile() string { return filepath.Join(p.cfg.pluginDir, "prepared.json") }

// load and save run under the helper's serialization (one call at a time, a
// file lock with --seamless-upgrade).
func (p *plugin) load() (map[types.UID]preparedClaim, error) {
	st := map[types.UID]preparedClaim{}
	b, err := os.ReadFile(p.stateFile())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", p.stateFile(), err)
	}
	return st, nil
}

func (p *plugin) save(st map[types.UID]preparedClaim) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := p.stateFile() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.stateFile())
}

func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*draapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	st, err := p.load()
	if err != nil {
		return nil, err
	}
	valid := map[string]bool{}
	for i := 0; i < p.cfg.devices; i++ {
		valid[gpuslice.DeviceName(i)] = true
	}
	owner := map[string]types.UID{}
	for uid, pc := range st {
		for _, d := range pc.Devices {
			owner[d] = uid
		}
	}
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		var res kubeletplugin.PrepareResult
		var devs []string
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != p.cfg.driver {
				continue
			}
			key := r.Pool + "/" + r.Device
			switch other, taken := owner[key]; {
			case r.Pool != p.cfg.node:
				res.Err = fmt.Errorf("claim %s/%s: device %s is from pool %s, not this node's (%s)", claim.Namespace, claim.Name, r.Device, r.Pool, p.cfg.node)
			case !valid[r.Device]:
				res.Err = fmt.Errorf("claim %s/%s: no device %s on %s", claim.Namespace, claim.Name, r.Device, p.cfg.node)
			case taken && other != claim.UID:
				res.Err = fmt.Errorf("claim %s/%s: device %s is still prepared for claim %s/%s (%s)", claim.Namespace, claim.Name,
					r.Device, st[other].Namespace, st[other].Name, other)
			}
			if res.Err != nil {
				break
			}
			devs = append(devs, key)
			res.Devices = append(res.Devices, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device})
		}
		if res.Err == nil {
			st[claim.UID] = preparedClaim{Namespace: claim.Namespace, Name: claim.Name, Devices: devs}
			for _, d := range devs {
				owner[d] = claim.UID
			}
			log.Printf("prepared claim %s/%s (%s): %v", claim.Namespace, claim.Name, claim.UID, devs)
		} else {
			res.Devices = nil
			log.Printf("prepare: %v", res.Err)
		}
		out[claim.UID] = res
	}
	if err := p.save(st); err != nil {
		return nil, err
	}
	return out, nil
}

func (p *plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	st, err := p.load()
	if err != nil {
		return nil, err
	}
	out := map[types.UID]error{}
	for _, c := range claims {
		if pc, ok := st[c.UID]; ok {
			log.Printf("unprepared claim %s (%s): %v", c.NamespacedName, c.UID, pc.Devices)
			delete(st, c.UID)
		}
		out[c.UID] = nil
	}
	if err := p.save(st); err != nil {
		return nil, err
	}
	return out, nil
}
