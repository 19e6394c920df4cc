package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type sandbox struct {
	id          string
	cfg         *runtimeapi.PodSandboxConfig
	handler     string
	createdAt   int64
	ready       bool
	ip          string // "" for host-network pods
	hostNetwork bool
}

type container struct {
	id        string
	sandboxID string
	cfg       *runtimeapi.ContainerConfig
	image     string // the image name the pod asked for
	imageRef  string
	mapped    string    // the --image path (symlink) of a mapped image; "" for a pause-like one
	oci       *ociImage // an image of an OCI archive (then mapped is "")
	logPath   string
	dir       string // nodeDir/containers/ID: the root's mount point, the pid file
	createdAt int64

	// guarded by runtime.mu
	state      runtimeapi.ContainerState
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	pid        int           // of the main process (0: none)
	done       chan struct{} // closed when the container has exited
	execs      map[int]bool  // process groups of running ExecSync commands
	logs       *criLog
	uts        bool // has a UTS namespace of its own (hostname = the pod's)
	env        []string
	cwd        string
	uid, gid   *int64
}

type runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	cfg        *config
	pinnedNS   string
	pinnedKey  string
	pinnedVal  string
	kubeletCli *http.Client

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	ips        map[string]string // pod IP -> sandbox ID
	nextIP     int
	images     map[string]*runtimeapi.Image // by name
	oci        map[string]*ociImage         // the images of OCI archives, by name
}

func newRuntime(cfg *config) (*runtime, error) {
	r := &runtime{
		cfg:        cfg,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		ips:        map[string]string{},
		nextIP:     2,
		images:     map[string]*runtimeapi.Image{},
		oci:        map[string]*ociImage{},
	}
	if cfg.pinnedPods != "" {
		ns, sel, ok := strings.Cut(cfg.pinnedPods, "/")
		k, v, ok2 := strings.Cut(sel, "=")
		if !ok || !ok2 || ns == "" || k == "" {
			return nil, fmt.Errorf("--pinned-pods %q: want NAMESPACE/KEY=VALUE", cfg.pinnedPods)
		}
		r.pinnedNS, r.pinnedKey, r.pinnedVal = ns, k, v
	}
	if cfg.kubeletURL != "" {
		cert, err := tls.LoadX509KeyPair(cfg.clientCert, cfg.clientKey)
		if err != nil {
			return nil, fmt.Errorf("--kubelet-client-cert/--kubelet-client-key: %w", err)
		}
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no certificate", cfg.caFile)
		}
		r.kubeletCli = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		}}
	}
	if err := os.MkdirAll(filepath.Join(cfg.nodeDir, "containers"), 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.nodeDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	return r, nil
}

func newID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func notFound(what, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", what, id)
}

// ---- runtime status ----

func (r *runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "drainer-cri", RuntimeVersion: version, RuntimeApiVersion: "v1"}, nil
}

func (r *runtime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}},
		Features:        &runtimeapi.RuntimeFeatures{},
	}, nil
}

func (r *runtime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

func (r *runtime) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// ---- sandboxes ----

func hostNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

func (r *runtime) pinned(cfg *runtimeapi.PodSandboxConfig) bool {
	return r.pinnedNS != "" && cfg.GetMetadata().GetNamespace() == r.pinnedNS && cfg.GetLabels()[r.pinnedKey] == r.pinnedVal
}

// allocIP: the pinned IP for a pinned pod while it is free, else P.i.2 .. P.i.254
// round robin, unique among the live sandboxes. r.mu held.
func (r *runtime) allocIP(id string, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	if r.pinned(cfg) {
		if _, taken := r.ips[r.cfg.pinnedIP]; !taken {
			r.ips[r.cfg.pinnedIP] = id
			return r.cfg.pinnedIP, nil
		}
	}
	for tries := 0; tries < 253; tries++ {
		ip := fmt.Sprintf("%s.%d", r.cfg.ipPrefix, r.nextIP)
		r.nextIP++
		if r.nextIP > 254 {
			r.nextIP = 2
		}
		if _, taken := r.ips[ip]; !taken && ip != r.cfg.pinnedIP {
			r.ips[ip] = id
			return ip, nil
		}
	}
	return "", status.Errorf(codes.ResourceExhausted, "no free pod IP in %s.2-254", r.cfg.ipPrefix)
}

func (r *runtime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.Name == "" || md.Namespace == "" || md.Uid == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox metadata (name, namespace, uid) is required")
	}
	if dir := cfg.GetLogDirectory(); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, status.Errorf(codes.Internal, "log directory: %v", err)
		}
	}
	sb := &sandbox{id: newID(), cfg: cfg, handler: req.GetRuntimeHandler(), createdAt: time.Now().UnixNano(), ready: true,
		hostNetwork: hostNetwork(cfg)}
	r.mu.Lock()
	if !sb.hostNetwork {
		ip, err := r.allocIP(sb.id, cfg)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		sb.ip = ip
	}
	r.sandboxes[sb.id] = sb
	r.mu.Unlock()
	ip := sb.ip
	if ip == "" {
		ip = "host network"
	}
	log.Printf("sandbox %.12s: pod %s/%s (%s) attempt %d: ready, %s", sb.id, md.Namespace, md.Name, md.Uid, md.Attempt, ip)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: sb.id}, nil
}

func (r *runtime) sandboxContainers(id string) []*container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*container
	for _, c := range r.containers {
		if c.sandboxID == id {
			out = append(out, c)
		}
	}
	return out
}

func (r *runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	r.mu.Lock()
	sb := r.sandboxes[id]
	r.mu.Unlock()
	if sb == nil {
		return &runtimeapi.StopPodSandboxResponse{}, nil // idempotent
	}
	for _, c := range r.sandboxContainers(id) {
		if err := r.stop(ctx, c, 0); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	if sb.ready {
		log.Printf("sandbox %.12s: pod %s/%s stopped, IP %s released", id, sb.cfg.Metadata.Namespace, sb.cfg.Metadata.Name, sb.ip)
	}
	sb.ready = false
	if sb.ip != "" && r.ips[sb.ip] == id {
		delete(r.ips, sb.ip)
	}
	r.mu.Unlock()
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	if _, err := r.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return nil, err
	}
	for _, c := range r.sandboxContainers(id) {
		if _, err := r.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.id}); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	delete(r.sandboxes, id)
	r.mu.Unlock()
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func sandboxState(sb *sandbox) runtimeapi.PodSandboxState {
	if sb.ready {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

func (r *runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.sandboxes[req.GetPodSandboxId()]
	if sb == nil {
		return nil, notFound("pod sandbox", req.GetPodSandboxId())
	}
	st := &runtimeapi.PodSandboxStatus{
		Id: sb.id, Metadata: sb.cfg.Metadata, State: sandboxState(sb), CreatedAt: sb.createdAt,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: sb.ip},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: sb.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(),
		}},
		Labels: sb.cfg.Labels, Annotations: sb.cfg.Annotations, RuntimeHandler: sb.handler,
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: st}, nil
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func (r *runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []*runtimeapi.PodSandbox{}
	for _, sb := range r.sandboxes {
		if f != nil && ((f.Id != "" && f.Id != sb.id) || (f.State != nil && f.State.State != sandboxState(sb)) ||
			!labelsMatch(sb.cfg.Labels, f.LabelSelector)) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: sb.id, Metadata: sb.cfg.Metadata, State: sandboxState(sb),
			CreatedAt: sb.createdAt, Labels: sb.cfg.Labels, Annotations: sb.cfg.Annotations, RuntimeHandler: sb.handler})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func (r *runtime) UpdatePodSandboxResources(context.Context, *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// ---- containers ----

// imageName: the name the pod asked for (the kubelet passes the image ID it got
// from ImageStatus, and the name as UserSpecifiedImage). r.mu held.
func (r *runtime) imageName(spec *runtimeapi.ImageSpec) string {
	if n := spec.GetUserSpecifiedImage(); n != "" {
		return n
	}
	ref := spec.GetImage()
	for name, img := range r.images {
		if img.Id == ref {
			return name
		}
	}
	return ref
}

func (r *runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container metadata name is required")
	}
	r.mu.Lock()
	sb := r.sandboxes[req.GetPodSandboxId()]
	if sb == nil || !sb.ready {
		r.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %q is not ready", req.GetPodSandboxId())
	}
	name := r.imageName(cfg.Image)
	c := &container{
		id: newID(), sandboxID: sb.id, cfg: cfg, image: name, imageRef: imageID(name), mapped: r.cfg.images[name],
		createdAt: time.Now().UnixNano(), state: runtimeapi.ContainerState_CONTAINER_CREATED,
		done: make(chan struct{}), execs: map[int]bool{}, uts: !sb.hostNetwork,
	}
	if _, archive := r.archiveFor(name); archive != "" {
		c.oci = r.oci[name]
		if c.oci == nil {
			r.mu.Unlock()
			return nil, status.Errorf(codes.FailedPrecondition, "image %s is not pulled", name)
		}
		// As containerd: the image reference is its repo digest.
		c.imageRef = c.oci.repo + "@" + c.oci.manifest.String()
	}
	c.dir = filepath.Join(r.cfg.nodeDir, "containers", c.id)
	// Never an empty log path: the kubelet's log cleanup globs "<LogPath>*".
	if dir, rel := sb.cfg.GetLogDirectory(), cfg.GetLogPath(); dir != "" && rel != "" && filepath.IsAbs(dir) {
		c.logPath = filepath.Join(dir, rel)
	} else {
		c.logPath = filepath.Join(r.cfg.nodeDir, "logs", c.id+".log")
	}
	r.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(c.logPath), 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "log directory: %v", err)
	}
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "log file: %v", err)
	}
	f.Close()
	if err := os.MkdirAll(filepath.Join(c.dir, "root"), 0o700); err != nil {
		return nil, status.Errorf(codes.Internal, "container folder: %v", err)
	}
	r.mu.Lock()
	r.containers[c.id] = c
	r.mu.Unlock()
	kind := "pause-like"
	if c.mapped != "" {
		kind = "runs " + c.mapped
	} else if c.oci != nil {
		kind = "OCI image " + c.oci.manifest.String()
	}
	log.Printf("container %.12s: created %s of pod %s/%s, image %s (%s), log %s", c.id, cfg.Metadata.Name,
		sb.cfg.Metadata.Namespace, sb.cfg.Metadata.Name, name, kind, c.logPath)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// imageID: the ID of the container's image (an OCI image's config digest).
func (c *container) imageID() string {
	if c.oci != nil {
		return c.oci.id.String()
	}
	return c.imageRef
}

func (r *runtime) lookup(id string) (*container, *sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	if c == nil {
		return nil, nil, notFound("container", id)
	}
	return c, r.sandboxes[c.sandboxID], nil
}

func (r *runtime) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, sb, err := r.lookup(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		r.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not in state created", c.id)
	}
	r.mu.Unlock()
	if sb == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q has no sandbox", c.id)
	}
	if c.mapped == "" && c.oci == nil {
		r.startPause(c, sb)
		return &runtimeapi.StartContainerResponse{}, nil
	}
	if err := r.startProcess(c, sb); err != nil {
		now := time.Now().UnixNano()
		r.mu.Lock()
		c.state, c.startedAt, c.finishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, now, now
		c.exitCode, c.reason, c.message = 128, "StartError", err.Error()
		close(c.done)
		r.mu.Unlock()
		log.Printf("container %.12s: start failed: %v", c.id, err)
		return nil, status.Errorf(codes.Unknown, "start container %s: %v", c.cfg.Metadata.Name, err)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// startPause: a container of an image that is not ours has nothing to run: it
// runs until stopped, like a pause container, except an init container (it
// would never end): that one exits 0 at once.
func (r *runtime) startPause(c *container, sb *sandbox) {
	init := r.isInitContainer(sb, c.cfg.Metadata.Name)
	now := time.Now().UnixNano()
	r.mu.Lock()
	c.state, c.startedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, now
	if init {
		c.state, c.finishedAt, c.exitCode, c.reason = runtimeapi.ContainerState_CONTAINER_EXITED, now, 0, "Completed"
		close(c.done)
	}
	r.mu.Unlock()
	what := "running (pause-like, no process)"
	if init {
		what = "init container of a pause-like image: exited 0"
	}
	log.Printf("container %.12s: %s of pod %s/%s %s", c.id, c.cfg.Metadata.Name, sb.cfg.Metadata.Namespace, sb.cfg.Metadata.Name, what)
}

// isInitContainer asks the node's kubelet (GET /pods) whether name is an init
// container (not a sidecar) of the sandbox's pod. The CRI itself does not say.
func (r *runtime) isInitContainer(sb *sandbox, name string) bool {
	if r.kubeletCli == nil {
		return false
	}
	resp, err := r.kubeletCli.Get(r.cfg.kubeletURL + "/pods")
	if err != nil {
		log.Printf("kubelet /pods: %v (container %s taken for a regular one)", err, name)
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		log.Printf("kubelet /pods: HTTP %d (container %s taken for a regular one)", resp.StatusCode, name)
		return false
	}
	var pods corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&pods); err != nil {
		log.Printf("kubelet /pods: %v", err)
		return false
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if string(p.UID) != sb.cfg.Metadata.Uid {
			continue
		}
		for _, ic := range p.Spec.InitContainers {
			if ic.Name == name {
				return ic.RestartPolicy == nil || *ic.RestartPolicy != corev1.ContainerRestartPolicyAlways
			}
		}
	}
	return false
}

// exited records the end of a container's main process. r.mu held.
func (r *runtime) exited(c *container, code int32, reason string) {
	if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
		return
	}
	c.state, c.finishedAt, c.exitCode, c.reason = runtimeapi.ContainerState_CONTAINER_EXITED, time.Now().UnixNano(), code, reason
	close(c.done)
}

// stopSignal: the container's stop signal (the image's STOPSIGNAL, the pod's
// lifecycle.stopSignal). The CRI enum is in alphabetical order (SIGABRT = 1,
// SIGALRM = 2, ...), not Linux's numbers, and its names carry a SIGNAL_ prefix from
// cri-api 0.37 on (SIGNAL_SIGABRT; SIGABRT before): mapped by name, so the same code
// builds against every release. 0 (RUNTIME_DEFAULT) or a name Linux lacks: SIGTERM.
func stopSignal(s runtimeapi.Signal) syscall.Signal {
	if s == 0 {
		return syscall.SIGTERM
	}
	if n := unix.SignalNum(strings.TrimPrefix(s.String(), "SIGNAL_")); n != 0 {
		return n
	}
	return syscall.SIGTERM
}

// stop: the stop signal to the process group, SIGKILL after grace; a pause-like
// container exits 0 at once (pause ends on SIGTERM).
func (r *runtime) stop(ctx context.Context, c *container, grace time.Duration) error {
	r.mu.Lock()
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil
	}
	pid := c.pid
	if pid == 0 {
		r.exited(c, 0, "Completed")
		r.mu.Unlock()
		log.Printf("container %.12s: %s stopped (pause-like)", c.id, c.cfg.Metadata.Name)
		return nil
	}
	done := c.done
	r.mu.Unlock()
	sig := stopSignal(c.cfg.GetStopSignal())
	log.Printf("container %.12s: %s: %v to process group %d, grace %v", c.id, c.cfg.Metadata.Name, sig, pid, grace)
	_ = syscall.Kill(-pid, sig)
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		log.Printf("container %.12s: grace period %v over: SIGKILL", c.id, grace)
	case <-ctx.Done():
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return status.Errorf(codes.DeadlineExceeded, "container %q did not exit 10 s after SIGKILL", c.id)
	}
}

func (r *runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, _, err := r.lookup(req.GetContainerId())
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return &runtimeapi.StopContainerResponse{}, nil
		}
		return nil, err
	}
	if err := r.stop(context.WithoutCancel(ctx), c, time.Duration(req.GetTimeout())*time.Second); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, _, err := r.lookup(req.GetContainerId())
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		return nil, err
	}
	if err := r.stop(ctx, c, 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	if c.state == runtimeapi.ContainerState_CONTAINER_CREATED {
		r.exited(c, 0, "")
	}
	delete(r.containers, c.id)
	r.mu.Unlock()
	// Only empty folders are left there: the root was mounted in the
	// container's own mount namespace, gone with its processes.
	if err := os.RemoveAll(c.dir); err != nil {
		log.Printf("container %.12s: remove %s: %v", c.id, c.dir, err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []*runtimeapi.Container{}
	for _, c := range r.containers {
		if f != nil && ((f.Id != "" && f.Id != c.id) || (f.State != nil && f.State.State != c.state) ||
			(f.PodSandboxId != "" && f.PodSandboxId != c.sandboxID) || !labelsMatch(c.cfg.Labels, f.LabelSelector)) {
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id: c.id, PodSandboxId: c.sandboxID, Metadata: c.cfg.Metadata,
			Image: &runtimeapi.ImageSpec{Image: c.image, UserSpecifiedImage: c.image}, ImageRef: c.imageRef, ImageId: c.imageID(),
			State: c.state, CreatedAt: c.createdAt, Labels: c.cfg.Labels, Annotations: c.cfg.Annotations,
		})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (r *runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container", req.GetContainerId())
	}
	st := &runtimeapi.ContainerStatus{
		Id: c.id, Metadata: c.cfg.Metadata, State: c.state, CreatedAt: c.createdAt, StartedAt: c.startedAt,
		FinishedAt: c.finishedAt, ExitCode: c.exitCode,
		Image: &runtimeapi.ImageSpec{Image: c.image, UserSpecifiedImage: c.image}, ImageRef: c.imageRef, ImageId: c.imageID(),
		Reason: c.reason, Message: c.message, Labels: c.cfg.Labels, Annotations: c.cfg.Annotations,
		Mounts: c.cfg.Mounts, LogPath: c.logPath, StopSignal: c.cfg.GetStopSignal(),
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

func (r *runtime) UpdateContainerResources(context.Context, *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func (r *runtime) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, _, err := r.lookup(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	running, logs := c.state == runtimeapi.ContainerState_CONTAINER_RUNNING, c.logs
	r.mu.Unlock()
	if !running {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.id)
	}
	if logs != nil {
		if err := logs.reopen(); err != nil {
			return nil, status.Errorf(codes.Internal, "reopen %s: %v", c.logPath, err)
		}
	} else if f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640); err == nil {
		f.Close()
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// Stats: nothing is measured (no cgroups); empty answers keep the kubelet's
// summary API quiet.
func (r *runtime) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	if _, _, err := r.lookup(req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{}, nil
}

func (r *runtime) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{}, nil
}

func (r *runtime) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	return nil, status.Errorf(codes.Unimplemented, "no sandbox stats (%s)", req.GetPodSandboxId())
}

func (r *runtime) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{}, nil
}

func (r *runtime) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

func (r *runtime) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// stopAll stops every running container (SIGTERM, SIGKILL after grace), at once.
func (r *runtime) stopAll(ctx context.Context, grace time.Duration) {
	r.mu.Lock()
	var all []*container
	for _, c := range r.containers {
		all = append(all, c)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.stop(ctx, c, grace); err != nil && !errors.Is(err, context.Canceled) {
				log.Printf("container %.12s: %v", c.id, err)
			}
		}()
	}
	wg.Wait()
}
