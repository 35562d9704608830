//go:build linux && amd64

package powercut

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Syscall numbers of linux/amd64 that make a file durable.
const (
	sysFsync         = 74
	sysFdatasync     = 75
	sysSync          = 162
	sysSyncfs        = 306
	sysSyncFileRange = 277
	sysMsync         = 26
	sysWrite         = 1
	sysPwrite64      = 18
	sysWritev        = 20
	sysPwritev       = 296
	sysPwritev2      = 328
	oDsync           = 0o10000 // O_DSYNC, part of O_SYNC too
	enosys           = -int64(syscall.ENOSYS)
	ptraceOExitKill  = 0x100000 // PTRACE_O_EXITKILL: the tracee dies with the tracer
)

// Tracer runs one process and keeps the synced copies of dir's files.
type Tracer struct {
	dir    string
	pid    int
	exited chan struct{}

	mu     sync.Mutex
	copies map[uint64][]byte // inode -> content at its last sync
	syncs  int
	other  []string // syncs it cannot model (sync, syncfs, msync, …)
	err    error
}

// Start starts cmd under the tracer. cmd must not be waited for: the
// tracer reaps it; Exited is closed once it is gone.
func Start(cmd *exec.Cmd, dir string) (*Tracer, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	t := &Tracer{dir: dir, exited: make(chan struct{}), copies: map[uint64][]byte{}}
	started := make(chan error, 1)
	go func() {
		// Every ptrace request must come from the thread that started the
		// tracee.
		runtime.LockOSThread()
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		// Its own process group, so that the tracer waits for its
		// threads only, not for the test's other children.
		cmd.SysProcAttr.Ptrace, cmd.SysProcAttr.Setpgid = true, true
		if err := cmd.Start(); err != nil {
			started <- err
			close(t.exited)
			return
		}
		t.pid = cmd.Process.Pid
		started <- nil
		t.loop()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return t, nil
}

// Exited is closed when the traced process has exited.
func (t *Tracer) Exited() <-chan struct{} { return t.exited }

// Pid is the traced process's id.
func (t *Tracer) Pid() int { return t.pid }

// loop follows every thread of the process from syscall stop to syscall
// stop until the process is gone.
func (t *Tracer) loop() {
	defer close(t.exited)
	var ws syscall.WaitStatus
	// The tracee stops at its exec first.
	if _, err := syscall.Wait4(t.pid, &ws, syscall.WALL, nil); err != nil {
		t.fail(fmt.Errorf("wait for exec: %w", err))
		return
	}
	const opts = syscall.PTRACE_O_TRACESYSGOOD | syscall.PTRACE_O_TRACECLONE | ptraceOExitKill
	if err := syscall.PtraceSetOptions(t.pid, opts); err != nil {
		t.fail(fmt.Errorf("ptrace options: %w", err))
		_ = syscall.Kill(t.pid, syscall.SIGKILL)
		return
	}
	_ = syscall.PtraceSyscall(t.pid, 0)
	for {
		tid, err := syscall.Wait4(-t.pid, &ws, syscall.WALL, nil)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return // ECHILD: every thread is gone
		}
		switch {
		case ws.Exited() || ws.Signaled():
			if tid == t.pid {
				// The leader is reported last: the process is gone.
				return
			}
			continue
		case !ws.Stopped():
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == syscall.SIGTRAP|0x80: // a syscall stop
			t.syscallStop(tid)
			sig = 0
		case sig == syscall.SIGTRAP && ws.TrapCause() != 0: // clone and the like
			sig = 0
		case sig == syscall.SIGSTOP:
			// A new thread starts stopped; a real SIGSTOP is not expected.
			sig = 0
		}
		_ = syscall.PtraceSyscall(tid, int(sig))
	}
}

// syscallStop copies the file a sync is about to make durable, at the
// sync's entry.
func (t *Tracer) syscallStop(tid int) {
	var regs syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(tid, &regs); err != nil {
		return
	}
	if int64(regs.Rax) != enosys { // an exit stop
		switch regs.Orig_rax {
		case sysWrite, sysPwrite64, sysWritev, sysPwritev, sysPwritev2:
			// A write to a file opened O_SYNC or O_DSYNC is durable when it
			// returns (how NATS writes its stream metadata).
			if int64(regs.Rax) >= 0 && t.underDir(int(regs.Rdi)) && t.syncOpened(int(regs.Rdi)) {
				t.copyFd(int(regs.Rdi))
			}
		}
		return
	}
	switch regs.Orig_rax {
	case sysFsync, sysFdatasync:
		t.copyFd(int(regs.Rdi))
	case sysSync, sysSyncfs, sysSyncFileRange, sysMsync:
		t.mu.Lock()
		t.other = append(t.other, strconv.FormatUint(regs.Orig_rax, 10))
		t.mu.Unlock()
	}
}

// underDir reports whether the process's fd is a file under dir.
func (t *Tracer) underDir(fd int) bool {
	path, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", t.pid, fd))
	return err == nil && strings.HasPrefix(path, t.dir+string(filepath.Separator))
}

// syncOpened reports whether the process's fd was opened O_SYNC or
// O_DSYNC.
func (t *Tracer) syncOpened(fd int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", t.pid, fd))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&oDsync != 0
		}
	}
	return false
}

// copyFd keeps the content of the process's file fd if it is a regular
// file under dir.
func (t *Tracer) copyFd(fd int) {
	link := fmt.Sprintf("/proc/%d/fd/%d", t.pid, fd)
	path, err := os.Readlink(link)
	if err != nil || !strings.HasPrefix(path, t.dir+string(filepath.Separator)) {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Stat(link, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	b, err := os.ReadFile(link)
	if err != nil {
		t.fail(fmt.Errorf("copy %s at its sync: %w", path, err))
		return
	}
	t.mu.Lock()
	t.copies[st.Ino] = b
	t.syncs++
	t.mu.Unlock()
}

func (t *Tracer) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// Report is what a rollback did.
type Report struct {
	Syncs      int      // fsyncs, fdatasyncs and O_SYNC writes of dir's files seen
	Restored   []string // files rolled back to their last sync, relative to dir
	Truncated  int64    // bytes the rollback took off those files
	Deleted    []string // files never synced, deleted
	OtherSyncs []string // syscall numbers of syncs it could not model
}

// Cut rolls dir back to what a disk would hold after a power cut at this
// moment. Call it once the process has exited.
func (t *Tracer) Cut() (Report, error) {
	<-t.exited
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return Report{}, t.err
	}
	r := Report{Syncs: t.syncs, OtherSyncs: t.other}
	err := filepath.WalkDir(t.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(t.dir, path)
		b, ok := t.copies[info.Sys().(*syscall.Stat_t).Ino]
		if !ok {
			r.Deleted = append(r.Deleted, rel)
			return os.Remove(path)
		}
		r.Restored = append(r.Restored, rel)
		r.Truncated += info.Size() - int64(len(b))
		return os.WriteFile(path, b, info.Mode().Perm())
	})
	return r, err
}
