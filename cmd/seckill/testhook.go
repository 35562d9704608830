package main

import (
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// holdWriterTxEnv names the partition suite's hook (partition_test.go):
// with it set to a path, the first order-writer transaction of the
// process that takes stock creates PATH.held and then waits, holding the
// sale's row lock, until PATH exists (a minute at most). The suite cuts
// the node off meanwhile, so that it is caught inside its transaction
// every time, not by chance. It is for tests only: it stalls a writer.
const holdWriterTxEnv = "SECKILL_TEST_HOLD_WRITER_TX"

// holdWriterTx arms the hook on orders if the environment asks for it.
func holdWriterTx(orders *sqlstore.OrderStore, logger *slog.Logger) {
	path := os.Getenv(holdWriterTxEnv)
	if path == "" {
		return
	}
	logger.Warn("test hook armed: the first writer transaction will wait inside", "env", holdWriterTxEnv, "path", path)
	var once atomic.Bool
	orders.SetAfterTakeStock(func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		if err := os.WriteFile(path+".held", nil, 0o644); err != nil {
			logger.Error("test hook: cannot signal", "err", err)
			return
		}
		logger.Warn("test hook: holding a writer transaction open", "path", path)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				break
			}
		}
		logger.Warn("test hook: writer transaction released")
	})
}
