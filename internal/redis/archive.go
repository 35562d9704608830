package redis

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// An ended sale's keys, and what freeing them takes (internal/archive
// decides when): the idempotency hash goes as soon as the window has
// closed; the rest once the database holds every reservation and nothing
// can change them any more, leaving one small key with a summary, so the
// sale reads as archived rather than never loaded.
//
// Sales with keys are listed in <prefix>:sales (registered by Preheat,
// removed by ArchiveSale), so a restarted node still finds the ended
// sales whose keys are left.

// Archive frees an ended sale's keys (internal/archive's Stock) and
// measures what they take.
type Archive struct{ *conn }

// Archive returns the store's archive.
func (s *Store) Archive() Archive { return Archive{s.conn} }

// Archiving twice changes nothing, so a lost reply may be retried.
var archiveScript = rueidis.NewLuaScriptRetryable(lua("archive.lua"))

func (s *conn) salesRegistryKey() string { return s.prefix + ":sales" }

func (s *conn) archivedKey(saleID string) string { return s.prefix + ":{" + saleID + "}:archived" }

// KeptSales lists the sales that have keys in Redis: preheated and not
// archived yet.
func (s Archive) KeptSales(ctx context.Context) ([]string, error) {
	ids, err := s.client.Do(ctx, s.client.B().Smembers().Key(s.salesRegistryKey()).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("kept sales: %w", classify(err))
	}
	return ids, nil
}

func (s *conn) keep(ctx context.Context, saleID string) error {
	if err := s.client.Do(ctx, s.client.B().Sadd().Key(s.salesRegistryKey()).Member(saleID).Build()).Error(); err != nil {
		return fmt.Errorf("register sale: %w", classify(err))
	}
	return nil
}

// tags returns the key sets of a sale: one, or one per bucket.
func (s *conn) tags(ctx context.Context, saleID string) ([]string, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, seckill.Errorf(seckill.EINVALID, "invalid sale id")
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return nil, err
	}
	return bs.tags, nil
}

// DropIdempotency deletes a sale's idempotency hash (every bucket's) if
// its window has closed by Redis TIME; dropped is false when it has not
// (nothing changes) or the sale is not loaded.
func (s Archive) DropIdempotency(ctx context.Context, saleID string) (dropped bool, err error) {
	tags, err := s.tags(ctx, saleID)
	if err != nil {
		return false, fmt.Errorf("drop idempotency of %s: %w", saleID, err)
	}
	for _, tag := range tags {
		code, err := s.archive(ctx, tag, "idem", "0", "", seckill.ArchiveRecorded{})
		if err != nil {
			return false, fmt.Errorf("drop idempotency of %s: %w", saleID, err)
		}
		if code == 0 {
			return false, nil
		}
		dropped = dropped || code == 1
	}
	return dropped, nil
}

// ReservationCount is the number of reservation records of a sale (HLEN
// of its res hash, of every bucket's).
func (s Archive) ReservationCount(ctx context.Context, saleID string) (int64, error) {
	tags, err := s.tags(ctx, saleID)
	if err != nil {
		return 0, fmt.Errorf("reservation count: %w", err)
	}
	n, err := s.sumOver(ctx, tags, func(keys []string) rueidis.Completed { return s.client.B().Hlen().Key(keys[keyRes]).Build() })
	if err != nil {
		return 0, fmt.Errorf("reservation count: %w", err)
	}
	return n, nil
}

// sumOver adds up one integer reply per key set of tags (a sale's, or
// each of its buckets'); count builds the command for one key set.
func (s *conn) sumOver(ctx context.Context, tags []string, count func(keys []string) rueidis.Completed) (int64, error) {
	var total int64
	for _, tag := range tags {
		n, err := s.client.Do(ctx, count(s.keys(tag))).AsInt64()
		if err != nil {
			return 0, classify(err)
		}
		total += n
	}
	return total, nil
}

// ArchiveSale drops every key of an ended sale and keeps summary under
// its archived key, in one script, if its window has closed, its outbox
// is empty, its res hash holds no more than recorded's reservations and
// its lottery entries and winners no more than recorded's (those the
// database has); otherwise it changes nothing and says why. A
// sale archived (or not loaded) leaves the registry of KeptSales.
//
// archived is true when this call dropped the keys; otherwise whyNot says
// why nothing changed ("not loaded" for a sale archived before, or never
// preheated here).
func (s Archive) ArchiveSale(ctx context.Context, saleID string, recorded seckill.ArchiveRecorded, summary string) (archived bool, whyNot string, err error) {
	tags, err := s.tags(ctx, saleID)
	if err != nil {
		return false, "", fmt.Errorf("archive %s: %w", saleID, err)
	}
	limit := strconv.FormatInt(recorded.Reservations, 10)
	if len(tags) > 1 {
		// The records are spread over the buckets: count them all here
		// (after the end no script adds any), then check every bucket
		// before the first is dropped, bucket 0 last.
		n, err := s.ReservationCount(ctx, saleID)
		if err != nil {
			return false, "", fmt.Errorf("archive %s: %w", saleID, err)
		}
		if n > recorded.Reservations {
			return false, whyNotArchived(-2), nil
		}
		limit = strconv.FormatInt(math.MaxInt64, 10)
		for _, tag := range tags {
			if code, err := s.archive(ctx, tag, "check", limit, "", recorded); err != nil {
				return false, "", fmt.Errorf("archive %s: %w", saleID, err)
			} else if code != 1 && code != 2 {
				return false, whyNotArchived(code), nil
			}
		}
	}
	var code int64
	for i := len(tags) - 1; i >= 0; i-- {
		keep := ""
		if i == 0 {
			keep = summary
		}
		if code, err = s.archive(ctx, tags[i], "all", limit, keep, recorded); err != nil {
			return false, "", fmt.Errorf("archive %s: %w", saleID, err)
		} else if code != 1 && code != 2 {
			return false, whyNotArchived(code), nil
		}
	}
	if err := s.client.Do(ctx, s.client.B().Srem().Key(s.salesRegistryKey()).Member(saleID).Build()).Error(); err != nil {
		return false, "", fmt.Errorf("archive %s: unregister: %w", saleID, classify(err))
	}
	// The relays need not read them any more. One that listed the sale
	// before may read it once more; that makes nothing (outbox_group.lua).
	for _, tag := range tags {
		if _, err := (Outbox{s.conn}).ForgetOutbox(ctx, tag); err != nil {
			return false, "", fmt.Errorf("archive %s: %w", saleID, err)
		}
	}
	s.layouts.m.Delete(saleID)
	if code == 2 {
		return false, "not loaded", nil
	}
	return true, "", nil
}

func whyNotArchived(code int64) string {
	switch code {
	case 0:
		return "the sale's window has not closed by Redis TIME"
	case -1:
		return "its outbox still holds reservations to relay"
	case -2:
		return "Redis holds reservations the database has not recorded yet"
	case -3:
		return "Redis holds lottery entries or winners the database has not copied yet"
	}
	return fmt.Sprintf("unexpected answer %d from the archive script", code)
}

// ArchivedSummary returns the summary ArchiveSale kept for a sale; ok is
// false when the sale is not archived.
func (s Archive) ArchivedSummary(ctx context.Context, saleID string) (summary string, ok bool, err error) {
	if !seckill.ValidSaleID(saleID) {
		return "", false, nil
	}
	summary, err = s.client.Do(ctx, s.client.B().Get().Key(s.archivedKey(saleID)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("archived summary of %s: %w", saleID, classify(err))
	}
	return summary, true, nil
}

// archiveKeyNames name archiveKeys' keys, in order.
var archiveKeyNames = slices.Concat([]string{"stock", "buyers", "idem", "res", "outbox", "archived", "moves", "movesin"}, lotteryKeys, queueKeys)

// archiveKeys are the keys of tag (a sale, or a bucket) archive.lua
// takes, in its order.
func (s *conn) archiveKeys(tag string) []string {
	keys := append(s.keys(tag), s.archivedKey(tag), s.movesKey(tag), s.movesInKey(tag))
	for _, k := range lotteryKeys {
		keys = append(keys, s.prefix+":{"+tag+"}:"+k)
	}
	return append(keys, s.queueKeys(tag)...)
}

// archive runs archive.lua on the key set of tag (a sale, or a bucket).
func (s *conn) archive(ctx context.Context, tag, mode, recorded, summary string, copied seckill.ArchiveRecorded) (int64, error) {
	args := []string{mode, recorded, summary, strconv.FormatInt(copied.Entries, 10), strconv.FormatInt(copied.Winners, 10)}
	code, err := archiveScript.Exec(ctx, s.client, s.archiveKeys(tag), args).AsInt64()
	if err != nil {
		return 0, classify(err)
	}
	return code, nil
}

// Footprint is the Redis memory of one sale's keys, as MEMORY USAGE
// reports it (all nested values sampled), and its reservations.
type Footprint struct {
	Keys         map[string]int64 // key suffix (stock, buyers, idem, res, outbox, archived, moves, movesin, entries…, queue…) -> bytes, every bucket's
	Total        int64
	Reservations int64
}

// BytesPerReservation is Total / Reservations (0 without reservations).
func (f Footprint) BytesPerReservation() float64 {
	if f.Reservations == 0 {
		return 0
	}
	return float64(f.Total) / float64(f.Reservations)
}

// Footprint measures a sale's keys with MEMORY USAGE … SAMPLES 0, which
// walks every element: O(size) on the Redis side, for reports and soak
// tests, not for a hot path.
func (s Archive) Footprint(ctx context.Context, saleID string) (Footprint, error) {
	tags, err := s.tags(ctx, saleID)
	if err != nil {
		return Footprint{}, fmt.Errorf("footprint: %w", err)
	}
	f := Footprint{Keys: map[string]int64{}}
	for _, tag := range tags {
		for i, k := range s.archiveKeys(tag) {
			n, err := s.client.Do(ctx, s.client.B().Arbitrary("MEMORY", "USAGE").Keys(k).Args("SAMPLES", "0").Build()).AsInt64()
			if err != nil && strings.Contains(err.Error(), "syntax") { // the embedded server takes no SAMPLES
				n, err = s.client.Do(ctx, s.client.B().Arbitrary("MEMORY", "USAGE").Keys(k).Build()).AsInt64()
			}
			if rueidis.IsRedisNil(err) {
				continue
			} else if err != nil {
				return Footprint{}, fmt.Errorf("footprint: %w", classify(err))
			}
			f.Keys[archiveKeyNames[i]] += n
			f.Total += n
		}
	}
	if f.Reservations, err = s.ReservationCount(ctx, saleID); err != nil {
		return Footprint{}, fmt.Errorf("footprint: %w", err)
	}
	return f, nil
}

// UsedMemory is the server's used_memory (INFO memory): every key of
// every sale, and whatever else shares the server.
func (s Archive) UsedMemory(ctx context.Context) (int64, error) {
	info, err := s.client.Do(ctx, s.client.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return 0, fmt.Errorf("used memory: %w", classify(err))
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("used memory: no used_memory in INFO memory")
}
