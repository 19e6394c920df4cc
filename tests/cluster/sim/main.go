// Command drainer-sim stands in for the kubelet and a DRA driver on N simulated
// nodes of a real control plane (see tests/cluster/README.md).
//
// Per node it:
//   - registers the Node (labels, capacity, Ready) and renews its Lease;
//   - runs the pods bound to it (status Running/Ready, container statuses, pod IP);
//   - terminates deleted pods like the kubelet: after min(grace period,
//     --terminate-delay) it reports them terminal and deletes them with grace 0,
//     except a pod that holds ResourceClaims while the node's DRA driver pod is
//     not running: that one stays Terminating until the driver runs again
//     (kubernetes/kubernetes#129402);
//   - publishes a ResourceSlice for the driver while the driver pod runs and
//     wipes it --slice-wipe-delay after the driver is gone;
//   - completes pods annotated sim.drainer.io/run-for=DURATION (Job pods) after
//     they ran that long, once their claims are unprepared;
//   - serves grpc.health.v1 (service "liveness") at the driver pod's IP;
//   - runs the preStop hooks of the pods it terminates before it stops their
//     containers (exec hooks on the host, see hooks.go); a driver pod whose
//     hook still runs still serves its plugin.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/pkg/version"
	"k8s.io/client-go/tools/clientcmd"
)

type config struct {
	kubeconfig        string
	nodes             int
	nodePrefix        string
	ipPrefix          string // two octets, e.g. "127.1"
	terminateDelay    time.Duration
	sliceWipeDelay    time.Duration
	driver            string
	driverNamespace   string
	driverSelector    labels.Selector
	devices           int
	healthPort        int
	nodeLabels        map[string]string
	qps               float64
	burst             int
	workers           int
	leaseDuration     time.Duration
	leaseRenew        time.Duration
	statusReport      time.Duration
	kubeletVersion    string
	hooks             bool
	hookPathMap       pathMap
	hookKubeconfig    string
	hookDir           string
	dra               bool
	bindDaemonSetPods bool
}

func parseFlags() (*config, error) {
	c := &config{hookPathMap: pathMap{}}
	var selector, nodeLabels string
	flag.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (default $KUBECONFIG)")
	flag.IntVar(&c.nodes, "nodes", 3, "number of simulated nodes (1..254)")
	flag.StringVar(&c.nodePrefix, "node-prefix", "node-", "node names are PREFIX1 .. PREFIXN")
	flag.StringVar(&c.ipPrefix, "ip-prefix", "127.1", "first two octets of all simulated addresses: node i is P.0.i, its pods P.i.2..254, its driver pod P.i.1")
	flag.DurationVar(&c.terminateDelay, "terminate-delay", 2*time.Second, "a deleted pod terminates after min(its grace period, this)")
	flag.DurationVar(&c.sliceWipeDelay, "slice-wipe-delay", 30*time.Second, "delete a node's ResourceSlice this long after its driver pod stopped")
	flag.StringVar(&c.driver, "driver", "gpu.example.com", "DRA driver name")
	flag.StringVar(&c.driverNamespace, "driver-namespace", "dra-system", "namespace of the driver DaemonSet pods")
	flag.StringVar(&selector, "driver-selector", "app.kubernetes.io/component=kubeletplugin", "label selector of the driver pods")
	flag.IntVar(&c.devices, "devices", 4, "devices per node (gpu-0 ..)")
	flag.IntVar(&c.healthPort, "health-port", 51515, "grpc.health.v1 port at each driver pod IP")
	flag.StringVar(&nodeLabels, "node-labels", "gpu.example.com/present=true", "extra labels set when a node is registered (k=v,...)")
	flag.Float64Var(&c.qps, "kube-api-qps", 50, "client QPS")
	flag.IntVar(&c.burst, "kube-api-burst", 100, "client burst")
	flag.IntVar(&c.workers, "workers", 4, "pod workers")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 40*time.Second, "node lease duration")
	flag.DurationVar(&c.leaseRenew, "lease-renew", 10*time.Second, "node lease renew interval")
	flag.DurationVar(&c.statusReport, "status-report", time.Minute, "node status (Ready heartbeat) report interval")
	flag.StringVar(&c.kubeletVersion, "kubelet-version", "", "reported kubelet version (default: the client-go version built in)")
	flag.BoolVar(&c.hooks, "hooks", true, "run the preStop hooks of terminating pods (exec hooks only for commands in --hook-path-map)")
	flag.Var(c.hookPathMap, "hook-path-map", "CONTAINER_PATH=HOST_PATH: an exec hook running CONTAINER_PATH (or below it, if it ends in /) runs HOST_PATH on the host; repeatable, comma-separated")
	flag.StringVar(&c.hookKubeconfig, "hook-kubeconfig", "", "KUBECONFIG for exec hooks (default: a token of the pod's ServiceAccount, bound to the pod)")
	flag.StringVar(&c.hookDir, "hook-dir", "", "working directory of exec hooks and their kubeconfigs (default: a new temporary directory)")
	flag.BoolVar(&c.dra, "dra", true, "publish the nodes' ResourceSlices (in whichever resource.k8s.io version the server serves); false: the cluster serves no DRA API")
	flag.BoolVar(&c.bindDaemonSetPods, "bind-daemonset-pods", false, "bind pending DaemonSet pods to their nodes, for a control plane whose scheduler cannot run (see bind.go)")
	flag.Parse()

	if c.nodes < 1 || c.nodes > 254 {
		return nil, fmt.Errorf("--nodes must be in 1..254")
	}
	oct := strings.Split(c.ipPrefix, ".")
	if len(oct) != 2 || oct[0] != "127" {
		return nil, fmt.Errorf("--ip-prefix must be two octets starting with 127, e.g. 127.1")
	}
	if b, err := strconv.Atoi(oct[1]); err != nil || b < 0 || b > 255 {
		return nil, fmt.Errorf("--ip-prefix: bad second octet")
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("--driver-selector: %w", err)
	}
	c.driverSelector = sel
	c.nodeLabels = map[string]string{}
	for _, kv := range strings.Split(nodeLabels, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		c.nodeLabels[k] = v
	}
	if c.kubeletVersion == "" {
		c.kubeletVersion = version.Get().GitVersion
		if c.kubeletVersion == "" || strings.HasPrefix(c.kubeletVersion, "v0.0.0") {
			c.kubeletVersion = "v0.0.0-sim"
		}
	}
	if c.kubeconfig == "" {
		return nil, fmt.Errorf("--kubeconfig (or $KUBECONFIG) is required")
	}
	return c, nil
}

func main() {
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.LUTC)
	cfg, err := parseFlags()
	if err != nil {
		log.Fatalf("drainer-sim: %v", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		log.Fatalf("drainer-sim: kubeconfig: %v", err)
	}
	rc.QPS = float32(cfg.qps)
	rc.Burst = cfg.burst
	rc.UserAgent = "drainer-sim/" + cfg.kubeletVersion
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		log.Fatalf("drainer-sim: client: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("got %v, stopping", s)
		cancel()
	}()

	if cfg.hookDir == "" {
		if cfg.hookDir, err = os.MkdirTemp("", "drainer-sim-hooks-"); err != nil {
			log.Fatalf("drainer-sim: --hook-dir: %v", err)
		}
		defer os.RemoveAll(cfg.hookDir)
	} else if err := os.MkdirAll(cfg.hookDir, 0o700); err != nil {
		log.Fatalf("drainer-sim: --hook-dir: %v", err)
	}

	s := newSim(cfg, cs)
	s.rc = rc
	if err := s.run(ctx); err != nil {
		log.Printf("drainer-sim: %v", err)
		os.RemoveAll(cfg.hookDir)
		os.Exit(1)
	}
	log.Printf("stopped")
}

// ipAt returns prefix.a.b.
func (c *config) ipAt(a, b int) string {
	return fmt.Sprintf("%s.%d.%d", c.ipPrefix, a, b)
}
