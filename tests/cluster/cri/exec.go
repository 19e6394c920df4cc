package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxExecOutput caps what ExecSync keeps of each stream.
const maxExecOutput = 1 << 20

type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxExecOutput - c.Len(); room > 0 {
		if len(p) > room {
			c.Buffer.Write(p[:room])
		} else {
			c.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// ExecSync runs a command in a running container, as exec probes and exec
// lifecycle hooks do: in the container's mount (and UTS) namespace, so it sees
// the container's root and volumes, in its working directory, with its env and
// user. It ends with the container: the exec'd process group is killed when the
// container's main process exits.
func (r *runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	c, sb, err := r.lookup(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	who := fmt.Sprintf("container %.12s (pod %s, container %s)", c.id, podName(sb), c.cfg.Metadata.Name)
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no command")
	}
	r.mu.Lock()
	running, pid, uts, env, cwd, uid, gid := c.state == runtimeapi.ContainerState_CONTAINER_RUNNING, c.pid, c.uts, c.env, c.cwd, c.uid, c.gid
	r.mu.Unlock()
	if !running {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.id)
	}
	if pid == 0 {
		// A pause image has no programs: a real runtime fails the same way.
		return nil, status.Errorf(codes.Unknown, "exec %q in container %s: image %s has no executables (pause-like)",
			req.Cmd[0], c.cfg.Metadata.Name, c.image)
	}
	args := []string{"--target", strconv.Itoa(pid), "--mount", "--wdns=" + cwd}
	if uts {
		args = append(args, "--uts")
	}
	if gid != nil {
		args = append(args, "--setgid", strconv.FormatInt(*gid, 10))
	}
	if uid != nil {
		args = append(args, "--setuid", strconv.FormatInt(*uid, 10))
	}
	args = append(append(args, "--"), req.Cmd...)
	if req.GetTimeout() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
		defer cancel()
	}
	cmd := exec.Command("nsenter", args...)
	cmd.Env = env
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, status.Errorf(codes.Internal, "exec: %v", err)
	}
	g := cmd.Process.Pid
	r.mu.Lock()
	c.execs[g] = true
	r.mu.Unlock()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	timedOut := false
	select {
	case werr = <-waited:
	case <-ctx.Done():
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		_ = syscall.Kill(-g, syscall.SIGKILL)
		werr = <-waited
	}
	r.mu.Lock()
	delete(c.execs, g)
	r.mu.Unlock()
	took := time.Since(t0).Round(time.Millisecond)
	code := int32(0)
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int32(ws.Signal())
		} else {
			code = int32(ps.ExitCode())
		}
	} else if werr != nil {
		code = 128
	}
	what := strings.Join(req.Cmd, " ")
	if len(what) > 200 {
		what = what[:200] + "..."
	}
	switch {
	case timedOut:
		log.Printf("%s: exec %q killed after %v (timeout %d s)", who, what, took, req.Timeout)
		return nil, status.Errorf(codes.DeadlineExceeded, "command %q timed out after %d s", what, req.Timeout)
	case ctx.Err() != nil:
		log.Printf("%s: exec %q cancelled after %v", who, what, took)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	logOutput(who, "stdout", stdout.Bytes())
	logOutput(who, "stderr", stderr.Bytes())
	log.Printf("%s: exec %q exited %d after %v", who, what, code, took)
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, nil
}

// maxLoggedLines of an exec's output go to the runtime's log (as the simulator
// logs its hooks' output): what a hook or probe said stays visible.
const maxLoggedLines = 200

func logOutput(who, stream string, out []byte) {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(out) == 0 {
		return
	}
	for i, l := range lines {
		if i == maxLoggedLines {
			log.Printf("%s: exec %s: (%d more lines)", who, stream, len(lines)-i)
			break
		}
		log.Printf("%s: exec %s: %s", who, stream, l)
	}
}

// podName: NAMESPACE/NAME of a sandbox's pod.
func podName(sb *sandbox) string {
	if sb == nil {
		return "?"
	}
	return sb.cfg.GetMetadata().GetNamespace() + "/" + sb.cfg.GetMetadata().GetName()
}

// noStreaming: kubectl exec/attach/port-forward need a streaming server.
func noStreaming(what string) error {
	return status.Errorf(codes.Unimplemented, "%s is not supported by drainer-cri (no streaming server): use ExecSync-based probes and hooks", what)
}

func (r *runtime) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, noStreaming("exec")
}

func (r *runtime) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, noStreaming("attach")
}

func (r *runtime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, noStreaming("port-forward")
}
