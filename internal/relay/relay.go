// Package relay owns the hop from the stock store's outboxes to the broker:
// it reads every registered sale's outbox stream as a member of a consumer
// group, publishes the reservations (one Publish, one round of confirms per
// batch), and only once the broker has confirmed them acknowledges and
// deletes them from the stream. Entries a dead relay left unacknowledged
// are reclaimed after Config.ClaimMinIdle. Delivery is at least once: a
// crash between the broker's confirm and the acknowledgement publishes the
// batch again, and the order writer deduplicates on the reservation id.
package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Outbox is the part of the stock store (internal/redis) the relay uses.
type Outbox interface {
	// OutboxSales lists the sales whose outboxes must be read.
	OutboxSales(ctx context.Context) ([]string, error)
	// ForgetOutbox drops a sale from that list if its outbox is empty and
	// it can take no more reservations.
	ForgetOutbox(ctx context.Context, saleID string) (forgotten bool, err error)
	OutboxLen(ctx context.Context, saleID string) (int64, error)
	// ReadOutbox hands consumer up to count entries no one was given yet.
	// The reads return an outbox entry's reservations one by one, sharing
	// its stream id (an entry holds a batch of the reserve script's), and
	// count in entries.
	ReadOutbox(ctx context.Context, saleID, group, consumer string, count int, block time.Duration) ([]seckill.OutboxEntry, error)
	// ReadPendingOutbox returns up to count entries given to consumer and
	// not yet acked.
	ReadPendingOutbox(ctx context.Context, saleID, group, consumer string, count int) ([]seckill.OutboxEntry, error)
	// ClaimStaleOutbox takes over entries pending for at least minIdle.
	ClaimStaleOutbox(ctx context.Context, saleID, group, consumer string, minIdle time.Duration, count int) ([]seckill.OutboxEntry, error)
	// AckOutbox acknowledges and deletes confirmed entries.
	AckOutbox(ctx context.Context, saleID, group string, ids []string) error
}

// Config tunes a Relay. Zero values take the defaults.
type Config struct {
	// Group is the consumer group shared by every relay; default "relay".
	// All relays of a deployment must use the same group: an entry is
	// deleted once one group has acknowledged it.
	Group string
	// Consumer names this relay within the group; default
	// "<hostname>-<pid>-<random>". Reusing a dead relay's name makes its
	// pending entries this relay's at once, without waiting ClaimMinIdle.
	Consumer string
	// BatchSize is the most reservations published in one Publish call;
	// default 500. An outbox entry (a batch of the reserve script's) is
	// published whole: a Publish holds whole entries up to BatchSize, or
	// one larger entry alone, and entries read beyond them wait, pending
	// for this relay, for its next pass.
	BatchSize int
	// Block is how long a read waits for new entries when the relay is
	// idle (its last pass over the sales found nothing). Sales are read
	// one after another, so with many sales a pass may wait Block for each;
	// keep it short then. Default 0: reads never wait, and an idle relay
	// sleeps PollInterval between passes.
	Block time.Duration
	// ClaimMinIdle is how long an entry must have been pending, unacked,
	// before another relay takes it over: longer than a slow Publish, or
	// live relays publish each other's batches twice. Default 30s.
	ClaimMinIdle time.Duration
	// PublishTimeout bounds one Publish: a broker that went silent (a cut
	// network, a paused server) fails the batch, which is read again from
	// the pending entries, instead of holding the relay until TCP
	// notices. Its entries go to another relay after ClaimMinIdle
	// anyway. Default 10s.
	PublishTimeout time.Duration
	// PollInterval is the pause between passes that found nothing;
	// default 50ms.
	PollInterval time.Duration
	// Linger, if set, is the least time from the start of a pass that
	// found entries, but no full batch, to the start of the next: under
	// load each batch then holds what arrived in that time instead of the
	// few entries appended while the last Publish ran. A batch costs
	// about the same whatever its size: a publish and its confirm, a
	// delivery and its ack, the order writer's transaction (over
	// internal/handoff the Publish is that transaction). The first entry
	// after an idle spell is read at once, a full batch does not wait,
	// a linger ends once this process has appended a full batch since the
	// pass began (Appended), and a relay that is stopping does not
	// linger. Default 0: the next pass starts at once.
	Linger time.Duration
	// Wake, if set, ends an idle relay's pause at once: the stock store
	// of this process signals it when a reserve call appends to an outbox
	// (redis.WithOnOutboxAppend), so entries made here are relayed
	// without waiting out PollInterval. A relay in another process still
	// finds them at its next poll.
	Wake <-chan struct{}
	// Appended, if set, is the number of reservations the stock store of
	// this process has appended to outboxes so far, read when Wake is
	// signalled during a linger: at the opening instant a full batch
	// waits within milliseconds, and the relay goes on at once instead of
	// waiting out the linger that began when the outbox held a few.
	Appended func() uint64
	// Backoff is the first pause before a sale whose Publish or Redis call
	// failed is tried again; it doubles up to MaxBackoff. Defaults 100ms
	// and 5s.
	Backoff    time.Duration
	MaxBackoff time.Duration
	Logger     *slog.Logger
	// CompactEvents publishes events in the compact layout
	// (seckill.ReservationEvent.CompactMessage) instead of JSON: only for
	// a broker whose every writer reads it (this version or later).
	CompactEvents bool
	// OnPublished, if set, is told the size of every batch the broker
	// confirmed (duplicates included), for a metric.
	OnPublished func(n int)
	// OnReclaimed, if set, is told every takeover: the reservations of
	// the entries of sale that another relay had left unacknowledged for
	// ClaimMinIdle and this one claimed, for a metric.
	OnReclaimed func(sale string, reservations int)
	// Progress, if set, is told which reserve batches the broker holds:
	// a mark taken before each pass, stored once the pass published
	// everything every outbox held when it started (internal/ackgate).
	Progress Progress
}

// Progress is what the relay tells of the batches it stored. It assumes
// this relay is the only one reading the outboxes.
type Progress interface {
	// Mark is taken before a pass reads the outboxes.
	Mark() uint64
	// Stored says that every entry written before Mark was taken is
	// published and confirmed.
	Stored(mark uint64)
}

func (c Config) withDefaults() Config {
	if c.Group == "" {
		c.Group = "relay"
	}
	if c.Consumer == "" {
		c.Consumer = defaultConsumer()
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.ClaimMinIdle <= 0 {
		c.ClaimMinIdle = 30 * time.Second
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.Backoff <= 0 {
		c.Backoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = max(5*time.Second, c.Backoff)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func defaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "relay"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Relay moves reservations from the outboxes to the broker. Start it once;
// Stop drains it.
type Relay struct {
	outbox Outbox
	broker seckill.Broker
	cfg    Config

	// beforeAck, if set, runs between a confirmed Publish and its
	// AckOutbox; tests use it to kill the relay at the worst moment.
	beforeAck func()

	// worker runs the loop; its Stopping channel tells the loop to exit
	// once every outbox is empty.
	worker  startstop.Worker
	drained bool // set by the loop before it returns

	// sales is the loop's own state, touched by its goroutine only.
	sales map[string]*saleState
	// listed, batch and seen are scratch space of the loop, reused on
	// every pass so that polling empty outboxes allocates nothing.
	listed map[string]bool
	batch  []seckill.OutboxEntry
	seen   map[string]bool
}

// saleState is what the relay remembers of one sale between passes.
type saleState struct {
	// ownPending is set when entries given to this consumer may still be
	// pending (a failed Publish or Ack, or a start under a reused name):
	// the next pass publishes them again first.
	ownPending bool
	failures   int
	retryAt    time.Time // no work on the sale before this, after a failure
	lastClaim  time.Time
	lastForget time.Time
	// unregistered is set when ForgetOutbox failed halfway: the sale may be
	// missing from the registry, so the relay keeps visiting it.
	unregistered bool
	// perEntry is the reservations per outbox entry of the sale's last
	// read (at least 1): how many entries a read asks for.
	perEntry int
}

// entriesFor is how many outbox entries to read for want reservations.
func (st *saleState) entriesFor(want int) int {
	return max(1, (want+st.perEntry-1)/st.perEntry)
}

// observe notes the reservations per entry of a read.
func (st *saleState) observe(es []seckill.OutboxEntry) {
	if entries := countEntries(es); entries > 0 {
		st.perEntry = max(1, (len(es)+entries-1)/entries)
	}
}

// fitEntries is how many of es, whose entries' reservations come
// together, make whole entries of at most size reservations in all, or
// the first entry when that alone holds more.
func fitEntries(es []seckill.OutboxEntry, size int) int {
	end := 0
	for i := 1; i <= len(es); i++ {
		if i < len(es) && es[i].StreamID == es[i-1].StreamID {
			continue // inside an entry
		}
		if i > size && end > 0 {
			break
		}
		end = i
	}
	return end
}

// countEntries is the number of outbox entries es holds: the reservations
// of one entry come together.
func countEntries(es []seckill.OutboxEntry) int {
	n := 0
	for i := range es {
		if i == 0 || es[i].StreamID != es[i-1].StreamID {
			n++
		}
	}
	return n
}

// New returns a Relay that reads outbox and publishes to broker.
func New(outbox Outbox, broker seckill.Broker, cfg Config) *Relay {
	return &Relay{
		outbox: outbox,
		broker: broker,
		cfg:    cfg.withDefaults(),
		sales:  map[string]*saleState{},
		listed: map[string]bool{},
		seen:   map[string]bool{},
	}
}

// Consumer returns the relay's consumer name within its group.
func (r *Relay) Consumer() string { return r.cfg.Consumer }

// Start runs the relay in the background until Stop, or until ctx ends
// (which abandons whatever is in hand: a batch published but not yet
// acknowledged is published again by whoever reclaims it). Calls after the
// first do nothing.
func (r *Relay) Start(ctx context.Context) {
	r.worker.Start(ctx, r.run)
}

// Stop drains the relay: it finishes the batch in hand and goes on relaying
// until every registered outbox is empty, then returns nil. When ctx ends
// first, the relay is abandoned (its unacknowledged entries are reclaimed
// by another relay later) and Stop returns an error. Safe to call twice,
// and without Start.
func (r *Relay) Stop(ctx context.Context) error {
	err := r.worker.Drain(ctx) // the loop has returned, drained or not
	switch {
	case !r.worker.Started() || r.drained:
		return nil
	case err != nil:
		return fmt.Errorf("relay: stop: outboxes not drained: %w", err)
	default:
		return errors.New("relay: stop: the start context ended before the outboxes were drained")
	}
}

func (r *Relay) run(ctx context.Context) {
	stopping := r.worker.Stopping()
	log := r.cfg.Logger.With("consumer", r.cfg.Consumer, "group", r.cfg.Group)
	log.Info("relay started")
	idle := false
	// One timer for the life of the loop: an idle relay polls without
	// allocating one per wait.
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		draining := startstop.Closed(stopping)
		started := time.Now()
		var appended uint64
		if r.cfg.Appended != nil {
			appended = r.cfg.Appended()
		}
		var mark uint64
		if r.cfg.Progress != nil {
			mark = r.cfg.Progress.Mark()
		}
		found, full, wait, settled := r.pass(ctx, log, idle && !draining)
		if settled && r.cfg.Progress != nil {
			r.cfg.Progress.Stored(mark)
		}
		if ctx.Err() != nil {
			log.Warn("relay abandoned before its outboxes were drained", "err", ctx.Err())
			return
		}
		if found > 0 {
			idle = false
			if d := r.cfg.Linger - time.Since(started); d > 0 && !full && !draining {
				r.linger(ctx, t, d, stopping, appended)
			}
			continue
		}
		idle = true
		if draining && r.empty(ctx, log) {
			r.drained = true
			log.Info("relay stopped; outboxes drained")
			return
		}
		wake := stopping
		if draining {
			wake = nil
		}
		t.Reset(min(wait, r.cfg.PollInterval))
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-wake:
		case <-r.cfg.Wake:
		}
		t.Stop()
	}
}

// linger waits d on t, or less: until ctx ends, the relay stops, or this
// process has appended a full batch since the pass began, when it had
// appended appended (Config.Appended).
func (r *Relay) linger(ctx context.Context, t *time.Timer, d time.Duration, stopping <-chan struct{}, appended uint64) {
	t.Reset(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-stopping:
			return
		case <-r.cfg.Wake:
			if r.cfg.Appended != nil && r.cfg.Appended()-appended >= uint64(r.cfg.BatchSize) {
				return
			}
		}
	}
}

// pass visits every sale once, relaying at most one batch of each, so a
// busy sale cannot starve the others. It returns the number of
// reservations published, whether a sale's batch was full, when nothing
// was published how long until a sale waiting out a failure may be tried
// again, and whether every entry the outboxes held when it started is
// published (settled).
func (r *Relay) pass(ctx context.Context, log *slog.Logger, block bool) (found int, full bool, wait time.Duration, settled bool) {
	wait = r.cfg.PollInterval
	sales, err := r.outbox.OutboxSales(ctx)
	settled = err == nil
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("relay: list outboxes failed; using the last list", "err", err)
		}
		sales = nil
		for id := range r.sales {
			sales = append(sales, id)
		}
		slices.Sort(sales)
	}
	listed := r.listed
	clear(listed)
	for _, id := range sales {
		listed[id] = true
	}
	for id, st := range r.sales {
		if st.unregistered && !listed[id] {
			sales = append(sales, id)
		} else if !listed[id] && err == nil {
			delete(r.sales, id) // forgotten by another relay: its outbox was empty
		}
	}
	now := time.Now()
	for _, id := range sales {
		if ctx.Err() != nil {
			return found, full, wait, false
		}
		st := r.sales[id]
		if st == nil {
			// Entries of an earlier life under this consumer name may be
			// pending: look for them first. Stale entries of dead relays
			// are claimed on this first visit too.
			st = &saleState{ownPending: true, lastForget: now, perEntry: 1}
			r.sales[id] = st
		}
		if d := st.retryAt.Sub(now); d > 0 {
			wait = min(wait, d)
			settled = false
			continue
		}
		n, filled, done, err := r.relaySale(ctx, log, id, st, block && found == 0)
		found += n
		full = full || filled
		settled = settled && done && err == nil
		if err != nil {
			if ctx.Err() != nil {
				return found, full, wait, false
			}
			st.failures++
			pause := r.backoff(st.failures)
			st.retryAt = time.Now().Add(pause)
			wait = min(wait, pause)
			log.Warn("relay: sale outbox not relayed; retrying later", "sale", id, "attempt", st.failures, "retry_in", pause, "err", err)
			continue
		}
		st.failures = 0
	}
	return found, full, wait, settled
}

func (r *Relay) backoff(failures int) time.Duration {
	d := r.cfg.Backoff
	for i := 1; i < failures && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.cfg.MaxBackoff)
}

// relaySale publishes one batch of a sale's outbox: its own pending
// entries first (a batch whose Publish or Ack failed, or entries read
// beyond the last batch), then stale entries of dead relays, then new
// ones. It acks only after Publish returned nil. full reports a batch that
// took what it could hold: more may be waiting; settled, that every entry
// the outbox held before the call is published.
func (r *Relay) relaySale(ctx context.Context, log *slog.Logger, sale string, st *saleState, block bool) (n int, full, settled bool, err error) {
	size := r.cfg.BatchSize
	b := outboxBatch{r: r, st: st, entries: r.batch[:0]}
	defer b.release()
	left, err := r.readBatch(ctx, log, sale, st, &b, block)
	if err != nil {
		return 0, false, false, err
	}
	if len(b.entries) == 0 {
		st.ownPending = false
		return 0, false, true, r.maybeForget(ctx, log, sale, st)
	}
	// From here on the entries are pending for this consumer: any failure
	// leaves them to the next pass.
	st.ownPending = true
	// Whole entries, up to size reservations (an entry larger than size
	// alone): the entries read beyond them stay pending for this consumer,
	// which publishes them first on its next pass.
	whole := fitEntries(b.entries, size)
	ownDone := left.ownDone && whole == len(b.entries)
	full = whole < len(b.entries) || whole >= size || left.readAll
	pub := b.entries[:whole]
	if err := r.publishAndAck(ctx, log, sale, pub); err != nil {
		return 0, false, false, err
	}
	st.ownPending = !ownDone
	return len(pub), full, ownDone && !left.unread && !left.staleLeft, nil
}

// outboxBatch is one pass's batch, built in the relay's scratch slice: an
// empty outbox, the common case between bursts, costs no allocation.
type outboxBatch struct {
	r       *Relay
	st      *saleState
	entries []seckill.OutboxEntry
	reads   int
}

// add appends a read's entries. Entries are deduplicated only when more
// than one read contributed, by stream id: a read returns each entry's
// reservations together, so those of an entry an earlier read gave are
// all left out.
func (b *outboxBatch) add(es []seckill.OutboxEntry) {
	if len(es) == 0 {
		return
	}
	b.st.observe(es)
	if b.reads++; b.reads == 1 {
		b.entries = append(b.entries, es...)
		return
	}
	seen := b.r.seen
	if len(seen) == 0 {
		for _, e := range b.entries {
			seen[e.StreamID] = true
		}
	}
	from := len(b.entries)
	for _, e := range es {
		if !seen[e.StreamID] {
			b.entries = append(b.entries, e)
		}
	}
	for _, e := range b.entries[from:] {
		seen[e.StreamID] = true
	}
}

// release hands the scratch space back, dropping references to the entries.
func (b *outboxBatch) release() {
	clear(b.entries)
	b.r.batch = b.entries[:0]
	clear(b.r.seen)
}

// outboxLeft says what a pass's reads may have left in the outbox.
type outboxLeft struct {
	ownDone   bool // this consumer's pending entries were all read
	staleLeft bool // more entries of dead relays may be stale
	readAll   bool // the read of new entries got all it asked for: more may wait
	unread    bool // new entries may be left unread (not read, or readAll)
}

// readBatch fills b from the three sources in order, each only while the
// batch has room: this consumer's pending entries, stale ones, new ones.
func (r *Relay) readBatch(ctx context.Context, log *slog.Logger, sale string, st *saleState, b *outboxBatch, block bool) (outboxLeft, error) {
	size := r.cfg.BatchSize
	left := outboxLeft{ownDone: !st.ownPending, unread: true}
	if st.ownPending {
		count := st.entriesFor(size)
		es, err := r.outbox.ReadPendingOutbox(ctx, sale, r.cfg.Group, r.cfg.Consumer, count)
		if err != nil {
			return left, err
		}
		b.add(es)
		left.ownDone = countEntries(es) < count
	}
	if now := time.Now(); len(b.entries) < size && now.Sub(st.lastClaim) >= r.cfg.ClaimMinIdle/2 {
		stale, err := r.claimStale(ctx, log, sale, st, b, now)
		if err != nil {
			return left, err
		}
		left.staleLeft = stale
	}
	if len(b.entries) < size {
		var wait time.Duration
		if block && len(b.entries) == 0 {
			wait = r.cfg.Block
		}
		count := st.entriesFor(size - len(b.entries))
		es, err := r.outbox.ReadOutbox(ctx, sale, r.cfg.Group, r.cfg.Consumer, count, wait)
		if err != nil {
			return left, err
		}
		b.add(es)
		left.readAll = countEntries(es) == count
		left.unread = left.readAll
	}
	return left, nil
}

// claimStale adds to b the entries dead relays left unacknowledged, and
// reports whether more may be stale (claim again next pass).
func (r *Relay) claimStale(ctx context.Context, log *slog.Logger, sale string, st *saleState, b *outboxBatch, now time.Time) (more bool, err error) {
	want := st.entriesFor(r.cfg.BatchSize - len(b.entries))
	es, err := r.outbox.ClaimStaleOutbox(ctx, sale, r.cfg.Group, r.cfg.Consumer, r.cfg.ClaimMinIdle, want)
	if err != nil {
		return false, err
	}
	if len(es) > 0 {
		log.Warn("relay: reclaimed entries a relay left unacknowledged; publishing them again",
			"sale", sale, "entries", countEntries(es), "reservations", len(es))
		if r.cfg.OnReclaimed != nil {
			r.cfg.OnReclaimed(sale, len(es))
		}
	}
	b.add(es)
	if countEntries(es) < want {
		st.lastClaim = now
		return false, nil
	}
	return true, nil
}

// publishAndAck publishes pub and, once the broker confirmed it, acks its
// entries in the outbox. A failure leaves them pending for the next pass.
func (r *Relay) publishAndAck(ctx context.Context, log *slog.Logger, sale string, pub []seckill.OutboxEntry) error {
	msgs := make([]seckill.Message, len(pub))
	ids := make([]string, 0, countEntries(pub))
	for i, e := range pub {
		msgs[i] = r.message(log, sale, e)
		if i == 0 || e.StreamID != pub[i-1].StreamID {
			ids = append(ids, e.StreamID)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	err := r.broker.Publish(pctx, msgs)
	cancel()
	if err != nil {
		return fmt.Errorf("publish %d reservations: %w", len(msgs), err)
	}
	if r.cfg.OnPublished != nil {
		r.cfg.OnPublished(len(msgs))
	}
	if r.beforeAck != nil {
		r.beforeAck()
	}
	if err := ctx.Err(); err != nil {
		return err // abandoned: whoever reclaims the batch publishes it again
	}
	if err := r.outbox.AckOutbox(ctx, sale, r.cfg.Group, ids); err != nil {
		return fmt.Errorf("ack %d published reservations (they will be published again): %w", len(ids), err)
	}
	return nil
}

// maybeForget asks, now and then, to drop an idle sale from the registry;
// the store refuses while the sale can still take reservations.
func (r *Relay) maybeForget(ctx context.Context, log *slog.Logger, sale string, st *saleState) error {
	now := time.Now()
	if !st.unregistered && now.Sub(st.lastForget) < r.cfg.ClaimMinIdle {
		return nil
	}
	st.lastForget = now
	forgotten, err := r.outbox.ForgetOutbox(ctx, sale)
	if err != nil {
		st.unregistered = true
		return fmt.Errorf("forget outbox: %w", err)
	}
	st.unregistered = false
	if forgotten {
		delete(r.sales, sale)
		log.Info("relay: sale over and its outbox empty; no longer read", "sale", sale)
	}
	return nil
}

// rawEntry is the body published for an outbox entry that could not be
// decoded. It is deliberately not a valid ReservationEvent (no top-level
// reservation_id), so the order writer rejects it, retries it and records
// it in failed_orders, body included, with an alert: an operator resolves
// it instead of the entry being dropped or blocking the outbox.
type rawEntry struct {
	SaleID    string            `json:"sale_id"`
	OutboxID  string            `json:"outbox_id"`
	Malformed string            `json:"malformed"`
	Fields    map[string]string `json:"fields"`
}

func (r *Relay) message(log *slog.Logger, sale string, e seckill.OutboxEntry) seckill.Message {
	if e.Err == nil && r.cfg.CompactEvents {
		return brokerpack.CompactEvent(e.Event)
	}
	if e.Err == nil {
		m, err := brokerpack.EventMessage(e.Event)
		if err == nil {
			return m
		}
		e.Err = err
	}
	// The message id is the reservation's id when the entry names a valid
	// one, so the failed order is filed under the id the buyer holds;
	// otherwise an id derived from the stream id and the reservation's
	// place in its entry, stable across retries.
	id := sale + ":outbox:" + e.StreamID
	if e.Seq > 0 {
		id += ":" + strconv.Itoa(e.Seq)
	}
	if rid := e.Fields["reservation_id"]; rid != "" {
		if s, ok := seckill.SaleIDOfReservation(rid); ok && s == sale {
			id = rid
		}
	}
	body, _ := json.Marshal(rawEntry{SaleID: sale, OutboxID: e.StreamID, Malformed: e.Err.Error(), Fields: e.Fields})
	log.Error("ALERT malformed outbox entry: publishing it raw for the order writer to record as a failed order",
		"sale", sale, "outbox_id", e.StreamID, "message_id", id, "err", e.Err)
	return seckill.Message{ID: id, Body: body}
}

// empty reports whether every registered outbox is empty, entries pending
// for other relays included.
func (r *Relay) empty(ctx context.Context, log *slog.Logger) bool {
	sales, err := r.outbox.OutboxSales(ctx)
	if err != nil {
		log.Warn("relay: drain: list outboxes failed", "err", err)
		return false
	}
	for id, st := range r.sales {
		if st.unregistered {
			sales = append(sales, id)
		}
	}
	for _, id := range sales {
		n, err := r.outbox.OutboxLen(ctx, id)
		if err != nil {
			log.Warn("relay: drain: outbox length failed", "sale", id, "err", err)
			return false
		}
		if n > 0 {
			return false
		}
	}
	return true
}
