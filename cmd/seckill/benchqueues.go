package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/seckill-dev/seckill/internal/rabbitmq"
)

// The RabbitMQ queues of bench engines: each engine declares five queues
// of its own (seckill_bench_<hex>.*), which bench deletes when the engine
// closes. A run killed before that leaves them: every engine notes its
// queue in benchQueueLedger with its process id, and the next engine
// deletes those of processes that are gone.

// benchQueueLedger is the file of "<pid> <queue>" lines, in the temporary
// directory shared by this machine's runs.
func benchQueueLedger() string { return filepath.Join(os.TempDir(), "seckill-bench-rabbitmq-queues") }

var benchLedgerMu sync.Mutex

// isRabbitMQ reports whether a broker URL names RabbitMQ.
func isRabbitMQ(u string) bool {
	return strings.HasPrefix(u, "amqp://") || strings.HasPrefix(u, "amqps://")
}

// deleteBenchQueue deletes the queues of a bench engine's queue name.
func deleteBenchQueue(ctx context.Context, url, queue string) error {
	if !strings.HasPrefix(queue, "seckill_bench_") {
		return fmt.Errorf("delete bench queue %q: not a bench queue", queue)
	}
	b, err := rabbitmq.New(ctx, url, queue)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Delete(ctx)
}

// noteBenchQueue records queue as this process's, after deleting the queues
// the ledger holds of processes that are gone.
func noteBenchQueue(ctx context.Context, url, queue string) error {
	benchLedgerMu.Lock()
	defer benchLedgerMu.Unlock()
	kept, err := sweepBenchLedger(ctx, url)
	kept = append(kept, fmt.Sprintf("%d %s", os.Getpid(), queue))
	return errors.Join(err, os.WriteFile(benchQueueLedger(), []byte(strings.Join(kept, "\n")+"\n"), 0o600))
}

// forgetBenchQueue deletes queue and takes it off the ledger.
func forgetBenchQueue(ctx context.Context, url, queue string) error {
	err := deleteBenchQueue(ctx, url, queue)
	if err != nil {
		return err // the ledger keeps it for a later run
	}
	benchLedgerMu.Lock()
	defer benchLedgerMu.Unlock()
	b, rerr := os.ReadFile(benchQueueLedger())
	if rerr != nil {
		return nil
	}
	var kept []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if _, q, _ := strings.Cut(line, " "); line != "" && q != queue {
			kept = append(kept, line)
		}
	}
	return os.WriteFile(benchQueueLedger(), []byte(strings.Join(kept, "\n")+"\n"), 0o600)
}

// sweepBenchLedger deletes the queues of the ledger's dead processes and
// returns the lines to keep (live processes' queues, and those it could
// not delete).
func sweepBenchLedger(ctx context.Context, url string) ([]string, error) {
	b, err := os.ReadFile(benchQueueLedger())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var kept []string
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pidText, queue, ok := strings.Cut(line, " ")
		pid, perr := strconv.Atoi(pidText)
		if !ok || perr != nil {
			continue // not a line this code writes: dropped
		}
		if processAlive(pid) {
			kept = append(kept, line)
			continue
		}
		if err := deleteBenchQueue(ctx, url, queue); err != nil {
			errs = append(errs, fmt.Errorf("leftover bench queue %s: %w", queue, err))
			kept = append(kept, line)
		}
	}
	return kept, errors.Join(errs...)
}

// processAlive reports whether a process of that id runs.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
