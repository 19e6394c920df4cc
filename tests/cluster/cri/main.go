// Command drainer-cri is the container runtime (CRI, k8s.io/cri-api v1) of one
// real test node of tests/cluster: the kubelet of that node talks to it over a
// unix socket. See tests/cluster/README.md, "Real nodes".
//
//   - A container whose image is mapped (--image drainer.test/NAME:TAG=PATH) runs
//     as a local process with the command, args and env the kubelet gives, in a
//     private root of its own: a tmpfs with the host's /usr, /lib*, /bin, /sbin
//     and /etc as overlays (the host's folders their read-only lower layers, the
//     upper layers on the container's own tmpfs), a small /dev, /proc, /sys
//     (read-only), /tmp and /run, the mapped binary at /usr/bin/NAME, and the
//     volume mounts the kubelet prepared (hostPath, emptyDir, projected tokens,
//     configMaps, downward API), entered with pivot_root inside a mount namespace
//     of its own (init.go).
//     StopContainer sends SIGTERM to its process group (or the container's stop
//     signal), SIGKILL after the grace period; its real exit code is reported.
//   - ExecSync (exec probes, exec lifecycle hooks) runs the command in the
//     container's mount namespace (nsenter), with the container's env.
//   - Any other image behaves like a pause container: it "runs" until stopped,
//     with no process (an init container of such an image exits 0 at once).
//   - Each pod gets one IP of the node's loopback range (--ip-prefix P.i: P.i.2 ..
//     P.i.254; pods matching --pinned-pods get --pinned-ip); host-network pods
//     share the host's.
//   - Every container has a real log file (CRI format) at the path the kubelet
//     asked for: an empty LogPath makes the kubelet's log cleanup glob "*" in its
//     working directory (it removed a host's /bin once).
//
// It must run in a mount namespace of its own (tests/cluster/up starts it with
// `unshare --mount --propagation private`), which is the node's: --bind mounts
// cluster-folder paths over the host paths the kubelet hard-codes (/var/lib,
// /var/log, the sysctls it writes) there, and the node's kubelet joins it. It
// refuses to start in its parent's or pid 1's mount namespace.
package main

import (
	"context"
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
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// version of this runtime, reported to the kubelet.
const version = "1.0.0"

type stringMap map[string]string

func (m stringMap) String() string {
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func (m stringMap) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", item)
		}
		m[k] = v
	}
	return nil
}

// bindList is --bind SOURCE=TARGET, in order.
type bindList [][2]string

func (b *bindList) String() string {
	kv := make([]string, 0, len(*b))
	for _, p := range *b {
		kv = append(kv, p[0]+"="+p[1])
	}
	return strings.Join(kv, ",")
}

func (b *bindList) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		src, dst, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !filepath.IsAbs(src) || !filepath.IsAbs(dst) {
			return fmt.Errorf("want /SOURCE=/TARGET, got %q", item)
		}
		*b = append(*b, [2]string{src, dst})
	}
	return nil
}

type config struct {
	listen      string
	nodeName    string
	nodeDir     string
	ipPrefix    string // three octets: P.i
	pinnedIP    string
	pinnedPods  string // NAMESPACE/LABEL=VALUE
	images      stringMap
	binds       bindList // node-namespace bind mounts: SOURCE=TARGET
	apiHost     string
	apiPort     int
	kubeletURL  string
	clientCert  string
	clientKey   string
	caFile      string
	stopTimeout time.Duration
	ociArchives stringMap // REPO -> archive path
	ociDir      string    // where archives' images are unpacked
	sanEnvFile  string    // --sanitizer-env
}

func parseFlags() (*config, error) {
	c := &config{images: stringMap{}, ociArchives: stringMap{}}
	flag.StringVar(&c.listen, "listen", "", "unix socket to serve the CRI on (required)")
	flag.StringVar(&c.nodeName, "node-name", "", "name of the node (for logs)")
	flag.StringVar(&c.nodeDir, "node-dir", "", "the node's state folder: containers/ (roots, pid files) and fallback logs (required)")
	flag.StringVar(&c.ipPrefix, "ip-prefix", "", "three octets P.i: pods get P.i.2 .. P.i.254 (required)")
	flag.StringVar(&c.pinnedIP, "pinned-ip", "", "the IP of the first live pod matching --pinned-pods (e.g. the DRA driver's P.i.1)")
	flag.StringVar(&c.pinnedPods, "pinned-pods", "", "NAMESPACE/KEY=VALUE: the pods that get --pinned-ip")
	flag.Var(c.images, "image", "IMAGE=PATH: containers of IMAGE run PATH (a binary, or a symlink to one, read at each start) as /usr/bin/NAME; repeatable, comma-separated")
	flag.Var(&c.binds, "bind", "SOURCE=TARGET: bind mount SOURCE over TARGET in the node's mount namespace at start; repeatable, comma-separated")
	flag.StringVar(&c.apiHost, "api-host", "127.0.0.1", "KUBERNETES_SERVICE_HOST of every container (there is no kube-proxy)")
	flag.IntVar(&c.apiPort, "api-port", 0, "KUBERNETES_SERVICE_PORT of every container: the API server's port (required)")
	flag.StringVar(&c.kubeletURL, "kubelet-url", "", "https://IP:PORT of the node's kubelet, read (GET /pods) to tell init containers of pause-like images")
	flag.StringVar(&c.clientCert, "kubelet-client-cert", "", "client certificate for --kubelet-url")
	flag.StringVar(&c.clientKey, "kubelet-client-key", "", "client key for --kubelet-url")
	flag.StringVar(&c.caFile, "ca", "", "CA that signed the kubelet's serving certificate")
	flag.DurationVar(&c.stopTimeout, "stop-timeout", 5*time.Second, "on SIGTERM, containers get this long to stop before SIGKILL")
	flag.Var(c.ociArchives, "oci-archive", "REPO=PATH: images REPO:TAG and REPO@DIGEST come from the OCI archive PATH (read at each pull; TAG = a manifest's org.opencontainers.image.ref.name); repeatable, comma-separated")
	flag.StringVar(&c.ociDir, "oci-dir", "", "folder where the images of --oci-archive are unpacked, once per manifest digest (may be shared by the runtimes of several nodes)")
	flag.StringVar(&c.sanEnvFile, "sanitizer-env", "", "file of VAR=VALUE lines (ASAN_OPTIONS=..., UBSAN_OPTIONS=...): while it exists, containers started get these variables and the folders of their log_path= bound at the same path, and so do the commands exec'd in them")
	flag.Parse()
	switch {
	case c.listen == "":
		return nil, errors.New("--listen is required")
	case c.nodeDir == "" || !filepath.IsAbs(c.nodeDir):
		return nil, errors.New("--node-dir must be an absolute path")
	case len(strings.Split(c.ipPrefix, ".")) != 3 || net.ParseIP(c.ipPrefix+".1") == nil:
		return nil, errors.New("--ip-prefix must be three octets, e.g. 127.1.2")
	case c.apiPort <= 0 || c.apiPort > 65535:
		return nil, errors.New("--api-port is required")
	case (c.pinnedIP == "") != (c.pinnedPods == ""):
		return nil, errors.New("--pinned-ip and --pinned-pods go together")
	case c.pinnedIP != "" && net.ParseIP(c.pinnedIP) == nil:
		return nil, fmt.Errorf("--pinned-ip %q is not an IP", c.pinnedIP)
	}
	for img, path := range c.images {
		if !strings.Contains(img, "/") || !filepath.IsAbs(path) {
			return nil, fmt.Errorf("--image %s=%s: want REGISTRY/NAME:TAG=/ABSOLUTE/PATH", img, path)
		}
	}
	for repo, path := range c.ociArchives {
		if strings.ContainsAny(repo, ":@") || !strings.Contains(repo, "/") || !filepath.IsAbs(path) {
			return nil, fmt.Errorf("--oci-archive %s=%s: want REGISTRY/NAME=/ABSOLUTE/PATH (no tag)", repo, path)
		}
		if _, clash := c.images[repo]; clash {
			return nil, fmt.Errorf("--oci-archive %s is also an --image", repo)
		}
	}
	if len(c.ociArchives) > 0 && (c.ociDir == "" || !filepath.IsAbs(c.ociDir) || strings.ContainsAny(c.ociDir, ":,")) {
		return nil, errors.New("--oci-archive needs --oci-dir, an absolute path without ':' or ','")
	}
	if c.sanEnvFile != "" && !filepath.IsAbs(c.sanEnvFile) {
		return nil, errors.New("--sanitizer-env must be an absolute path")
	}
	if c.nodeName == "" {
		c.nodeName = filepath.Base(c.nodeDir)
	}
	return c, nil
}

// mountNS is the inode of a process's mount namespace ("" if unreadable).
func mountNS(pid string) string {
	l, err := os.Readlink("/proc/" + pid + "/ns/mnt")
	if err != nil {
		return ""
	}
	return l
}

// setupNodeNamespace checks that this process has a mount namespace of its own
// and makes the node's bind mounts there. Doing them in the host's namespace
// would hide the host's /var/lib and /var/log from everyone: it refuses.
func setupNodeNamespace(binds bindList) error {
	self := mountNS("self")
	if self == "" {
		return errors.New("cannot read /proc/self/ns/mnt")
	}
	for _, other := range []string{strconv.Itoa(os.Getppid()), "1"} {
		if mountNS(other) == self {
			return fmt.Errorf("refusing to run in the mount namespace of pid %s (%s): start me with `unshare --mount --propagation private`", other, self)
		}
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	for _, b := range binds {
		src, dst := b[0], b[1]
		if _, err := os.Stat(dst); err != nil {
			return fmt.Errorf("bind target %s: %w (it must exist: no mount point is created outside the cluster folder)", dst, err)
		}
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", src, dst, err)
		}
		log.Printf("node namespace %s: bound %s over %s", self, src, dst)
	}
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == initArg {
		containerInit() // never returns
	}
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds | log.LUTC)
	// The commands exec'd in containers (probes, hooks) get a container's umask, 022,
	// not the one this runtime was started with (tests/cluster/up: 077).
	syscall.Umask(0o022)
	cfg, err := parseFlags()
	if err != nil {
		log.Fatalf("drainer-cri: %v", err)
	}
	if err := setupNodeNamespace(cfg.binds); err != nil {
		log.Fatalf("drainer-cri: %v", err)
	}
	rt, err := newRuntime(cfg)
	if err != nil {
		log.Fatalf("drainer-cri: %v", err)
	}
	_ = os.Remove(cfg.listen)
	lis, err := net.Listen("unix", cfg.listen)
	if err != nil {
		log.Fatalf("drainer-cri: listen: %v", err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20))
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	runtimeapi.RegisterImageServiceServer(srv, &imageService{rt: rt})
	go func() {
		if err := srv.Serve(lis); err != nil {
			log.Printf("drainer-cri: serve: %v", err)
		}
	}()
	log.Printf("drainer-cri %s for %s serving on %s (pods %s.2-254, images %s, OCI archives %s)", version, cfg.nodeName, cfg.listen,
		cfg.ipPrefix, cfg.images.String(), cfg.ociArchives.String())

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	s := <-sigs
	log.Printf("got %v: stopping every container (SIGKILL after %v)", s, cfg.stopTimeout)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.stopTimeout+5*time.Second)
	defer cancel()
	rt.stopAll(ctx, cfg.stopTimeout)
	log.Printf("stopped")
}
