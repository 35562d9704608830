package loadgen

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The histogram's buckets are HDR style: values below 2^(subBits+1) ns
// have a bucket each; above, every power of two is split into 2^subBits
// equal buckets, so a bucket is never wider than 1/2^subBits of the values
// in it. With subBits = 7 a percentile is within 0.79% of the true value,
// from nanoseconds up to maxBits.
const (
	subBits  = 7
	subCount = 1 << subBits
	// maxBits bounds the values kept apart: 2^44 ns is about 4.9 hours;
	// anything longer lands in the last bucket.
	maxBits    = 44
	maxShift   = maxBits - (subBits + 1)
	numBuckets = maxShift*subCount + 2*subCount
	maxValue   = uint64(1)<<maxBits - 1
)

// Precision is the largest relative error of a percentile: a bucket is
// never wider than this fraction of the smallest value it holds.
const Precision = 1.0 / subCount

// Histogram counts durations in log-linear buckets. It is safe for
// concurrent use: recording is a few atomic adds, so many goroutines can
// share one without a lock (the runner still gives its workers a few
// shards, to keep them off each other's cache lines). The zero value is
// not usable; call NewHistogram.
type Histogram struct {
	counts []atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
	min    atomic.Uint64 // nanoseconds + 1; 0 while empty
	max    atomic.Uint64 // nanoseconds
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]atomic.Uint64, numBuckets)}
}

func bucketOf(v uint64) int {
	if v > maxValue {
		v = maxValue
	}
	if v < 2*subCount {
		return int(v)
	}
	shift := bits.Len64(v) - (subBits + 1)
	return shift*subCount + int(v>>shift)
}

// bucketRange returns the smallest value of bucket i and its width.
func bucketRange(i int) (low, width uint64) {
	if i < 2*subCount {
		return uint64(i), 1
	}
	shift := i/subCount - 1
	m := uint64(i - shift*subCount)
	return m << shift, 1 << shift
}

// Record counts one duration. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	for {
		cur := h.max.Load()
		if v <= cur || h.max.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur := h.min.Load()
		if (cur != 0 && v+1 >= cur) || h.min.CompareAndSwap(cur, v+1) {
			break
		}
	}
}

// Merge adds every count of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if n := o.counts[i].Load(); n > 0 {
			h.counts[i].Add(n)
		}
	}
	h.total.Add(o.total.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > 0 {
		for {
			cur := h.max.Load()
			if m <= cur || h.max.CompareAndSwap(cur, m) {
				break
			}
		}
	}
	if m := o.min.Load(); m > 0 {
		for {
			cur := h.min.Load()
			if (cur != 0 && m >= cur) || h.min.CompareAndSwap(cur, m) {
				break
			}
		}
	}
}

// Count is the number of durations recorded.
func (h *Histogram) Count() int64 { return int64(h.total.Load()) }

// Min is the smallest duration recorded, exactly; 0 when empty.
func (h *Histogram) Min() time.Duration {
	if m := h.min.Load(); m > 0 {
		return time.Duration(m - 1)
	}
	return 0
}

// Max is the largest duration recorded, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Mean is the exact mean of the durations recorded; 0 when empty.
func (h *Histogram) Mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Percentile returns the duration below or at which a fraction q (0 to 1)
// of the recorded durations fall: the highest value of the bucket that
// holds the ceil(q·n)-th smallest, but never above Max. It is never below
// the true percentile and above it by at most Precision of it. 0 when
// empty.
func (h *Histogram) Percentile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := max(uint64(math.Ceil(q*float64(n))), 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			if i == numBuckets-1 { // open-ended: values past the range
				return h.Max()
			}
			low, width := bucketRange(i)
			return min(time.Duration(low+width-1), h.Max())
		}
	}
	return h.Max()
}

// Summary is a histogram's usual figures, for reports.
type Summary struct {
	Count int64         `json:"count"`
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summary returns the count, min, mean, p50, p90, p99, p99.9 and max.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count: h.Count(), Min: h.Min(), Mean: h.Mean(),
		P50: h.Percentile(0.50), P90: h.Percentile(0.90), P99: h.Percentile(0.99), P999: h.Percentile(0.999),
		Max: h.Max(),
	}
}
