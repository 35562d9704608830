package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// exactPercentile is the ceil(q·n)-th smallest of sorted values.
func exactPercentile(sorted []time.Duration, q float64) time.Duration {
	rank := int(q*float64(len(sorted)) + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestHistogramPercentilesWithinPrecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		name string
		gen  func() time.Duration
	}{
		{"uniform 0-1ms", func() time.Duration { return time.Duration(rng.Int64N(int64(time.Millisecond))) }},
		{"exponential 5ms", func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond)) }},
		{"log-uniform 1µs-10s", func() time.Duration {
			return time.Duration(float64(time.Microsecond) * math.Pow(10, rng.Float64()*7))
		}},
		{"tiny exact values", func() time.Duration { return time.Duration(rng.IntN(200)) }},
		{"bimodal", func() time.Duration {
			if rng.IntN(100) == 0 {
				return 2*time.Second + time.Duration(rng.Int64N(int64(time.Second)))
			}
			return 300*time.Microsecond + time.Duration(rng.Int64N(int64(100*time.Microsecond)))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram()
			values := make([]time.Duration, 100_000)
			for i := range values {
				values[i] = tt.gen()
				h.Record(values[i])
			}
			slices.Sort(values)
			if h.Count() != int64(len(values)) || h.Min() != values[0] || h.Max() != values[len(values)-1] {
				t.Fatalf("count %d min %v max %v; want %d %v %v", h.Count(), h.Min(), h.Max(), len(values), values[0], values[len(values)-1])
			}
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
				want := exactPercentile(values, q)
				got := h.Percentile(q)
				// Never below the truth, above it by at most one bucket.
				if got < want || float64(got-want) > Precision*float64(want) {
					t.Errorf("p%v = %v, exact %v: outside [exact, exact·(1+%.4f)]", q*100, got, want, Precision)
				}
			}
		})
	}
}

func TestHistogramBucketsAreContiguous(t *testing.T) {
	next := uint64(0)
	for i := range numBuckets {
		low, width := bucketRange(i)
		if low != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, low, next)
		}
		if bucketOf(low) != i || bucketOf(low+width-1) != i {
			t.Fatalf("bucket %d [%d, %d] maps to %d..%d", i, low, low+width-1, bucketOf(low), bucketOf(low+width-1))
		}
		if i >= 2*subCount && float64(width) > Precision*float64(low) {
			t.Fatalf("bucket %d is %d wide at %d: over the precision", i, width, low)
		}
		next = low + width
	}
	if next != maxValue+1 {
		t.Fatalf("buckets end at %d, want %d", next, maxValue+1)
	}
	if bucketOf(1<<62) != numBuckets-1 {
		t.Fatal("a huge value does not land in the last bucket")
	}
}

func TestHistogramEmptyAndEdges(t *testing.T) {
	h := NewHistogram()
	if h.Percentile(0.99) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram reports non-zero figures")
	}
	h.Record(-time.Second)
	h.Record(0)
	h.Record(3 * time.Hour)
	h.Record(100 * time.Hour) // beyond the range: counted, max exact
	if h.Count() != 4 || h.Min() != 0 || h.Max() != 100*time.Hour {
		t.Fatalf("count %d min %v max %v", h.Count(), h.Min(), h.Max())
	}
	if got := h.Percentile(0.5); got != 0 {
		t.Errorf("p50 = %v, want 0", got)
	}
	if got := h.Percentile(1); got != 100*time.Hour {
		t.Errorf("p100 = %v, want the exact max", got)
	}
}

func TestHistogramMergeAndConcurrency(t *testing.T) {
	all := NewHistogram()
	parts := make([]*Histogram, 4)
	var wg sync.WaitGroup
	for p := range parts {
		parts[p] = NewHistogram()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10_000 {
				d := time.Duration(p*10_000+i) * time.Microsecond
				parts[p].Record(d)
				all.Record(d)
			}
		}()
	}
	wg.Wait()
	merged := NewHistogram()
	for _, p := range parts {
		merged.Merge(p)
	}
	if merged.Summary() != all.Summary() {
		t.Fatalf("merged %+v\nshared %+v", merged.Summary(), all.Summary())
	}
	if merged.Count() != 40_000 || merged.Min() != 0 || merged.Max() != 39_999*time.Microsecond {
		t.Fatalf("merged count %d min %v max %v", merged.Count(), merged.Min(), merged.Max())
	}
	if got, want := merged.Mean(), 19_999500*time.Nanosecond; got != want {
		t.Errorf("mean %v, want %v", got, want)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			d += 997
			h.Record(d % time.Second)
		}
	})
}
