//go:build linux && amd64

package powercut

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestMain lets the test binary be the traced process: with
// POWERCUT_CHILD set to a directory it writes there and waits to be killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("POWERCUT_CHILD"); dir != "" {
		child(dir)
		return
	}
	os.Exit(m.Run())
}

// child writes "synced" to a and syncs it (twice, the second time with
// fdatasync), then appends to a and writes b without syncing either,
// writes c opened O_SYNC, says so on stdout and waits for its SIGKILL.
func child(dir string) {
	a, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		panic(err)
	}
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	_, err = a.WriteString("syn")
	must(err)
	must(a.Sync())
	_, err = a.WriteString("ced")
	must(err)
	must(syscall.Fdatasync(int(a.Fd())))
	_, err = a.WriteString(" and lost")
	must(err)
	must(os.WriteFile(filepath.Join(dir, "b"), []byte("never synced"), 0o644))
	c, err := os.OpenFile(filepath.Join(dir, "c"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	must(err)
	_, err = c.WriteString("written O_SYNC")
	must(err)
	os.Stdout.WriteString("written\n")
	select {}
}

// TestCutRollsBackToTheLastSync: after the kill, a holds what it held at
// its last sync, b, never synced, is gone, and c keeps its O_SYNC write.
func TestCutRollsBackToTheLastSync(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "POWERCUT_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Start(cmd, dir)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "written\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "synced and lost" {
		t.Fatalf("before the cut a holds %q", b)
	}
	if err := syscall.Kill(tr.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r, err := tr.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "synced" {
		t.Errorf("after the cut a holds %q, %v; want %q", b, err, "synced")
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("b, never synced, is still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "c")); err != nil || string(b) != "written O_SYNC" {
		t.Errorf("after the cut c holds %q, %v; want its O_SYNC write", b, err)
	}
	if r.Syncs != 3 || !slices.Equal(r.Restored, []string{"a", "c"}) || !slices.Equal(r.Deleted, []string{"b"}) || r.Truncated != int64(len(" and lost")) {
		t.Errorf("report %+v; want 3 syncs, a (9 bytes off) and c restored, b deleted", r)
	}
}
