package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// scriptOutcome is what one of reserve.lua's outcome codes means: an
// outcome, or an error that answers the whole batch.
type scriptOutcome struct {
	name    string // its name in outcomes.lua
	outcome seckill.Outcome
	err     error
}

// scriptOutcomes are reserve.lua's outcome codes (outcomes.lua names
// them). They are spelled out here, not taken from the order of seckill's
// constants, so that renumbering the domain can never silently change
// what a script answer means.
var scriptOutcomes = map[int64]scriptOutcome{
	1:  {"RESERVED", seckill.OutcomeReserved, nil},
	3:  {"SOLD_OUT", seckill.OutcomeSoldOut, nil},
	4:  {"LIMIT_EXCEEDED", seckill.OutcomeLimitExceeded, nil},
	5:  {"NOT_STARTED", seckill.OutcomeNotStarted, nil},
	6:  {"ENDED", seckill.OutcomeEnded, nil},
	7:  {"KEY_REUSED", seckill.OutcomeKeyReused, nil},
	8:  {"RATE_LIMITED", seckill.OutcomeRateLimited, nil},
	9:  {"HEALING", 0, ErrHealing},
	10: {"ADMISSION_REQUIRED", seckill.OutcomeAdmissionRequired, nil},
}

// StockStore is the stock store (seckill.StockStore) and the request paths'
// other reads of it: reservations, a buyer's holding, idempotency replays.
type StockStore struct{ *conn }

var _ seckill.StockStore = StockStore{}

// StockStore returns the store's stock store.
func (s *Store) StockStore() StockStore { return StockStore{s.conn} }

// Preheat loads a sale's stock, limit and window unless it is already
// loaded; created reports whether this call loaded it. It never resets a
// loaded sale. Every call (re)registers the sale's outbox for the relay
// (see OutboxSales).
func (s StockStore) Preheat(ctx context.Context, sale *seckill.Sale) (created bool, err error) {
	return s.preheat(ctx, sale, "")
}

// preheat is Preheat; a sale it loads (each of its buckets) gets healing
// as its `healing` flag when that is not "", refusing claims until a heal
// takes it over (Loader).
func (s StockStore) preheat(ctx context.Context, sale *seckill.Sale, healing string) (created bool, err error) {
	if err := sale.Validate(); err != nil {
		return false, fmt.Errorf("preheat: %w", err)
	}
	// Registered first, so that no sale can take a reservation before
	// the relay knows of its outbox; again on every call, so that a failed
	// earlier attempt is repaired.
	if err := s.register(ctx, sale.ID); err != nil {
		return false, fmt.Errorf("preheat: %w", err)
	}
	if err := s.keep(ctx, sale.ID); err != nil { // for the archiver, once it ends
		return false, fmt.Errorf("preheat: %w", err)
	}
	if s.minBuckets > sale.BucketCount() && sale.Admission.FirstCome() {
		cp := *sale
		cp.Buckets = s.minBuckets
		sale = &cp
	}
	k := sale.BucketCount()
	if k > 1 {
		// The other buckets first: bucket 0, loaded last with the bucket
		// count, is what makes the sale live.
		if err := s.preheatBuckets(ctx, sale, healing); err != nil {
			return false, fmt.Errorf("preheat: %w", err)
		}
	}
	n, err := preheatScript.Exec(ctx, s.client, s.keys(sale.ID)[:1], preheatArgs(sale, k, 0, healing)).AsInt64()
	if err != nil {
		return false, fmt.Errorf("preheat: %w", classify(err))
	}
	return n == 1, nil
}

// Reserve decides reqs for one sale in one script call, atomically and in
// order; results[i] answers reqs[i]. The HTTP edge validated every field
// of the requests (internal/httpapi) and minted their ids; Reserve checks
// only the cheap invariants that keep the script's books right whatever
// the caller (see validateBatch): a batch that breaks one, or of over
// MaxBatch requests, is refused whole with an invalid_request error.
func (s StockStore) Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return s.reserve(ctx, saleID, reqs, false)
}

// ReserveAdmitted is Reserve for buyers that the sale's admission let in:
// a lottery's winners, a queue's ticket holders. Reserve refuses every
// request of a sale whose admission is not first come
// (OutcomeAdmissionRequired); ReserveAdmitted decides them as Reserve
// decides a first come sale's.
func (s StockStore) ReserveAdmitted(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return s.reserve(ctx, saleID, reqs, true)
}

func (s *conn) reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest, admitted bool) ([]seckill.ReserveResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := validateBatch(saleID, reqs); err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	if bs.k() > 1 {
		results, err := s.reserveBucketsLimited(ctx, bs, reqs)
		if err != nil {
			return nil, fmt.Errorf("reserve: %w", err)
		}
		s.appended(results)
		return results, nil
	}
	// One script call decides requests that carry the same rate limits
	// (all of them, unless some requests came without an address or a
	// limit changed meanwhile); runs of others go in calls of their own,
	// in order.
	results := make([]seckill.ReserveResult, 0, len(reqs))
	for len(reqs) > 0 {
		n := 1
		for n < len(reqs) && sameLimits(reqs[n].RateChecks, reqs[0].RateChecks) {
			n++
		}
		part, err := s.reserveIn(ctx, saleID, reqs[:n], admitted)
		if err != nil {
			return nil, fmt.Errorf("reserve: %w", err)
		}
		results = append(results, part...)
		reqs = reqs[n:]
	}
	s.appended(results)
	return results, nil
}

// appended tells the WithOnOutboxAppend hook of a Reserve whose results
// claimed units, with the number of new reservations (a replay appends
// nothing, but is rare enough that a spurious wake costs nothing worth a
// finer test).
func (s *conn) appended(results []seckill.ReserveResult) {
	if s.onAppend == nil {
		return
	}
	n, claimed := 0, false
	for _, r := range results {
		claimed = claimed || r.Outcome.Claimed()
		if r.Outcome == seckill.OutcomeReserved {
			n++
		}
	}
	if claimed {
		s.onAppend(n)
	}
}

// reserveBucketsLimited decides the rate checks of a sale split over
// buckets first, one limiter call per check (a request may be tried in
// several buckets, and its count must not depend on which), then reserves
// what they allowed in the buckets.
func (s *conn) reserveBucketsLimited(ctx context.Context, bs *bucketSet, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	results := make([]seckill.ReserveResult, len(reqs))
	var allowed []seckill.ReserveRequest
	var at []int
	for i, r := range reqs {
		limited := false
		for k, c := range r.RateChecks {
			res, err := RateLimiter{s}.Allow(ctx, c.Key, c.Limit)
			if err != nil {
				return nil, err
			}
			if !res.Allowed {
				results[i] = seckill.ReserveResult{Outcome: seckill.OutcomeRateLimited, RateLimitedBy: k, RetryAfter: res.RetryAfter}
				limited = true
				break
			}
		}
		if !limited {
			r.RateChecks = nil
			allowed = append(allowed, r)
			at = append(at, i)
		}
	}
	if len(allowed) == 0 {
		return results, nil
	}
	res, err := s.reserveBuckets(ctx, bs, allowed)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		results[i] = res[j]
	}
	return results, nil
}

// reserveIn runs the reserve script on the key set of tag: a sale, or one
// bucket of a sale; the requests' rate checks, the same limits in the same
// order (sameLimits), are counted in hashes of tag's slot (saleRateBase).
func (s *conn) reserveIn(ctx context.Context, tag string, reqs []seckill.ReserveRequest, admitted bool) ([]seckill.ReserveResult, error) {
	keys := s.keys(tag)
	for _, c := range reqs[0].RateChecks {
		keys = append(keys, s.saleRateBase(tag, c.Limit))
	}
	per := len(reqs[0].RateChecks)
	args := make([]string, 0, 1+(4+per)*len(reqs))
	if admitted {
		args = append(args, strconv.Itoa(per)+"a")
	} else {
		args = append(args, strconv.Itoa(per))
	}
	for _, r := range reqs {
		args = append(args, r.ReservationID, r.UserID, strconv.FormatInt(r.Qty, 10), keyArg(r.IdempotencyKey))
		for _, c := range r.RateChecks {
			args = append(args, c.Key)
		}
	}
	var (
		msg   rueidis.RedisMessage
		acked int64
		err   error
	)
	if s.waitReplicas > 0 {
		msg, acked, err = s.reserveDurable(ctx, keys, args)
	} else {
		msg, err = reserveScript.Exec(ctx, s.client, keys, args).ToMessage()
	}
	if err != nil {
		return nil, classify(err)
	}
	results, err := decodeReserve(msg, reqs)
	if err != nil {
		return nil, err
	}
	if s.waitReplicas > 0 && acked < int64(s.waitReplicas) {
		for _, r := range results {
			if r.Outcome.Claimed() {
				return nil, fmt.Errorf("%d of %d replicas acknowledged the batch: %w", acked, s.waitReplicas, ErrNotDurable)
			}
		}
	}
	return results, nil
}

// saleRateBase names the hashes that count rate limit l within one sale,
// in the sale's slot so that the reserve script can check it in the same
// call: <prefix>:{<sale>}:rl:<interval µs>:<tolerance µs>, and the script
// adds :<generation> (reserve.lua). The limit is in the name for the
// reasons rateKey gives.
func (s *conn) saleRateBase(saleID string, l seckill.RateLimit) string {
	interval := l.Interval().Microseconds()
	return s.prefix + ":{" + saleID + "}:rl:" + strconv.FormatInt(interval, 10) + ":" + strconv.FormatInt(interval*int64(l.Rate), 10)
}

// sameLimits reports whether two requests' checks count alike, check by
// check: the same intervals and tolerances, so the same state.
func sameLimits(a, b []seckill.RateCheck) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		ia, ib := a[k].Limit.Interval().Microseconds(), b[k].Limit.Interval().Microseconds()
		if ia != ib || ia*int64(a[k].Limit.Rate) != ib*int64(b[k].Limit.Rate) {
			return false
		}
	}
	return true
}

// validateBatch checks the invariants the reserve script relies on: a sale
// id safe inside a hash tag (once per batch), reservation ids of that sale
// (their shape only: they were minted for it a moment ago, not parsed from
// outside), a qty the script can count, and user ids, idempotency keys and
// rate checks of bounded size with no byte that would break a key or a
// log line. Each is a length or range test or one loop over a short
// string.
func validateBatch(saleID string, reqs []seckill.ReserveRequest) error {
	if !seckill.ValidSaleID(saleID) {
		return seckill.Errorf(seckill.EINVALID, "invalid sale id")
	}
	if len(reqs) > MaxBatch {
		return seckill.Errorf(seckill.EINVALID, "batch of %d requests is over the limit of %d", len(reqs), MaxBatch)
	}
	for i, r := range reqs {
		switch {
		case !seckill.IsReservationOf(r.ReservationID, saleID):
			return seckill.Errorf(seckill.EINVALID, "request %d: reservation id %q is not an id of sale %q", i, r.ReservationID, saleID)
		case !seckill.ValidUserID(r.UserID):
			return seckill.Errorf(seckill.EINVALID, "request %d: invalid user id", i)
		case r.Qty < 1 || r.Qty > seckill.MaxPurchaseLimit:
			return seckill.Errorf(seckill.EINVALID, "request %d: qty must be between 1 and %d", i, seckill.MaxPurchaseLimit)
		case r.IdempotencyKey != "" && !seckill.ValidIdempotencyKey(r.IdempotencyKey):
			return seckill.Errorf(seckill.EINVALID, "request %d: invalid idempotency key", i)
		case len(r.RateChecks) > seckill.MaxRateChecks:
			return seckill.Errorf(seckill.EINVALID, "request %d: %d rate checks, at most %d", i, len(r.RateChecks), seckill.MaxRateChecks)
		}
		for _, c := range r.RateChecks {
			if c.Key == "" || len(c.Key) > MaxRateKeyBytes {
				return seckill.Errorf(seckill.EINVALID, "request %d: rate limit key must be 1 to %d bytes", i, MaxRateKeyBytes)
			}
			if err := c.Limit.Validate(); err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
		}
	}
	return nil
}

// decodeReserve turns reserve.lua's answer (see its header) into results.
func decodeReserve(msg rueidis.RedisMessage, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	results := make([]seckill.ReserveResult, len(reqs))
	if msg.IsInt64() {
		code, _ := msg.AsInt64()
		so, ok := scriptOutcomes[code]
		if ok && so.err != nil {
			return nil, so.err
		}
		if !ok || so.outcome.Claimed() {
			return nil, fmt.Errorf("unexpected batch answer %d from reserve script", code)
		}
		for i := range results {
			results[i].Outcome = so.outcome
		}
		return results, nil
	}
	answers, err := msg.ToArray()
	if err != nil {
		return nil, fmt.Errorf("unexpected answer from reserve script: %w", err)
	}
	if len(answers) != len(reqs) {
		return nil, fmt.Errorf("reserve script answered %d requests of %d", len(answers), len(reqs))
	}
	for i, a := range answers {
		if a.IsString() {
			id, _ := a.ToString()
			results[i] = seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: id, Qty: reqs[i].Qty}
			continue
		}
		// Only a refusal is an array: asking every answer for one would
		// have rueidis format a "not an array" error per claim
		// (fmt.Errorf: 4% of BenchmarkReservePath's allocations).
		if a.IsArray() {
			refusal, err := a.AsIntSlice()
			if err != nil {
				return nil, fmt.Errorf("unexpected answer %d from reserve script: %w", i, err)
			}
			if len(refusal) != 3 || scriptOutcomes[refusal[0]].outcome != seckill.OutcomeRateLimited || refusal[1] < 0 || refusal[1] >= int64(len(reqs[i].RateChecks)) || refusal[2] < 0 {
				return nil, fmt.Errorf("unexpected rate-limit answer %v from reserve script", refusal)
			}
			results[i] = seckill.ReserveResult{Outcome: seckill.OutcomeRateLimited, RateLimitedBy: int(refusal[1]),
				RetryAfter: time.Duration(refusal[2]) * time.Microsecond}
			continue
		}
		code, err := a.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("unexpected answer %d from reserve script: %w", i, err)
		}
		so, ok := scriptOutcomes[code]
		if !ok || so.err != nil {
			return nil, fmt.Errorf("unknown outcome code %d from reserve script", code)
		}
		o := so.outcome
		results[i].Outcome = o
		if o == seckill.OutcomeReserved {
			results[i].ReservationID = reqs[i].ReservationID
			results[i].Qty = reqs[i].Qty
		}
	}
	return results, nil
}

// Stock returns the live stock of a sale; seckill.ErrNotFound when the sale
// is not preheated.
func (s StockStore) Stock(ctx context.Context, saleID string) (seckill.StockLevel, error) {
	if !seckill.ValidSaleID(saleID) {
		return seckill.StockLevel{}, fmt.Errorf("stock: sale %q: %w", saleID, seckill.ErrNotFound)
	}
	if bs, err := s.buckets(ctx, saleID); err != nil {
		return seckill.StockLevel{}, fmt.Errorf("stock: %w", err)
	} else if bs.k() > 1 {
		return s.bucketsStock(ctx, bs)
	}
	vals, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(saleID)[keyStock]).Field("total", "reserved", "heals").Build()).ToArray()
	if err != nil {
		return seckill.StockLevel{}, fmt.Errorf("stock: %w", classify(err))
	}
	if len(vals) != 3 || vals[0].IsNil() {
		return seckill.StockLevel{}, fmt.Errorf("stock: sale %q: %w", saleID, seckill.ErrNotFound)
	}
	var level seckill.StockLevel
	if level.Total, err = vals[0].AsInt64(); err == nil {
		level.Reserved, err = vals[1].AsInt64()
	}
	if err == nil && !vals[2].IsNil() { // written by the first heal
		level.Heals, err = vals[2].AsInt64()
	}
	if err != nil {
		return seckill.StockLevel{}, fmt.Errorf("stock: sale %q: malformed stock hash: %w", saleID, err)
	}
	return level, nil
}

// Reservation returns the record of one reservation as the reserve script
// wrote it (status is StatusActive until a later script changes it);
// seckill.ErrNotFound when there is none.
func (s StockStore) Reservation(ctx context.Context, reservationID string) (userID string, qty int64, status string, err error) {
	saleID, ok := seckill.SaleIDOfReservation(reservationID)
	if !ok {
		return "", 0, "", fmt.Errorf("reservation %q: %w", reservationID, seckill.ErrNotFound)
	}
	tag, err := s.bucketOf(ctx, saleID, reservationID)
	if err != nil {
		return "", 0, "", fmt.Errorf("reservation: %w", err)
	}
	vals, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(tag)[keyRes]).Field(recordFields(reservationID)...).Build()).ToArray()
	if err != nil {
		return "", 0, "", fmt.Errorf("reservation: %w", classify(err))
	}
	for _, v := range vals {
		rec, err := v.ToString()
		if err != nil {
			continue // nil: not under this field
		}
		r, err := parseRecord(reservationID, rec)
		if err != nil {
			return "", 0, "", err
		}
		status = StatusActive
		if r.Restored {
			status = StatusRestored
		}
		return r.UserID, r.Qty, status, nil
	}
	return "", 0, "", fmt.Errorf("reservation %q: %w", reservationID, seckill.ErrNotFound)
}

// Held is how many units the store counts user as holding on a sale (the
// count its per-user limit checks), from the buyer's home bucket on a
// bucketed sale; 0 for a buyer or sale it does not know.
func (s StockStore) Held(ctx context.Context, saleID, userID string) (int64, error) {
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return 0, err
	}
	key := s.keys(bs.tags[bs.home(userID)])[keyBuyers]
	n, err := s.client.Do(ctx, s.client.B().Hget().Key(key).Field(userID).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("held by a buyer of sale %s: %w", saleID, classify(err))
	}
	return n, nil
}
