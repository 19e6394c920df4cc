// Package e2e checks, against the running test cluster (tests/cluster/up), that the
// control plane and its nodes behave as drainer's tests assume: nodes Ready,
// claims allocated by the real scheduler and released by the real resourceclaim
// controller, pods with claims stuck Terminating while the node's DRA driver is
// down (kubernetes/kubernetes#129402), ResourceSlices and the driver's gRPC health
// following the driver pod. It runs against either topology: real kubelets with
// drainer-cri and drainer-dra-plugin (DRAINER_CLUSTER_NODES=real; then the rule
// above is the kubelet's own), or the node simulator (sim); the tests of the
// container runtime itself run on real nodes only.
//
// It skips when the cluster's kubeconfig is missing or the API server does not
// answer. Every test restores what it changed (labels, annotations, namespaces).
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"drainer.test/cluster/internal/draapi"
)

const (
	driverName      = "gpu.example.com"
	driverNamespace = "dra-system"
	driverDS        = "dra-driver"
	driverLabel     = "gpu.example.com/present"
	annUnhealthy    = "sim.drainer.io/driver-unhealthy"
	annNotReady     = "sim.drainer.io/driver-not-ready"
)

type clusterEnv struct {
	dir            string
	real           bool // real kubelets (else the simulator)
	nodes          int
	ipPrefix       string
	healthPort     int
	terminateDelay time.Duration
	sliceWipeDelay time.Duration
}

var (
	cs  kubernetes.Interface
	env clusterEnv
)

func TestMain(m *testing.M) {
	env = clusterEnv{
		dir: os.Getenv("DRAINER_CLUSTER_DIR"), nodes: 3, ipPrefix: "127.1", healthPort: 51515,
		terminateDelay: 2 * time.Second, sliceWipeDelay: 30 * time.Second,
	}
	nodeCount := 0
	if env.dir == "" {
		env.dir = "/tmp/drainer-cluster"
	}
	skip := func(msg string) {
		fmt.Printf("SKIP e2e: %s (start one with tests/cluster/up)\n", msg)
		os.Exit(m.Run()) // tests call t.Skip themselves since cs is nil
	}
	// The settings the cluster was started with.
	if f, err := os.Open(filepath.Join(env.dir, "cluster.env")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			switch k {
			case "DRAINER_CLUSTER_NODES":
				env.real = v == "real"
			case "DRAINER_NODE_COUNT":
				nodeCount, _ = strconv.Atoi(v)
			case "DRAINER_SIM_NODES":
				env.nodes, _ = strconv.Atoi(v)
			case "DRAINER_CLUSTER_IP_PREFIX":
				env.ipPrefix = v
			case "DRAINER_SIM_HEALTH_PORT":
				env.healthPort, _ = strconv.Atoi(v)
			case "DRAINER_SIM_TERMINATE_DELAY":
				env.terminateDelay, _ = time.ParseDuration(v)
			case "DRAINER_SIM_SLICE_WIPE_DELAY":
				env.sliceWipeDelay, _ = time.ParseDuration(v)
			}
		}
		f.Close()
	}
	if nodeCount > 0 {
		env.nodes = nodeCount
	}
	if env.real {
		// The kubelet: containers stop at once (pause-like, no grace to wait
		// for), and slices are wiped 30 s after the plugin unregisters
		// (defaultWipingDelay, not configurable).
		env.terminateDelay, env.sliceWipeDelay = 0, 30*time.Second
	}
	kc := filepath.Join(env.dir, "kubeconfig")
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		skip(fmt.Sprintf("no usable kubeconfig at %s: %v", kc, err))
	}
	rc.QPS, rc.Burst = 50, 100
	rc.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		skip(err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	cancel()
	if err != nil || string(body) != "ok" {
		skip(fmt.Sprintf("API server of %s not ready: %v %s", kc, err, body))
	}
	if env.nodes < 3 {
		skip(fmt.Sprintf("needs 3 nodes, cluster has %d", env.nodes))
	}
	cs = c
	os.Exit(m.Run())
}

func need(t *testing.T) context.Context {
	t.Helper()
	if cs == nil {
		t.Skip("test cluster not reachable (start it with tests/cluster/up)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 100 ms until it returns true or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if msg != "" {
			last = msg
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last: %s)", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func nodeName(i int) string        { return fmt.Sprintf("node-%d", i) }
func nodeIP(i int) string          { return fmt.Sprintf("%s.0.%d", env.ipPrefix, i) }
func driverIP(i int) string        { return fmt.Sprintf("%s.%d.1", env.ipPrefix, i) }
func sliceName(node string) string { return node + "-" + driverName }

func healthStatus(ip string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(net.JoinHostPort(ip, strconv.Itoa(env.healthPort)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "liveness"})
	if err != nil {
		return 0, err
	}
	return resp.Status, nil
}

// waitNotServing: the node's driver does not answer SERVING. A stopped plugin
// process answers nothing (connection refused); the simulator keeps answering,
// NOT_SERVING.
func waitNotServing(t *testing.T, i int) {
	t.Helper()
	if !env.real {
		waitHealth(t, i, healthpb.HealthCheckResponse_NOT_SERVING)
		return
	}
	eventually(t, 20*time.Second, fmt.Sprintf("driver health of %s not SERVING", nodeName(i)), func() (bool, string) {
		st, err := healthStatus(driverIP(i))
		return err != nil || st != healthpb.HealthCheckResponse_SERVING, fmt.Sprint(st, err)
	})
}

func waitHealth(t *testing.T, i int, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("driver health of %s = %v", nodeName(i), want), func() (bool, string) {
		st, err := healthStatus(driverIP(i))
		if err != nil {
			return false, err.Error()
		}
		return st == want, st.String()
	})
}

func driverPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(driverNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=kubeletplugin",
		FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitDriverRunning: the node's driver pod is Running and Ready at its fixed IP,
// healthy, and the node's ResourceSlice is published.
func waitDriverRunning(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	node := nodeName(i)
	eventually(t, 60*time.Second, "driver pod Running on "+node, func() (bool, string) {
		pods, err := driverPods(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && isReady(&p) && p.Status.PodIP == driverIP(i) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d driver pods", len(pods))
	})
	waitHealth(t, i, healthpb.HealthCheckResponse_SERVING)
	eventually(t, 20*time.Second, "ResourceSlice of "+node, func() (bool, string) {
		_, err := draapi.Client(cs).ResourceSlices().Get(ctx, sliceName(node), metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// newNamespace creates a namespace that is deleted (and waited for) at cleanup.
func newNamespace(t *testing.T, ctx context.Context, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
			return
		}
		for ctx.Err() == nil {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("namespace %s still there after 90s", name)
	})
	eventually(t, 30*time.Second, "ServiceAccount "+name+"/default", func() (bool, string) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return name
}

func createClaimTemplate(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	_, err := draapi.Client(cs).ResourceClaimTemplates(ns).Create(ctx, &draapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "single-gpu"},
		Spec: draapi.ResourceClaimTemplateSpec{Spec: draapi.ResourceClaimSpec{
			Devices: draapi.DeviceClaim{Requests: []draapi.DeviceRequest{draapi.ExactRequest("gpu", driverName)}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// createClaimPod creates a pod with one claim from the template, placed on node
// by the scheduler (nodeSelector), and waits until it runs.
func createClaimPod(t *testing.T, ctx context.Context, ns, name string, i int) *corev1.Pod {
	t.Helper()
	node := nodeName(i)
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: ptr.To(int64(2)),
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.example.com/app:v1",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("single-gpu")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	eventually(t, 30*time.Second, "pod "+name+" Running and Ready on "+node, func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && isReady(p),
			fmt.Sprintf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
	})
	if !strings.HasPrefix(pod.Status.PodIP, fmt.Sprintf("%s.%d.", env.ipPrefix, i)) || pod.Status.PodIP == driverIP(i) {
		t.Errorf("pod IP %s: want %s.%d.2-254", pod.Status.PodIP, env.ipPrefix, i)
	}
	if pod.Status.HostIP != nodeIP(i) {
		t.Errorf("host IP %s, want %s", pod.Status.HostIP, nodeIP(i))
	}
	if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Running == nil || !pod.Status.ContainerStatuses[0].Ready {
		t.Errorf("container statuses: %+v", pod.Status.ContainerStatuses)
	}
	return pod
}

// generatedClaim returns the claim generated for the pod's "gpu" claim.
func generatedClaim(t *testing.T, ctx context.Context, pod *corev1.Pod) *draapi.ResourceClaim {
	t.Helper()
	var claimName string
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == "gpu" && st.ResourceClaimName != nil {
			claimName = *st.ResourceClaimName
		}
	}
	if claimName == "" {
		t.Fatalf("pod %s has no generated claim in status.resourceClaimStatuses: %+v", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	claim, err := draapi.Client(cs).ResourceClaims(pod.Namespace).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return claim
}

// checkAllocatedAndReserved: allocated node-locally on node (the allocator's one
// matchFields term), from the node's pool, and reserved for the pod.
func checkAllocatedAndReserved(t *testing.T, claim *draapi.ResourceClaim, node string, podUID types.UID) {
	t.Helper()
	a := claim.Status.Allocation
	if a == nil {
		t.Fatalf("claim %s not allocated", claim.Name)
	}
	ns := a.NodeSelector
	if ns == nil || len(ns.NodeSelectorTerms) != 1 || len(ns.NodeSelectorTerms[0].MatchFields) != 1 ||
		ns.NodeSelectorTerms[0].MatchFields[0].Key != "metadata.name" ||
		!slices.Equal(ns.NodeSelectorTerms[0].MatchFields[0].Values, []string{node}) {
		t.Errorf("claim %s allocation.nodeSelector = %+v, want matchFields metadata.name In [%s]", claim.Name, ns, node)
	}
	if len(a.Devices.Results) != 1 || a.Devices.Results[0].Driver != driverName || a.Devices.Results[0].Pool != node ||
		!strings.HasPrefix(a.Devices.Results[0].Device, "gpu-") {
		t.Errorf("claim %s results = %+v", claim.Name, a.Devices.Results)
	}
	reserved := false
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.UID == podUID {
			reserved = true
		}
	}
	if !reserved {
		t.Errorf("claim %s reservedFor = %+v, want the pod %s", claim.Name, claim.Status.ReservedFor, podUID)
	}
}

func waitGone(t *testing.T, timeout time.Duration, what string, get func() error) {
	t.Helper()
	eventually(t, timeout, what+" deleted", func() (bool, string) {
		err := get()
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// Not parallel: it runs before the tests that change nodes.
func TestNodesReady(t *testing.T) {
	ctx := need(t)
	for i := 1; i <= env.nodes; i++ {
		name := nodeName(i)
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			t.Errorf("%s not Ready: %+v", name, node.Status.Conditions)
		}
		for _, taint := range node.Spec.Taints {
			t.Errorf("%s has taint %v (a clean cluster has none)", name, taint)
		}
		for k, v := range map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", driverLabel: "true",
		} {
			if node.Labels[k] != v {
				t.Errorf("%s label %s=%q, want %q", name, k, node.Labels[k], v)
			}
		}
		if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Type != corev1.NodeInternalIP ||
			node.Status.Addresses[0].Address != nodeIP(i) {
			t.Errorf("%s addresses %+v, want InternalIP %s", name, node.Status.Addresses, nodeIP(i))
		}
		// A real kubelet creates its Lease a moment after its Node is Ready (its
		// lease controller starts on its own, and retries until kube-node-lease exists).
		var lease *coordinationv1.Lease
		err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true,
			func(ctx context.Context) (bool, error) {
				var gerr error
				lease, gerr = cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
				return gerr == nil, nil
			})
		if err != nil {
			_, err = cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			t.Errorf("%s lease: %v", name, err)
		} else if lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > 30*time.Second {
			t.Errorf("%s lease not renewed recently: %v", name, lease.Spec.RenewTime)
		}
		slice, err := draapi.Client(cs).ResourceSlices().Get(ctx, sliceName(name), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s slice: %v", name, err)
			continue
		}
		if slice.Spec.Driver != driverName || draapi.SliceNodeName(&slice.Spec) != name || slice.Spec.Pool.Name != name ||
			slice.Spec.Pool.ResourceSliceCount != 1 || len(slice.Spec.Devices) != 4 || slice.Spec.Devices[0].Name != "gpu-0" {
			t.Errorf("%s slice spec: %+v", name, slice.Spec)
		}
		if len(slice.OwnerReferences) != 1 || slice.OwnerReferences[0].Kind != "Node" || slice.OwnerReferences[0].UID != node.UID {
			t.Errorf("%s slice owner: %+v, want Node uid %s", name, slice.OwnerReferences, node.UID)
		}
		if st, err := healthStatus(driverIP(i)); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s driver health at %s: %v %v", name, driverIP(i), st, err)
		}
	}
	ds, err := cs.AppsV1().DaemonSets(driverNamespace).Get(ctx, driverDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if int(ds.Status.NumberReady) != env.nodes {
		t.Errorf("DaemonSet %s ready on %d nodes, want %d", driverDS, ds.Status.NumberReady, env.nodes)
	}
	if _, err := draapi.Client(cs).DeviceClasses().Get(ctx, driverName, metav1.GetOptions{}); err != nil {
		t.Errorf("DeviceClass: %v", err)
	}
}

// A pod using a ResourceClaimTemplate: the scheduler allocates its claim on the
// node, the claim is reserved for it, it runs; deleting it deletes the claim.
func TestClaimTemplatePodLifecycle(t *testing.T) {
	ctx := need(t)
	t.Parallel()
	const i = 2
	ns := newNamespace(t, ctx, "e2e-claim")
	createClaimTemplate(t, ctx, ns)
	pod := createClaimPod(t, ctx, ns, "gpu-user", i)
	claim := generatedClaim(t, ctx, pod)
	checkAllocatedAndReserved(t, claim, nodeName(i), pod.UID)
	if !slices.Contains(claim.Finalizers, "resource.kubernetes.io/delete-protection") {
		t.Errorf("claim finalizers %v", claim.Finalizers)
	}
	if len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0].UID != pod.UID {
		t.Errorf("claim owners %+v, want the pod", claim.OwnerReferences)
	}

	start := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.terminateDelay+20*time.Second, "pod", func() error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err
	})
	if d := time.Since(start); d < env.terminateDelay-500*time.Millisecond {
		t.Errorf("pod gone after %v, before the terminate delay %v", d, env.terminateDelay)
	}
	waitGone(t, 30*time.Second, "claim "+claim.Name, func() error {
		_, err := draapi.Client(cs).ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		return err
	})
}

// With the node's driver stopped (DaemonSet no longer matches the node), a pod
// holding a claim stays Terminating with its claim allocated and reserved until
// the driver runs again; the slice stays for the wipe delay, health says
// NOT_SERVING; once the driver is back everything is released.
func TestDriverDownBlocksTermination(t *testing.T) {
	ctx := need(t)
	t.Parallel()
	const i = 3
	node := nodeName(i)
	ns := newNamespace(t, ctx, "e2e-driver-down")
	createClaimTemplate(t, ctx, ns)
	pod := createClaimPod(t, ctx, ns, "gpu-user", i)
	claim := generatedClaim(t, ctx, pod)
	checkAllocatedAndReserved(t, claim, node, pod.UID)

	setLabel := func(v string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, driverLabel, v)
		_, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() { // runs before the namespace cleanup
		if err := setLabel("true"); err != nil {
			t.Errorf("restore label: %v", err)
			return
		}
		waitDriverRunning(t, context.Background(), i)
	})

	// Stop the driver the way a GPU operator does: the DaemonSet's nodeSelector
	// stops matching, the DaemonSet controller deletes the pod.
	if err := setLabel("false"); err != nil {
		t.Fatal(err)
	}
	// The driver stops (and the wipe timer starts) when its pod starts terminating.
	driverStopped := time.Now()
	eventually(t, 30*time.Second, "driver pod gone from "+node, func() (bool, string) {
		pods, err := driverPods(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == 0, fmt.Sprintf("%d driver pods", len(pods))
	})
	waitNotServing(t, i)
	if _, err := draapi.Client(cs).ResourceSlices().Get(ctx, sliceName(node), metav1.GetOptions{}); err != nil {
		t.Errorf("slice deleted right after the driver stopped (wipe delay %v): %v", env.sliceWipeDelay, err)
	}

	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The grace period is 2 s; the real kubelet retries the unprepare every
	// 10-15 s: held well past both.
	hold := env.terminateDelay + 3*time.Second
	if env.real {
		hold = 15 * time.Second
	}
	time.Sleep(hold)
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod holding a claim went away while the driver is down: %v", err)
	}
	if p.DeletionTimestamp == nil {
		t.Errorf("pod has no deletionTimestamp")
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("stuck pod phase %s, want Running (not terminal: claims not unprepared)", p.Status.Phase)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("stuck pod containers should be stopped: %+v", p.Status.ContainerStatuses)
	}
	claim, err = draapi.Client(cs).ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	checkAllocatedAndReserved(t, claim, node, pod.UID)

	// The kubelet wipes the slices of a driver gone for the wipe delay; only waited
	// for when the cluster's delay is short enough.
	if env.sliceWipeDelay <= 45*time.Second {
		eventually(t, env.sliceWipeDelay+15*time.Second, "slice wiped", func() (bool, string) {
			_, err := draapi.Client(cs).ResourceSlices().Get(ctx, sliceName(node), metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		if d := time.Since(driverStopped); d < env.sliceWipeDelay-time.Second {
			t.Errorf("slice wiped %v after the driver went, wipe delay is %v", d, env.sliceWipeDelay)
		}
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("stuck pod went away with the slice: %v", err)
		}
	} else {
		t.Logf("slice wipe not waited for: wipe delay %v", env.sliceWipeDelay)
	}

	// Driver back: slice republished, health SERVING, the pod finishes, claim deleted.
	if err := setLabel("true"); err != nil {
		t.Fatal(err)
	}
	waitDriverRunning(t, ctx, i)
	// The kubelet retries the unprepare with a backoff: up to a minute.
	waitGone(t, 60*time.Second, "stuck pod", func() error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err
	})
	waitGone(t, 30*time.Second, "claim "+claim.Name, func() error {
		_, err := draapi.Client(cs).ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		return err
	})
}

// The annotation switches: driver-unhealthy flips gRPC health, driver-not-ready
// flips the driver pod's Ready condition.
func TestDriverHealthSwitches(t *testing.T) {
	ctx := need(t)
	t.Parallel()
	const i = 1
	node := nodeName(i)
	annotate := func(key string, v *string) {
		t.Helper()
		val := "null"
		if v != nil {
			val = strconv.Quote(*v)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, val)
		if _, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		annotate(annUnhealthy, nil)
		annotate(annNotReady, nil)
		waitDriverRunning(t, context.Background(), i)
	})

	waitHealth(t, i, healthpb.HealthCheckResponse_SERVING)
	annotate(annUnhealthy, ptr.To("true"))
	waitHealth(t, i, healthpb.HealthCheckResponse_NOT_SERVING)
	annotate(annUnhealthy, nil)
	waitHealth(t, i, healthpb.HealthCheckResponse_SERVING)

	driverReady := func(want bool) {
		t.Helper()
		eventually(t, 20*time.Second, fmt.Sprintf("driver pod on %s Ready=%v", node, want), func() (bool, string) {
			pods, err := driverPods(ctx, node)
			if err != nil || len(pods) != 1 {
				return false, fmt.Sprintf("%d pods, %v", len(pods), err)
			}
			return isReady(&pods[0]) == want && pods[0].Status.Phase == corev1.PodRunning, string(pods[0].Status.Phase)
		})
	}
	annotate(annNotReady, ptr.To("true"))
	driverReady(false)
	annotate(annNotReady, nil)
	driverReady(true)
}

// A mirror pod runs with the node's IP when it uses the host network. On real
// nodes it is the kubelet's own: a static pod in the node's staticPodPath; on
// simulated nodes the test creates the mirror pod as the kubelet would.
func TestMirrorPod(t *testing.T) {
	ctx := need(t)
	t.Parallel()
	const i = 2
	ns := newNamespace(t, ctx, "e2e-mirror")
	node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := "agent-" + node.Name
	if env.real {
		manifest := filepath.Join(env.dir, "nodes", node.Name, "manifests", ns+".yaml")
		body := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: %s, labels: {app: agent}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - {name: agent, image: registry.example.com/agent:v1}
`, ns)
		if err := os.WriteFile(manifest, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // before the namespace goes, or the kubelet would recreate it
			os.Remove(manifest)
			waitGone(t, 30*time.Second, "mirror pod "+name, func() error {
				_, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
				return err
			})
		})
	} else {
		_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kubernetes.io/config.mirror": "e2e", "kubernetes.io/config.source": "file"},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
				}},
			},
			Spec: corev1.PodSpec{
				NodeName: node.Name, HostNetwork: true,
				Containers: []corev1.Container{{Name: "agent", Image: "registry.example.com/agent:v1"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var pod *corev1.Pod
	eventually(t, 30*time.Second, "mirror pod Running", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP == nodeIP(i), p.Status.PodIP
	})
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; !ok {
		t.Errorf("pod %s has no kubernetes.io/config.mirror annotation: %v", name, pod.Annotations)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Kind != "Node" || pod.OwnerReferences[0].UID != node.UID {
		t.Errorf("mirror pod owners %+v, want the Node", pod.OwnerReferences)
	}
}
