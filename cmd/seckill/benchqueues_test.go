package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill/internal/bench"
	"github.com/seckill-dev/seckill/internal/rabbitmq"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// queueExists reports whether the RabbitMQ at url has queue.
func queueExists(t *testing.T, url, queue string) bool {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return err == nil
}

// TestBenchEngineLeavesNoRabbitMQQueues: a bench engine on RabbitMQ
// deletes its queues when it closes, and on start deletes those a killed
// run left (noted in the ledger under a process that is gone), but not
// those of a run still going.
func TestBenchEngineLeavesNoRabbitMQQueues(t *testing.T) {
	url := servicetest.RabbitMQ.URL(t)
	t.Setenv("TMPDIR", t.TempDir()) // a ledger of this test's own
	ctx := context.Background()

	// A killed run's queues: declared, noted under a process that is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover, live := servicetest.UniqueName("seckill_bench_left"), servicetest.UniqueName("seckill_bench_live")
	for _, q := range []string{leftover, live} {
		b, err := rabbitmq.New(ctx, url, q)
		if err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
	}
	t.Cleanup(func() { _ = deleteBenchQueue(context.Background(), url, live) })
	ledger := fmt.Sprintf("%d %s\n%d %s\n", dead.Process.Pid, leftover, os.Getpid(), live)
	if err := os.WriteFile(benchQueueLedger(), []byte(ledger), 0o600); err != nil {
		t.Fatal(err)
	}

	own := servicetest.UniqueName("seckill_bench_own")
	eng, err := runBenchEngine(ctx, bench.EngineConfig{
		DataDir: t.TempDir(), BrokerURL: url, BrokerQueue: own, Namespace: own, RedisKeyPrefix: servicetest.UniqueName("skbench"),
		RateLimitIP: "off", RateLimitUser: "off", JWTSecret: "0123456789abcdef0123456789abcdef", AdminToken: "admin-token-of-the-test-0123456789abcdef",
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if queueExists(t, url, leftover) || queueExists(t, url, leftover+".dead") {
		t.Errorf("the killed run's queues %s.* are still there", leftover)
	}
	if !queueExists(t, url, live) {
		t.Errorf("the queue %s of a run still going was deleted", live)
	}
	for _, q := range []string{own, own + ".dead", own + ".retry.100ms", own + ".retry.800ms"} {
		if !queueExists(t, url, q) {
			t.Fatalf("the engine's queue %s is not there", q)
		}
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{own, own + ".dead", own + ".retry.100ms", own + ".retry.800ms"} {
		if queueExists(t, url, q) {
			t.Errorf("queue %s is still there after the engine closed", q)
		}
	}
	if b, err := os.ReadFile(benchQueueLedger()); err != nil || string(b) != fmt.Sprintf("%d %s\n", os.Getpid(), live) {
		t.Errorf("ledger %q, %v; want only the live run's queue", b, err)
	}
}
