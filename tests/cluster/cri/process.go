package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// initSpec is what the container init (init.go) builds and runs: sent as JSON
// on fd 3 of `drainer-cri __container-init`.
type initSpec struct {
	Root     string      // mount point of the container's tmpfs root (a folder of the node)
	Layers   string      // mount point of the tmpfs of its overlays' upper layers (a folder of the node)
	Image    string      // an OCI image's unpacked root file system: the lower layer of the root ("" for a mapped binary)
	Binary   string      // the mapped binary, symlinks resolved
	BinName  string      // it is /usr/bin/BinName inside
	Mounts   []initMount // the kubelet's volume mounts
	Hostname string      // "" when the pod shares the host's UTS namespace
	ReadOnly bool        // readOnlyRootFilesystem
	Cwd      string
	Argv     []string
	Env      []string
	UID      *int64
	GID      *int64
	Groups   []int64
}

type initMount struct {
	Source   string // host path, symlinks resolved
	Target   string // container path
	ReadOnly bool
	Dir      bool
}

const initArg = "__container-init"

// defaultPath is a container's PATH when the pod sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// binName: drainer.test/NAME:TAG -> NAME.
func binName(image string) string {
	n := path.Base(image)
	if i := strings.IndexAny(n, ":@"); i >= 0 {
		n = n[:i]
	}
	return n
}

// containerEnv: PATH and HOME defaults (or an OCI image's env), HOSTNAME, the
// kubelet's env, the sanitizer variables (san), then the API server on loopback
// (there is no kube-proxy to reach the Service's cluster IP).
func (r *runtime) containerEnv(c *container, sb *sandbox, san []string) []string {
	env := map[string]string{"PATH": defaultPath, "HOME": "/root"}
	if c.oci != nil {
		for _, kv := range c.oci.config.Config.Env {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	if h := sb.cfg.GetHostname(); h != "" && !sb.hostNetwork {
		env["HOSTNAME"] = h
	} else if h, err := os.Hostname(); err == nil {
		env["HOSTNAME"] = h
	}
	for _, kv := range c.cfg.Envs {
		env[kv.Key] = string(kv.Value)
	}
	for _, kv := range san {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	port := strconv.Itoa(r.cfg.apiPort)
	env["KUBERNETES_SERVICE_HOST"] = r.cfg.apiHost
	env["KUBERNETES_SERVICE_PORT"] = port
	env["KUBERNETES_SERVICE_PORT_HTTPS"] = port
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// sanitizerEnv: the variables of --sanitizer-env while the file exists, and the
// folders of their log_path= options (absolute paths), which must be writable
// inside the container: bound there at the same path.
func (r *runtime) sanitizerEnv() (env, dirs []string) {
	if r.cfg.sanEnvFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(r.cfg.sanEnvFile)
	if err != nil {
		if !os.IsNotExist(err) {
			log.Printf("--sanitizer-env %s: %v (ignored)", r.cfg.sanEnvFile, err)
		}
		return nil, nil
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if line == "" || strings.HasPrefix(line, "#") || !ok || k == "" {
			continue
		}
		env = append(env, k+"="+v)
		for _, opt := range strings.Split(v, ":") {
			if p, ok := strings.CutPrefix(opt, "log_path="); ok && filepath.IsAbs(p) {
				if d := filepath.Dir(p); !seen[d] {
					seen[d] = true
					dirs = append(dirs, d)
				}
			}
		}
	}
	return env, dirs
}

// containerArgv: the command the container runs. For an OCI image as a runtime
// does: the pod's command replaces the image's entrypoint, its args the image's cmd
// (which is dropped when the pod gives a command). For a mapped binary: its
// entrypoint is the binary.
func containerArgv(c *container, name string) []string {
	cmd, args := c.cfg.Command, c.cfg.Args
	if c.oci != nil {
		ic := c.oci.config.Config
		if len(cmd) == 0 {
			cmd = ic.Entrypoint
			if len(args) == 0 {
				args = ic.Cmd
			}
		}
	} else if len(cmd) == 0 {
		cmd = []string{"/usr/bin/" + name}
	}
	return append(append([]string{}, cmd...), args...)
}

// buildSpec resolves everything the init needs while still in the node's view
// of the filesystem (host paths, symlinks).
func (r *runtime) buildSpec(c *container, sb *sandbox) (*initSpec, error) {
	san, sanDirs := r.sanitizerEnv()
	spec := &initSpec{
		Root: filepath.Join(c.dir, "root"), Layers: filepath.Join(c.dir, "layers"),
		Cwd: c.cfg.GetWorkingDir(), Env: r.containerEnv(c, sb, san),
	}
	name := binName(c.image)
	if c.oci != nil {
		spec.Image = c.oci.rootfs
		if spec.Cwd == "" {
			spec.Cwd = c.oci.config.Config.WorkingDir
		}
		if st, err := os.Stat(spec.Image); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("image %s: its root file system %s is gone (pull it again)", c.image, spec.Image)
		}
	} else {
		bin, err := filepath.EvalSymlinks(c.mapped)
		if err != nil {
			return nil, fmt.Errorf("image %s: binary %s: %w", c.image, c.mapped, err)
		}
		if st, err := os.Stat(bin); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("image %s: %s is not an executable file", c.image, bin)
		}
		if strings.Contains(name, "/") || name == "" || name == "." || name == ".." {
			return nil, fmt.Errorf("image %s: cannot place its binary (%q) in /usr/bin", c.image, name)
		}
		spec.Binary, spec.BinName = bin, name
	}
	if spec.Cwd == "" {
		spec.Cwd = "/"
	}
	if strings.ContainsAny(spec.Layers, ":,") || strings.ContainsAny(spec.Image, ":,") {
		return nil, fmt.Errorf("image %s: a path with ':' or ',' cannot be an overlay layer (%s, %s)", c.image, spec.Layers, spec.Image)
	}
	if err := os.MkdirAll(spec.Layers, 0o700); err != nil {
		return nil, err
	}
	if !sb.hostNetwork {
		spec.Hostname = sb.cfg.GetHostname()
	}
	spec.Argv = containerArgv(c, name)
	sc := c.cfg.GetLinux().GetSecurityContext()
	if c.oci != nil && c.oci.config.Config.User != "" && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		// The image's user, unless the pod names one.
		uid, gid, err := imageUser(spec.Image, c.oci.config.Config.User)
		if err != nil {
			return nil, fmt.Errorf("image %s: %v", c.image, err)
		}
		spec.UID, spec.GID = &uid, &gid
	}
	if sc != nil {
		spec.ReadOnly = sc.ReadonlyRootfs
		if sc.RunAsUser != nil {
			spec.UID = &sc.RunAsUser.Value
		}
		if sc.RunAsGroup != nil {
			spec.GID = &sc.RunAsGroup.Value
		}
		spec.Groups = sc.SupplementalGroups
	}
	for _, d := range sanDirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			spec.Mounts = append(spec.Mounts, initMount{Source: d, Target: d, Dir: true})
		}
	}
	for _, m := range c.cfg.Mounts {
		t := path.Clean(m.ContainerPath)
		if !path.IsAbs(t) || t == "/" || t == "/.oldroot" || strings.HasPrefix(t, "/.oldroot/") {
			return nil, fmt.Errorf("mount %s: bad container path %q", m.HostPath, m.ContainerPath)
		}
		if m.GetImage().GetImage() != "" {
			return nil, fmt.Errorf("mount %s: image volumes are not supported", t)
		}
		src, err := filepath.EvalSymlinks(m.HostPath)
		if err != nil {
			return nil, fmt.Errorf("mount %s: source %s: %w", t, m.HostPath, err)
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", t, err)
		}
		if strings.HasPrefix(src, "/.oldroot") {
			return nil, fmt.Errorf("mount %s: source %s not allowed", t, src)
		}
		spec.Mounts = append(spec.Mounts, initMount{Source: src, Target: t, ReadOnly: m.Readonly, Dir: st.IsDir()})
	}
	// Parents before children.
	sort.SliceStable(spec.Mounts, func(i, j int) bool {
		di, dj := strings.Count(spec.Mounts[i].Target, "/"), strings.Count(spec.Mounts[j].Target, "/")
		if di != dj {
			return di < dj
		}
		return spec.Mounts[i].Target < spec.Mounts[j].Target
	})
	return spec, nil
}

// startProcess runs a mapped container or one of an OCI image: `drainer-cri __container-init` in new
// mount (and UTS) namespaces builds the root and execs the command. It returns
// once the command runs, or with the init's error.
func (r *runtime) startProcess(c *container, sb *sandbox) error {
	spec, err := r.buildSpec(c, sb)
	if err != nil {
		return err
	}
	logs, err := openLog(c.logPath)
	if err != nil {
		return err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		logs.close()
		return err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		logs.close()
		specR.Close()
		specW.Close()
		return err
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	flags := uintptr(syscall.CLONE_NEWNS)
	if spec.Hostname != "" {
		flags |= syscall.CLONE_NEWUTS
	}
	cmd := exec.Command("/proc/self/exe", initArg)
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{specR, statW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Unshareflags: flags}
	err = cmd.Start()
	specR.Close()
	statW.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		specW.Close()
		statR.Close()
		outR.Close()
		errR.Close()
		logs.close()
		return err
	}
	copied := make(chan struct{}, 2)
	go func() { logs.copy("stdout", outR); outR.Close(); copied <- struct{}{} }()
	go func() { logs.copy("stderr", errR); errR.Close(); copied <- struct{}{} }()
	_ = json.NewEncoder(specW).Encode(spec)
	specW.Close()
	msg, _ := io.ReadAll(statR) // EOF at the exec (close-on-exec), or the init's error
	statR.Close()
	pid := cmd.Process.Pid
	if len(msg) > 0 {
		_ = cmd.Wait()
		logs.close()
		return fmt.Errorf("%s", strings.TrimSpace(string(msg)))
	}
	st, _ := pidStartTime(pid)
	_ = os.WriteFile(filepath.Join(c.dir, "pid"), fmt.Appendf(nil, "%d %s\n", pid, st), 0o600)
	r.mu.Lock()
	c.state, c.startedAt, c.pid, c.logs = runtimeapi.ContainerState_CONTAINER_RUNNING, time.Now().UnixNano(), pid, logs
	c.uts = spec.Hostname != ""
	c.env, c.cwd, c.uid, c.gid = spec.Env, spec.Cwd, spec.UID, spec.GID
	r.mu.Unlock()
	log.Printf("container %.12s: %s of pod %s/%s started: pid %d: %q", c.id, c.cfg.Metadata.Name,
		sb.cfg.Metadata.Namespace, sb.cfg.Metadata.Name, pid, spec.Argv)
	go r.reap(c, cmd, logs, copied)
	return nil
}

// reap waits for a container's main process; then, as the end of a container
// does, it kills what is left of its process group and its exec'd commands.
func (r *runtime) reap(c *container, cmd *exec.Cmd, logs *criLog, copied chan struct{}) {
	err := cmd.Wait()
	pid := cmd.Process.Pid
	code, reason := int32(0), "Completed"
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code, reason = 128+int32(ws.Signal()), "Error"
		} else if ps.ExitCode() != 0 {
			code, reason = int32(ps.ExitCode()), "Error"
		}
	} else if err != nil {
		code, reason = 128, "Error"
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	r.mu.Lock()
	for g := range c.execs {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	r.mu.Unlock()
	for i := 0; i < 2; i++ {
		select {
		case <-copied:
		case <-time.After(time.Second): // a child that escaped the group keeps the pipe open
		}
	}
	logs.close()
	_ = os.Remove(filepath.Join(c.dir, "pid"))
	r.mu.Lock()
	r.exited(c, code, reason)
	r.mu.Unlock()
	log.Printf("container %.12s: %s: pid %d exited with code %d", c.id, c.cfg.Metadata.Name, pid, code)
}

// pidStartTime: field 22 of /proc/PID/stat, to tell a recycled pid.
func pidStartTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("bad stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("bad stat")
	}
	return f[19], nil
}
